"""trio-cap's TUI agent (``cap agent --cap-speak pty``) driven by trio-cap's PTY driver.

A real subprocess on a real pseudo-terminal drawing a realistic TUI (alternate
screen, a spinner repainting ten times a second, a box-drawn input box, a
prompt glyph), read back through the VT screen and the cap-agent manifest's
``[parse]`` rules: every rule must fire, and no chrome may reach the text.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import trio

from trio_cap.actors.orchestrator import Orchestrator
from trio_cap.events.kinds import (
    AskUser,
    CapError,
    CapSessionReady,
    Plan,
    TextChunk,
    Thought,
    ToolCallEnd,
    ToolCallStart,
    UserInputInject,
)

from .conftest import SECONDS, events, start, turn_answering

CHROME = ("╭", "╰", "│", "─", "\u276f", "✻ Worked", "? for shortcuts", "esc to interrupt",
          "Working…", "waiting for permission", "cap-agent v", "⎿ Allowed", "(y/n)")
"""Pieces of the TUI's frame, spinner, hints and echoes: none may be in turn text."""


def no_chrome(text: str) -> None:
    leaked = [piece for piece in CHROME if piece in text]
    assert not leaked, f"chrome in the turn text: {leaked} in {text!r}"


async def test_bundled_manifest_ready_turns_and_clean_text(orch: Orchestrator,
                                                           workdir: Path) -> None:
    session = await start(orch, "cap-agent", workdir)
    with trio.fail_after(SECONDS):
        first = await session.run_turn("hello there")
        second = await session.run_turn("and again")
        view = await session.close()
    assert view.status == "completed", view
    assert events(orch, session, CapSessionReady)
    assert first.stop_reason == second.stop_reason == "end_turn"
    assert first.text.startswith('You said: "hello there". I am cap-agent'), first.text
    assert second.text.startswith('You said: "and again".'), second.text
    for text in (first.text, second.text):
        no_chrome(text)
        assert "hello there" not in text.split(".")[0][:10]  # the echoed prompt is not text
    # each prompt reached the agent once: nothing was typed twice or before ready
    assert [e.text for e in events(orch, session, UserInputInject)] == ["hello there",
                                                                        "and again"]


async def test_plan_thought_and_error_rules(orch: Orchestrator, workdir: Path) -> None:
    session = await start(orch, "cap-agent", workdir)
    with trio.fail_after(SECONDS):
        plan = await session.run_turn("plan: read the code; write the fix")
        thought = await session.run_turn("think: the cache is stale")
        failed = await session.run_turn("fail: disk_full")
        await session.close()
    plans = events(orch, session, Plan)
    assert [[(e.content, e.status) for e in p.entries] for p in plans] == [
        [("read the code", "pending"), ("write the fix", "pending")],
        [("read the code", "completed"), ("write the fix", "completed")],
    ]
    assert plan.text == ""  # the whole turn was its plan
    (th,) = events(orch, session, Thought)
    assert th.text == "the cache is stale"
    assert thought.text == ""
    errors = [e for e in events(orch, session, CapError) if "disk_full" in e.message]
    assert len(errors) == 1 and errors[0].message.startswith("✗ Error: scripted failure")
    assert failed.stop_reason == "end_turn"  # the TUI shows the error; its turn still ends
    no_chrome(failed.text)


