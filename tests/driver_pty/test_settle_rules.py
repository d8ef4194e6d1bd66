"""The settle machine's rules (P1–P15 in machine.py), with synthetic bytes and times.

No process and no clock: each test feeds what a program would print at a given
``now`` and ticks the machine, as the shell does, then checks the outputs.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.driver_pty.ptylib import manifest
from trio_cap.actors.bindings.base import KillAgent, ToAgent, TurnEnded
from trio_cap.actors.bindings.pty.connector import settings_for
from trio_cap.actors.bindings.pty.machine import PtyMachine, PtyState
from trio_cap.actors.ids import SequentialIds
from trio_cap.events.kinds import (
    AskUser,
    AskUserAnswer,
    CapError,
    CapSessionReady,
    ContentBlock,
    Plan,
    PtyRawBytes,
    TextChunk,
    Thought,
    ToolCallEnd,
    ToolCallStart,
    UserInputInject,
)

PROMPT = b"tcap$ "
PARSE = {
    "tool_call_start": r"^> (?P<tool>\w+)\((?P<args>.*)\)$",
    "tool_call_end": r"^< (?P<tool>\w+) (?P<status>ok|failed)$",
    "plan_section": r"^## Plan$",
    "thought_section": r"^_thinking_$",
    "ask_yes_no": r"\(y/n\)\s*$",
    "ask_options": r"^Pick one:",
    "error_lines": [r"^Error: "],
}


class Run:
    """A machine, its clock and everything it returned."""

    def __init__(self, **kw: Any) -> None:
        opts = kw.pop("options", {})
        m = manifest("t", ["t"], ready=kw.pop("ready", r"^tcap\$\s*$"),
                     idle=kw.pop("idle", [r"^tcap\$\s*$"]), parse=kw.pop("parse", PARSE), **kw)
        self.m = PtyMachine(settings_for(m, options=opts), new_id=SequentialIds().new, now=0.0)
        self.t = 0.0
        self.out: list[Any] = []

    def at(self, t: float, data: bytes = b"") -> list[Any]:
        self.t = t
        got = self.m.receive_data(data, t) if data else self.m.tick(t)
        self.out += got
        return got

    def settle(self) -> list[Any]:
        """Let the screen go quiet: tick at every deadline until there is none."""
        got: list[Any] = []
        for _ in range(20):
            deadline = self.m.deadline()
            if deadline is None:
                break
            got += self.at(max(deadline, self.t))
        return got

    def step(self) -> list[Any]:
        """Tick once, at the machine's next deadline."""
        deadline = self.m.deadline()
        assert deadline is not None
        return self.at(max(deadline, self.t))

    def send(self, frame: Any) -> list[Any]:
        got = self.m.send(frame)
        self.out += got
        return got

    def ready(self) -> None:
        self.at(0.01, PROMPT)
        assert any(isinstance(o, CapSessionReady) for o in self.settle())

    def prompt(self, text: str, *, echo: bool = True) -> list[Any]:
        """Inject ``text``; the program echoes it; returns what was typed (with the Enter)."""
        typed = self.send(UserInputInject(content=(ContentBlock(text=text),)))
        if echo:
            self.at(self.t + 0.001, text.encode())
        typed += self.at(self.t + 0.05)  # the Enter after the gap
        return [o.data for o in typed if isinstance(o, ToAgent)]

    def reply(self, data: bytes) -> list[Any]:
        self.at(self.t + 0.01, data)
        return self.settle()


def of(outputs: list[Any], kind: type) -> list[Any]:
    return [o for o in outputs if isinstance(o, kind)]


def text(outputs: list[Any]) -> str:
    return "".join(o.text for o in of(outputs, TextChunk))


# ---- P1/P2: ready ---------------------------------------------------------------------


