"""trio-cap's own agent (``cap-agent``, stream-json side) driven by the stream-json driver.

Both directions of the binding share ``frames.py``: what our agent encodes,
our driver decodes.  The agent runs as a real subprocess through an ad-hoc
``stream-json:CMD`` agent spec, so resolution, the session actor, the
connector and the log are all on the path.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_cap.actors.bindings.stream_json.connector import StreamJsonConnector
from trio_cap.actors.orchestrator import Orchestrator, open_orchestrator
from trio_cap.events.kinds import (
    CapError,
    CapSessionReady,
    PermissionRequest,
    SessionIdle,
    TextChunk,
    Thought,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

SECONDS = 60
REPO = Path(__file__).resolve().parents[2]


def events_of(orch: Orchestrator, session_id: str, kind: type) -> list[Any]:
    return [env.event for env in orch.log.read(1, session_id) if type(env.event) is kind]


@pytest.fixture
def wrapper(tmp_path: Path) -> tuple[Path, Path]:
    """An executable ``cap-agent`` (helper-3's entry point) and an empty workdir."""
    script = tmp_path / "cap-agent"
    script.write_text(
        f"#!/bin/sh\nexec {sys.executable} -c "
        "'import sys; from actors.cli.cap_agent import main; sys.exit(main())' \"$@\"\n")
    script.chmod(0o755)
    workdir = tmp_path / "work"
    workdir.mkdir()
    return script, workdir


@pytest.fixture
async def agent(wrapper: tuple[Path, Path]) -> AsyncIterator[tuple[Orchestrator, str, Path]]:
    """An orchestrator with the stream-json connector and an ad-hoc spec for ``cap-agent``."""
    script, workdir = wrapper
    env = {"PYTHONPATH": str(REPO)}
    async with open_orchestrator(grace=5.0) as orch:
        orch.connectors["stream-json"] = StreamJsonConnector(env=env)
        yield orch, f"stream-json:{script}", workdir


async def test_turns_thoughts_tools_and_usage(agent: tuple[Orchestrator, str, Path]) -> None:
    orch, spec, workdir = agent
    with trio.fail_after(SECONDS):
        session = await orch.start_session(spec, cwd=workdir, permissions="allow")
        first = await session.run_turn("think: quietly")
        second = await session.run_turn("write notes.txt: hello")
        view = await session.close()
    assert view.status == "completed", view
    assert first.stop_reason == second.stop_reason == "end_turn"
    sid = session.id
    assert "quietly" in "".join(t.text for t in events_of(orch, sid, Thought))
    (ready,) = events_of(orch, sid, CapSessionReady)
    assert ready.session_id
    (request,) = events_of(orch, sid, PermissionRequest)
    assert request.tool == "Write"
    (start,) = events_of(orch, sid, ToolCallStart)
    (end,) = events_of(orch, sid, ToolCallEnd)
    assert end.call_id == start.call_id and not end.is_error
    assert (workdir / "notes.txt").read_text().startswith("hello")
    assert len(events_of(orch, sid, Usage)) == 2
    # Text arrived once: streamed deltas, the assistant frame only confirming.
    texts = [c for c in events_of(orch, sid, TextChunk) if c.channel == "assistant"]
    assert second.text and second.text == "".join(
        c.text for c in texts if c.message_id in {t.message_id for t in texts[-1:]})


async def test_permission_denied_keeps_the_file_unwritten(
    agent: tuple[Orchestrator, str, Path]
) -> None:
    orch, spec, workdir = agent
    with trio.fail_after(SECONDS):
        session = await orch.start_session(spec, cwd=workdir, permissions="deny")
        await session.run_turn("write notes.txt: hello")
        await session.close()
    assert not (workdir / "notes.txt").exists()
    (end,) = events_of(orch, session.id, ToolCallEnd)
    assert end.is_error


async def test_failing_turn_reports_the_agents_error_code(
    agent: tuple[Orchestrator, str, Path]
) -> None:
    orch, spec, workdir = agent
    with trio.fail_after(SECONDS):
        session = await orch.start_session(spec, cwd=workdir)
        result = await session.run_turn("fail: rate_limit")
        view = await session.close()
    assert result.stop_reason == "error"
    errors = events_of(orch, session.id, CapError)
    assert [e.code for e in errors] == ["rate_limit"]  # once, not again from the result
    assert view.status == "failed" and view.last_error


async def test_interrupt_then_next_turn(agent: tuple[Orchestrator, str, Path]) -> None:
    orch, spec, workdir = agent
    with trio.fail_after(SECONDS):
        session = await orch.start_session(spec, cwd=workdir)
        await session.inject("wait 30")
        await session.wait_status("working")
        await session.cancel()
        await orch.wait_until(lambda s: s.sessions.sessions[session.id].ended_turn >= 1)
        after = await session.run_turn("think: again")
        await session.close()
    stops = [i.stop_reason for i in events_of(orch, session.id, SessionIdle)]
    assert stops == ["cancelled", "end_turn"]
    assert after.stop_reason == "end_turn"


async def test_agent_killed_mid_turn_fails_the_session(
    agent: tuple[Orchestrator, str, Path]
) -> None:
    orch, spec, workdir = agent
    with trio.fail_after(SECONDS):
        session = await orch.start_session(spec, cwd=workdir)
        await session.inject("wait 30")
        await session.wait_status("working")
        (ready,) = events_of(orch, session.id, CapSessionReady)
        os.kill(ready.meta["stream_json"]["pid"], signal.SIGKILL)
        view = await session.wait_terminal()
    assert view.status == "failed"
    assert view.last_error and "SIGKILL" in view.last_error