async def test_yes_no_permission_answered_and_tool_lines(orch: Orchestrator,
                                                         workdir: Path) -> None:
    session = await start(orch, "cap-agent", workdir, human=True)
    with trio.fail_after(SECONDS):
        asks = await turn_answering(orch, session, "write notes.txt: typed back", ["yes"])
        denied = await turn_answering(orch, session, "write other.txt: never", ["no"])
        await session.close()
    (ask,) = asks
    assert ask.prompt == "? Allow Write(notes.txt)? (y/n)"
    assert ask.form == {"type": "string", "enum": ["yes", "no"]}
    assert len(denied) == 1
    assert (workdir / "notes.txt").read_text() == "typed back\n"
    assert not (workdir / "other.txt").exists()
    starts = events(orch, session, ToolCallStart)
    ends = events(orch, session, ToolCallEnd)
    assert [(s.name, s.input) for s in starts] == [("Write", {"args": "notes.txt"}),
                                                   ("Write", {"args": "other.txt"})]
    assert [(e.call_id, e.is_error) for e in ends] == [(starts[0].call_id, False),
                                                       (starts[1].call_id, True)]
    text = "".join(e.text for e in events(orch, session, TextChunk))
    assert "Wrote " in text and "bytes to notes.txt." in text
    assert "Permission to use Write on other.txt was denied" in text
    no_chrome(text)


async def test_ask_options_answer_typed_back(orch: Orchestrator, workdir: Path) -> None:
    session = await start(orch, "cap-agent", workdir, human=True)
    with trio.fail_after(SECONDS):
        (ask,) = await turn_answering(orch, session, "ask: which colour [red|blue]", ["blue"])
        await session.close()
    assert ask.prompt == "? which colour (red/blue)"
    assert ask.form == {"type": "string", "oneOf": [{"const": "red", "title": "red"},
                                                    {"const": "blue", "title": "blue"}]}
    text = "".join(e.text for e in events(orch, session, TextChunk))
    assert text.strip() == "You answered blue."


async def test_dropped_enter_is_sent_again(orch: Orchestrator, workdir: Path,
                                           manifest_with: Callable[..., Path]) -> None:
    session = await start(orch, manifest_with("--tui-drop-enters", "1"), workdir)
    with trio.fail_after(SECONDS):
        first = await session.run_turn("are you there")
        second = await session.run_turn("still there")
        await session.close()
    assert first.stop_reason == "end_turn"
    # the first Enter was dropped and the text stayed typed; one more Enter sent it, once
    assert first.text.count('You said: "are you there"') == 1, first.text
    assert second.text.startswith('You said: "still there"'), second.text
    assert not [e for e in events(orch, session, CapError)]


async def test_cancel_a_long_turn_then_go_on(orch: Orchestrator, workdir: Path) -> None:
    session = await start(orch, "cap-agent", workdir)
    with trio.fail_after(SECONDS):
        accepted = await session.inject("wait 120")
        await orch.wait_until(lambda s: s.sessions.sessions[session.id].status == "working")
        await session.cancel()
        await orch.wait_until(lambda s: s.sessions.sessions[session.id].ended_turn >= 1)
        after = await session.run_turn("back again")
        await session.close()
    assert accepted.turn == 1
    assert session.view is not None
    stops = [e.stop_reason for e in events(orch, session)
             if type(e).__name__ == "SessionTurnEnded"]
    assert stops == ["cancelled", "end_turn"]
    assert after.text.startswith('You said: "back again"'), after.text
    no_chrome(after.text)


async def test_multi_line_prompt_goes_as_one_paste(orch: Orchestrator, workdir: Path) -> None:
    session = await start(orch, "cap-agent", workdir, human=True)
    with trio.fail_after(SECONDS):
        await turn_answering(orch, session, "think: first\nwrite both.txt: two lines", ["yes"])
        await session.close()
    # one prompt with two commands: bracketed paste kept it whole (a typed newline would
    # have been Enter and sent the first line alone)
    assert [e.text for e in events(orch, session, Thought)] == ["first"]
    assert [e.name for e in events(orch, session, ToolCallStart)] == ["Write"]
    assert [e.prompt for e in events(orch, session, AskUser)] == [
        "? Allow Write(both.txt)? (y/n)"]
    assert (workdir / "both.txt").read_text() == "two lines\n"
    assert [e.text for e in events(orch, session, UserInputInject)] == [
        "think: first\nwrite both.txt: two lines"]