def test_ready_needs_a_quiet_screen_that_matches_ready_when() -> None:
    r = Run()
    r.at(0.0, b"loading")
    assert not r.at(0.5)  # quiet, but ready_when does not match
    r.at(0.6, b"\r\n" + PROMPT)
    assert not r.at(0.7)  # matches, but not quiet for 200 ms yet
    assert of(r.at(0.81), CapSessionReady)
    r.at(0.9, b"\r\n" + PROMPT)
    assert not of(r.settle(), CapSessionReady)  # once


def test_a_screen_that_keeps_changing_never_settles() -> None:
    r = Run()
    for i in range(50):
        r.at(i * 0.1, PROMPT + b"\x1b[G")  # redrawn every 100 ms
        assert not of(r.out, CapSessionReady)
    assert of(r.at(5.0 + 0.2), CapSessionReady)


def test_a_dialog_before_ready_is_reported_once_and_never_ready() -> None:
    r = Run(ready=r"\S")
    r.at(0.0, b"Do you trust the files in this folder?\r\n 1. Yes\r\n 2. No\r\n")
    r.settle()
    r.at(1.0, b"\x1b[G")
    r.settle()
    (err,) = of(r.out, CapError)
    assert err.code == "pty_blocked" and "trust the files" in err.message
    assert not of(r.out, CapSessionReady) and r.m.state is PtyState.STARTING
    assert r.m.blocked_dialog


# ---- P3/P4: holding and typing prompts -------------------------------------------------


def test_a_prompt_before_ready_is_held_then_typed_with_a_separate_enter() -> None:
    r = Run()
    assert r.send(UserInputInject(content=(ContentBlock(text="echo hi"),))) == []
    r.at(0.0, PROMPT)
    got = r.settle()
    writes = [o.data for o in got if isinstance(o, ToAgent)]
    assert writes[:2] == [b"echo hi", b"\r"]
    assert got.index(next(o for o in got if isinstance(o, CapSessionReady))) < got.index(
        next(o for o in got if isinstance(o, ToAgent)))


@pytest.mark.parametrize(("paste_on", "allowed", "expected"), [
    (True, True, b"\x1b[200~a\rb\x1b[201~"),
    (False, True, b"a\rb"),   # the program never asked for paste mode
    (True, False, b"a\rb"),   # the manifest does not allow it
])
def test_multi_line_input_is_one_paste_only_when_both_sides_agree(
        paste_on: bool, allowed: bool, expected: bytes) -> None:
    r = Run(paste=allowed)
    r.at(0.0, (b"\x1b[?2004h" if paste_on else b"") + PROMPT)
    r.settle()
    assert r.prompt("a\nb", echo=False)[0] == expected


def test_one_line_over_a_kib_is_one_paste_and_a_shorter_one_is_typed() -> None:
    r = Run(paste=True)
    r.at(0.0, b"\x1b[?2004h" + PROMPT)
    r.settle()
    long = "x" * 1025
    typed = r.prompt(long, echo=False)
    assert typed == [b"\x1b[200~" + long.encode() + b"\x1b[201~", b"\r"]  # one write, Enter
    assert of(r.reply(b"\r\nok\r\n" + PROMPT), TurnEnded)
    short = "y" * 1000
    assert r.prompt(short, echo=False) == [short.encode(), b"\r"]


@pytest.mark.parametrize(("pty", "options", "window"), [
    ({}, {}, 0.2),                                   # CAP's default
    ({"x-idle-ms": 750}, {}, 0.75),                  # the manifest's
    ({"x-idle-ms": 750}, {"pty.idle_window": 0.05}, 0.05),  # the session's wins
])
def test_the_idle_window_comes_from_the_manifest_or_the_session(
        pty: dict[str, Any], options: dict[str, Any], window: float) -> None:
    r = Run(pty=pty, options=options)
    r.ready()
    r.prompt("echo hi")
    r.at(r.t + 0.01, b"hi\r\n" + PROMPT)
    quiet_from = r.t
    assert r.m.deadline() == pytest.approx(quiet_from + window)
    assert not of(r.at(quiet_from + window * 0.9), TurnEnded)  # not quiet long enough yet
    assert of(r.at(quiet_from + window), TurnEnded)


