"""Hypothesis against the settle machine, and record-and-replay equality.

Fuzz: random bytes (raw, and fragments of real escape sequences, prompts,
dialogs, questions and rule lines) at random times, interleaved with prompts,
answers, cancels, resizes and an exit: the outputs are only the kit's values
and encodable events, never an exception.

Replay: a real bash session's machine inputs (bytes with the times they
arrived, ticks, frames) are recorded by the connector; a fresh machine fed the
record produces exactly the events and turn ends the session delivered.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.driver_pty.ptylib import bash, driven, manifest
from trio_cap.actors.bindings.base import AgentBatch, KillAgent, ToAgent, TurnEnded
from trio_cap.actors.bindings.pty.connector import replay, settings_for
from trio_cap.actors.bindings.pty.machine import PtyMachine
from trio_cap.actors.ids import SequentialIds
from trio_cap.events.kinds import (
    AskUser,
    AskUserAnswer,
    Cancel,
    ContentBlock,
    Event,
    UserInputInject,
)

FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "150")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

PIECES = [
    b"\x1b[", b"\x1b[?1049h", b"\x1b[?1049l", b"\x1b[?47h", b"\x1b[?2004h", b"\x1b[2J",
    b"\x1b[H", b"\x1b[2K", b"\x1b[1A", b"\x1b[3;7r", b"\x1b[r", b"\x1b7", b"\x1b8", b"\x1b[3J",
    b"\x1b[38;2;1;2;3m", b"\x1b]0;title\x07", b"\x1b[>4;2m", b"\r\n", b"\n", b"\r", b"\x08",
    b"\t", "中文".encode(), "é".encode()[:1], b"\xff\xfe", b"tcap$ ", b">>> ", b"> ",
    b"Do you trust the files in this folder?\r\n1. Yes\r\n2. No\r\n", b"Continue? (y/n) ",
    b"Pick one:\r\n- a\r\n- b", b"> Read(x)\r\n", b"< Read ok\r\n", b"## Plan\r\n- [x] a\r\n",
    b"_thinking_\r\nhmm\r\n\r\n", b"Error: boom\r\n", "✶ Thinking… (esc to interrupt)".encode(),
]
PARSE = {
    "tool_call_start": r"^> (?P<tool>\w+)\((?P<args>.*)\)$",
    "tool_call_end": r"^< (?P<tool>\w+) (?P<status>\w+)$",
    "plan_section": r"^## Plan$", "thought_section": r"^_thinking_$",
    "ask_yes_no": r"\(y/n\)\s*$", "ask_options": r"^Pick one:", "error_lines": [r"^Error: "],
}

chunk = st.one_of(st.binary(max_size=64), st.sampled_from(PIECES),
                  st.lists(st.sampled_from(PIECES), max_size=6).map(b"".join))
step = st.one_of(
    st.tuples(st.just("data"), chunk, st.floats(0, 0.5)),
    st.tuples(st.just("tick"), st.floats(0, 1.0)),
    st.tuples(st.just("inject"), st.text(max_size=30)),
    st.tuples(st.just("answer"), st.sampled_from([None, True, False, "yes", "a", "Yes", 3])),
    st.tuples(st.just("cancel"), st.sampled_from(["current_turn", "session"])),
    st.tuples(st.just("resize"), st.integers(1, 300), st.integers(1, 100)),
    st.tuples(st.just("exit"), st.integers(-15, 5)),
)
ENCODE = msgspec.msgpack.Encoder()


def check(outputs: list[Any]) -> None:
    for out in outputs:
        assert isinstance(out, Event | ToAgent | TurnEnded | KillAgent), out
        if isinstance(out, Event):
            ENCODE.encode(out)
        if isinstance(out, ToAgent):
            assert isinstance(out.data, bytes)


@FUZZ
@given(steps=st.lists(step, max_size=40),
       cancel=st.sampled_from(["graceful", "hard", "none"]), paste=st.booleans(),
       raw=st.booleans())
def test_any_bytes_times_and_frames_give_typed_outputs(
        steps: list[tuple[Any, ...]], cancel: str, paste: bool, raw: bool) -> None:
    m = manifest("fuzz", ["x"], ready=r"^tcap\$\s*$", idle=[r"^tcap\$\s*$", r"^>>>\s*$"],
                 cancel=cancel, paste=paste, parse=PARSE, pty={"cols": 40, "rows": 12})
    machine = PtyMachine(settings_for(m, options={"pty.raw_bytes": raw}),
                         new_id=SequentialIds().new)
    now, asks = 0.0, []
    for s in steps:
        kind = s[0]
        if kind == "data":
            now += s[2]
            out = machine.receive_data(s[1], now)
        elif kind == "tick":
            now += s[1]
            out = machine.tick(now)
        elif kind == "inject":
            out = machine.send(UserInputInject(content=(ContentBlock(text=s[1]),)))
        elif kind == "answer":
            out = machine.send(AskUserAnswer(ask_id=asks[-1] if asks else "ask-x", value=s[1]))
        elif kind == "cancel":
            out = machine.send(Cancel(scope=s[1]))
        elif kind == "resize":
            machine.resize(s[1], s[2])
            out = []
        else:
            out = machine.process_exited(f"exit {s[1]}", s[1])
        check(out)
        asks += [o.ask_id for o in out if isinstance(o, AskUser)]
        deadline = machine.deadline()
        assert deadline is None or math.isfinite(deadline)
    check(machine.tick(now + 10.0))


@FUZZ
@given(data=st.lists(chunk, max_size=30))
def test_the_same_bytes_at_the_same_times_give_the_same_events(data: list[bytes]) -> None:
    m = manifest("fuzz", ["x"], ready=r"\S", idle=[r"^tcap\$\s*$"], parse=PARSE)
    record: list[tuple[str, tuple[Any, ...]]] = [("init", (0.0,))]
    for i, piece in enumerate(data):
        record.append(("receive_data", (piece, 0.07 * i)))
        if i == 3:
            record.append(("send", (UserInputInject(content=(ContentBlock(text="go"),)),)))
    record.append(("tick", (100.0,)))
    first = replay(settings_for(m), record, new_id=SequentialIds().new)
    again = replay(settings_for(m), record, new_id=SequentialIds().new)
    assert first == again


async def test_a_recorded_bash_session_replays_to_the_same_events(tmp_path: Path) -> None:
    record: list[Any] = []
    m = bash(parse={"error_lines": ["command not found"]})
    async with driven(m, tmp_path, options={"pty.record": record}) as d:
        await d.turn("echo one; seq 1 300")
        await d.turn("no-such-command-here")
        await d.turn("for i in 1 2\ndo echo x$i\ndone")
    delivered = [x for item in d.items
                 for x in (item.events if isinstance(item, AgentBatch) else [item])
                 if isinstance(x, Event | TurnEnded)]
    assert len([x for x in delivered if isinstance(x, TurnEnded)]) == 3
    assert record[0][0] == "init" and any(method == "receive_data" for method, _ in record)
    replayed = [x for x in replay(settings_for(m), record, new_id=SequentialIds().new)
                if isinstance(x, Event | TurnEnded)]
    assert replayed == delivered


@FUZZ
@given(lines=st.lists(st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF,
                                            exclude_categories=("Cc", "Cf")),
                              max_size=150),
                      min_size=1, max_size=120),
       cuts=st.lists(st.integers(1, 400), max_size=30))
def test_a_turns_text_does_not_depend_on_how_the_reads_are_cut(
        lines: list[str], cuts: list[int]) -> None:
    """Line-oriented output (longer than the screen, lines wider than it) gives the same
    turn text whether it arrives in one read or in reads cut anywhere, UTF-8 included
    (printable text: a C1 control such as U+009B is an 8-bit CSI to a terminal, and pyte
    drops the rest of a run after a zero-width format character)."""
    m = manifest("cuts", ["x"], ready=r"^tcap\$\s*$", idle=[r"^tcap\$\s*$"],
                 pty={"cols": 40, "rows": 12})
    body = "".join(f"{line}\r\n" for line in lines).encode() + b"tcap$ "

    def run(pieces: list[bytes]) -> str:
        machine = PtyMachine(settings_for(m), new_id=SequentialIds().new)
        machine.receive_data(b"tcap$ ", 0.0)
        machine.tick(1.0)
        out = machine.send(UserInputInject(content=(ContentBlock(text="go"),)))
        out += machine.receive_data(b"go", 1.0)
        out += machine.tick(1.1)  # the Enter
        t = 1.2
        for piece in pieces:
            out += machine.receive_data(piece, t)
            t += 0.01
        out += machine.tick(t + 1.0)
        assert [o for o in out if isinstance(o, TurnEnded)] == [TurnEnded("end_turn")]
        return "".join(o.text for o in out if type(o).__name__ == "TextChunk")

    pieces, rest = [], b"\r\n" + body
    for cut in cuts:
        if not rest:
            break
        pieces.append(rest[:cut])
        rest = rest[cut:]
    pieces.append(rest)
    whole = run([b"\r\n" + body])
    assert run([p for p in pieces if p]) == whole
    expected = [line.rstrip() for line in lines]
    while expected and not expected[-1]:
        expected.pop()
    while expected and not expected[0]:
        expected.pop(0)
    assert whole.splitlines() == expected  # a line wider than the screen is one line