def test_a_paste_cannot_end_itself_early() -> None:
    r = Run(paste=True)
    r.at(0.0, b"\x1b[?2004h" + PROMPT)
    r.settle()
    typed = r.prompt("x\n\x1b[201~rm -rf /\n", echo=False)[0]
    assert typed.count(b"\x1b[201~") == 1 and typed.endswith(b"\x1b[201~")


# ---- P5: submit verification ---------------------------------------------------------------


def test_no_output_after_enter_re_sends_it_a_bounded_number_of_times() -> None:
    r = Run()
    r.ready()
    r.prompt("echo hi")
    got = r.settle()
    assert [o.data for o in got if isinstance(o, ToAgent)] == [b"\r", b"\r"]
    (err,) = of(got, CapError)
    assert err.code == "pty_blocked" and "still in the agent's input line" in err.message
    assert of(got, TurnEnded) == [TurnEnded("error")]  # failed, not left hanging


def test_no_output_at_all_after_the_enters_is_reported_and_the_turn_fails() -> None:
    r = Run()
    r.ready()
    r.prompt("x", echo=False)
    got = r.settle()
    assert [o.data for o in got if isinstance(o, ToAgent)] == [b"\r", b"\r"]
    (err,) = of(got, CapError)
    assert err.code == "pty_blocked" and "drew no output" in err.message
    assert of(got, TurnEnded) == [TurnEnded("error")]  # the idle prompt still shows


def test_a_dropped_enter_is_recovered_and_the_turn_ends_normally() -> None:
    r = Run()
    r.ready()
    r.prompt("echo hi")
    r.at(r.t + 0.01, b"\x1b[G")  # a redraw after the Enter; the text is still in the line
    assert [o.data for o in r.step() if isinstance(o, ToAgent)] == [b"\r"]
    got = r.reply(b"\r\nhi\r\n" + PROMPT)
    assert text(got) == "hi\n" and of(got, TurnEnded)


@pytest.mark.parametrize("redraw", [True, False])
def test_a_repainted_box_keeping_the_text_over_its_cursor_gets_another_enter(
        redraw: bool) -> None:
    """Codex inline once dropped an Enter right after a turn: it repainted its box with the
    text a row above the cursor, and nothing more.  On a repainted screen that is not idle,
    that text is still unsent; on a plain one it is a command's echo (no second Enter)."""
    r = Run(pty={"x-redraw": redraw})
    r.ready()
    r.prompt("echo hi", echo=False)
    r.at(r.t + 0.01, b"echo hi\r\n")  # the box repainted: the text, the cursor under it
    enters = [o.data for o in r.step() if isinstance(o, ToAgent)]
    assert enters == ([b"\r"] if redraw else [])


# ---- P9/P10: a turn and its text ----------------------------------------------------------------


def test_a_turn_ends_only_at_an_idle_settle_after_a_prompt() -> None:
    r = Run()
    r.ready()
    assert not of(r.reply(b"\r\nnoise\r\n" + PROMPT), TurnEnded)  # nobody asked anything
    r.prompt("echo hi")
    got = r.reply(b"\r\nhi\r\n")
    assert not of(got, TurnEnded)  # settled but not idle: the command is still running
    got = r.reply(PROMPT)
    assert text(r.out) == "hi\n"
    assert of(got, TurnEnded) == [TurnEnded("end_turn")]


def test_chrome_echo_and_idle_lines_never_reach_the_text() -> None:
    r = Run()
    r.ready()
    r.prompt("go")
    frame = ("\r\n\u256d" + "\u2500" * 20 + "\u256e\r\n\u2502 > typing \u2502\r\n\u2570"
             + "\u2500" * 20 + "\u256f\r\n\u2736 Thinking\u2026 (3s \u00b7 esc to interrupt)\r\n"
             "real answer\r\n").encode()
    got = r.reply(frame + PROMPT)
    assert text(got) == "real answer\n"


def test_output_longer_than_the_screen_comes_whole_from_the_scrollback() -> None:
    r = Run()
    r.ready()
    r.prompt("seq 1 500")
    body = b"".join(b"\r\n%d" % i for i in range(1, 501))
    streamed = r.at(r.t + 0.01, body + b"\r\n" + PROMPT)
    assert text(streamed).startswith("1\n2\n")  # what scrolled off is done at once
    r.settle()
    assert text(r.out) == "".join(f"{i}\n" for i in range(1, 501))


def test_lines_stream_while_the_program_is_still_writing() -> None:
    r = Run()
    r.ready()
    r.prompt("slow")
    r.at(r.t + 0.01, b"\r\nfirst\r\nsecond\r\n")
    r.at(r.t + 0.05, b"third\r\n")
    streamed = r.at(r.t + 0.05, b"fourth\r\n")  # no settle yet: the screen is not quiet
    # a line is done once the last two reads wrote below it (a redraw may span two reads)
    assert text(streamed) == "first\nsecond\n"
    got = r.reply(PROMPT)
    assert text(r.out) == "first\nsecond\nthird\nfourth\n" and of(got, TurnEnded)


def test_the_alternate_screen_gives_what_it_gained_since_the_prompt() -> None:
    r = Run(idle=[r"^> $", r"^>\s*$"], ready=r"^>\s*$")
    r.at(0.0, b"\x1b[?1049h\x1b[Hheader\r\nold line\r\n> ")
    r.settle()
    r.prompt("q", echo=False)
    r.at(r.t + 0.01, b"\x1b[2J\x1b[Hheader\r\nold line\r\nnew answer\r\n> q")
    got = r.reply(b"\x1b[4;1H\x1b[K> ")
    assert text(got) == "new answer\n"


# ---- P11: [parse] rules ------------------------------------------------------------------


def test_parse_rules_on_complete_lines() -> None:
    r = Run()
    r.ready()
    r.prompt("work")
    lines = [
        "before", "> Read(notes.txt)", "< Read ok", "> Bash(false)", "< Bash failed",
        "## Plan", "- [x] write tests", "- [~] ship it", "3. docs", "",
        "_thinking_", "maybe this", "or that", "", "Error: model overloaded", "after",
    ]
    got = r.reply(b"\r\n" + "\r\n".join(lines).encode() + b"\r\n" + PROMPT)
    starts, ends = of(got, ToolCallStart), of(got, ToolCallEnd)
    assert [(s.name, s.input) for s in starts] == [("Read", {"args": "notes.txt"}),
                                                   ("Bash", {"args": "false"})]
    assert [(e.call_id, e.is_error) for e in ends] == [(starts[0].call_id, False),
                                                       (starts[1].call_id, True)]
    (plan,) = of(got, Plan)
    assert [(e.content, e.status) for e in plan.entries] == [
        ("write tests", "completed"), ("ship it", "in_progress"), ("docs", "pending")]
    (thought,) = of(got, Thought)
    assert thought.text == "maybe this\nor that"
    (err,) = of(got, CapError)
    assert err.code == "model_unavailable" and err.message == "Error: model overloaded"
    assert text(got) == "before\nError: model overloaded\nafter\n"
    kinds = [type(o).__name__ for o in got if not isinstance(o, ToAgent)]
    assert kinds.index("ToolCallStart") > kinds.index("TextChunk")  # in screen order


# ---- P6/P7/P8: questions ---------------------------------------------------------------------


def test_a_yes_no_question_is_asked_and_the_answer_typed_back() -> None:
    r = Run()
    r.ready()
    r.prompt("rm it")
    got = r.reply(b"\r\nDelete notes.txt? (y/n) ")
    (ask,) = of(got, AskUser)
    assert ask.form == {"type": "string", "enum": ["yes", "no"]}
    assert not of(r.reply(b""), TurnEnded)
    typed = r.send(AskUserAnswer(ask_id=ask.ask_id, value="yes"))
    typed += r.at(r.t + 0.05)
    assert [o.data for o in typed if isinstance(o, ToAgent)] == [b"y", b"\r"]
    got = r.reply(b"y\r\ndeleted\r\n" + PROMPT)
    assert of(got, TurnEnded) and "deleted\n" in text(r.out)


def test_an_unanswered_question_types_nothing_and_holds_the_next_prompt() -> None:
    r = Run()
    r.ready()
    r.prompt("rm it")
    (ask,) = of(r.reply(b"\r\nDelete notes.txt? (y/n) "), AskUser)
    got = r.send(AskUserAnswer(ask_id=ask.ask_id, value=None))
    assert not of(got, ToAgent)
    assert of(got, CapError)[0].code == "pty_blocked"
    assert of(got, TurnEnded) == [TurnEnded("error")]
    assert r.send(UserInputInject(content=(ContentBlock(text="next"),))) == []  # held
    assert not of(r.settle(), ToAgent)
    got = r.reply(b"\r\n" + PROMPT)  # the question is gone: the held prompt goes out
    assert [o.data for o in got if isinstance(o, ToAgent)][:1] == [b"next"]


def test_a_dialog_mid_turn_is_an_ask_with_its_choices() -> None:
    r = Run()
    r.ready()
    r.prompt("go")
    got = r.reply(b"\r\nDo you trust the files in this folder?\r\n\xe2\x9d\xaf 1. Yes, proceed\r\n"
                  b"  2. No, exit\r\n")
    (ask,) = of(got, AskUser)
    assert [c["const"] for c in ask.form["oneOf"]] == ["Yes, proceed", "No, exit"]
    typed = r.send(AskUserAnswer(ask_id=ask.ask_id, value="Yes, proceed"))
    assert [o.data for o in typed if isinstance(o, ToAgent)] == [b"1"]


def test_an_options_question_lists_the_lines_under_it() -> None:
    r = Run()
    r.ready()
    r.prompt("choose")
    got = r.reply(b"\r\nPick one:\r\n- red\r\n- blue")
    (ask,) = of(got, AskUser)
    assert [c["const"] for c in ask.form["oneOf"]] == ["red", "blue"]


# ---- P13: cancel -------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "expected"), [
    ("graceful", ToAgent(b"\x03")),
    ("hard", KillAgent),
    ("none", "cap_cancel_unsupported"),
])
def test_cancel_follows_the_manifest(mode: str, expected: Any) -> None:
    r = Run(cancel=mode)
    r.ready()
    r.prompt("sleep 1000")
    r.reply(b"\r\n")
    got = r.m.cancel("current_turn")
    if expected is KillAgent:
        assert isinstance(got[0], KillAgent)
    elif isinstance(expected, str):
        assert got[0].code == expected
    else:
        assert got == [expected]
        ended = r.reply(b"^C\r\n" + PROMPT)
        assert of(ended, TurnEnded) == [TurnEnded("cancelled")]


def test_cancel_with_nothing_running_does_nothing() -> None:
    r = Run()
    r.ready()
    assert r.m.cancel("current_turn") == []


# ---- P14/P15: the process, raw bytes ------------------------------------------------------


def test_an_unexpected_exit_is_pty_died_after_the_last_text() -> None:
    r = Run()
    r.ready()
    r.prompt("exit 3")
    r.at(r.t + 0.01, b"\r\nlast words\r\n")
    got = r.m.process_exited("the agent exited with code 3", 3)
    assert text(got) == "last words\n"
    assert got[-1] == CapError(code="pty_died", message="the PTY child ended: the agent exited "
                               "with code 3", details={"exit_code": 3})
    assert r.m.process_exited("again", 3) == []
    assert r.m.deadline() is None


def test_an_expected_exit_or_a_kill_is_not_a_death() -> None:
    r = Run()
    r.ready()
    assert not of(r.m.process_exited("gone", -9, True), CapError)
    r = Run(cancel="hard")
    r.ready()
    r.prompt("x")
    r.m.cancel("current_turn")
    assert not of(r.m.process_exited("killed", -15), CapError)


def test_raw_bytes_only_for_subscribers_who_opted_in() -> None:
    assert not of(Run().at(0.0, b"abc"), PtyRawBytes)
    r = Run(options={"pty.raw_bytes": True})
    chunks = [b"\x1b[1ma", b"b\xe4", b"\xb8\xad"]
    got = [o for i, c in enumerate(chunks) for o in r.at(i * 0.01, c)]
    assert [base64.b64decode(o.bytes_b64) for o in of(got, PtyRawBytes)] == chunks


def test_an_ad_hoc_prompt_is_learned_at_ready() -> None:
    r = Run(ready=r"\S", idle=[r"^>\s*$", "^\u276f\\s*$"])  # the manifest's defaults
    r.at(0.0, b"bash-5.2$ ")
    r.settle()
    assert r.m.prompt_line == "bash-5.2$"
    r.prompt("echo hi")
    got = r.reply(b"\r\nhi\r\nbash-5.2$ ")
    assert text(got) == "hi\n" and of(got, TurnEnded)


def test_a_broken_screen_feed_is_a_parse_error_not_an_exception() -> None:
    r = Run()

    def boom(data: bytes) -> None:
        raise ValueError("emulator bug")

    r.m.screen.feed = boom  # type: ignore[method-assign]
    (err,) = of(r.at(0.0, b"x"), CapError)
    assert err.code == "parse_failed" and "emulator bug" in err.message


def test_queued_input_is_typed_mid_turn_and_each_prompt_gets_its_turn_end() -> None:
    r = Run(queued=True, pty={"queued_input_supported": True})
    r.ready()
    r.prompt("sleep 1")
    r.reply(b"\r\n")
    typed = r.prompt("echo later", echo=False)
    assert typed == [b"echo later", b"\r"]  # typed at once: the program reads it when ready
    got = r.reply(b"tcap$ echo later\r\nlater\r\n" + PROMPT)
    assert of(got, TurnEnded) == [TurnEnded("end_turn")] * 2


def test_without_queued_input_a_prompt_mid_turn_waits_for_the_turn_end() -> None:
    r = Run()
    r.ready()
    r.prompt("sleep 1")
    r.reply(b"\r\n")
    assert r.send(UserInputInject(content=(ContentBlock(text="next"),))) == []
    r.at(r.t + 0.01, PROMPT)
    got = r.step()  # the settle that ends the turn types the held prompt
    assert of(got, TurnEnded) == [TurnEnded("end_turn")]
    assert got.index(TurnEnded("end_turn")) < got.index(ToAgent(b"next"))


def test_a_cancel_right_after_the_prompt_never_presses_enter_again() -> None:
    r = Run()
    r.ready()
    r.prompt("sleep 1000")
    assert r.m.cancel("current_turn") == [ToAgent(b"\x03")]
    got = r.reply(b"^C\r\n" + PROMPT)
    assert ToAgent(b"\r") not in got and of(got, TurnEnded) == [TurnEnded("cancelled")]


def test_a_line_wider_than_the_screen_is_one_line_of_text() -> None:
    r = Run(pty={"cols": 20, "rows": 6})
    r.ready()
    long = "word " * 12
    r.prompt("echo " + long)  # the echo itself wraps too
    got = r.reply(b"\r\n" + long.encode() + b"\r\n" + PROMPT)
    assert text(r.out) == long.rstrip() + "\n" and of(got, TurnEnded)
