"""The official ACP SDKs' example agents, driven through the whole orchestrator path.

Python SDK 0.12.1 (``echo_agent.py``, ``agent.py`` from its sdist) and the
TypeScript SDK 1.9.0's compiled example agent, installed by ``cap peers
install acp-python-sdk acp-ts-sdk``; a missing one fails.  The TS agent plays
a scripted turn (message, a read tool call, an edit that asks permission)
with 1 s pauses, which is what the permission and cancel cases use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from tests.driver_acp.conftest import peer_program
from trio_cap.actors.orchestrator import Orchestrator, Session
from trio_cap.events.kinds import (
    CancelRequested,
    CapSessionReady,
    PermissionDecided,
    PermissionRequest,
    SessionIdle,
    TextChunk,
    ToolCallEnd,
    ToolCallStart,
)

pytestmark = pytest.mark.peers  # the official SDKs' peers (cap peers install)

SECONDS = 60


def log_of(orch: Orchestrator, session: Session, kind: type | None = None) -> list[Any]:
    return [env.event for env in orch.log.read(1, session.id)
            if kind is None or type(env.event) is kind]


async def wait_for(orch: Orchestrator, session: Session, kind: type) -> Any:
    """The first event of ``kind`` in the session's log, waiting as the log grows."""
    while True:
        found = log_of(orch, session, kind)
        if found:
            return found[0]
        seen = orch.log.last_seq
        await orch.wait_until(lambda s, seen=seen: s.last_seq > seen)


def ts_agent() -> str:
    return "acp:" + str(peer_program("acp-ts-sdk"))


async def test_python_echo_agent_full_turns(orch: Orchestrator, workdir: Path) -> None:
    agent = "acp:" + str(peer_program("acp-python-sdk", "acp-echo-agent"))
    with trio.fail_after(SECONDS):
        session = await orch.start_session(agent, "acp", cwd=workdir)
        first = await session.run_turn("hello")
        second = await session.run_turn("second turn")
        view = await session.close()
    assert (first.text, first.stop_reason) == ("hello", "end_turn")
    assert (second.text, second.stop_reason) == ("second turn", "end_turn")
    assert view.status == "completed"
    ready = log_of(orch, session, CapSessionReady)[0]
    assert ready.session_id and ready.meta["acp"]["protocol_version"] == 1


async def test_python_example_agent_turn(orch: Orchestrator, workdir: Path) -> None:
    agent = "acp:" + str(peer_program("acp-python-sdk", "acp-example-agent"))
    with trio.fail_after(SECONDS):
        session = await orch.start_session(agent, "acp", cwd=workdir)
        turn = await session.run_turn("ping")
        view = await session.close()
    assert turn.text == "Client sent:ping" and turn.stop_reason == "end_turn"
    assert view.status == "completed"
    assert log_of(orch, session, CapSessionReady)[0].meta["acp"]["agent"]["name"]


async def test_ts_agent_turn_with_tool_calls_and_permission_allowed(
        orch: Orchestrator, workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        session = await orch.start_session(ts_agent(), "acp", cwd=workdir, permissions="ask",
                                           human=True)
        await session.inject("fix the config")
        view = await session.wait_status("input_required")
        req = log_of(orch, session, PermissionRequest)[0]
        assert view.waiting_on == f"permission:{req.req_id}"
        assert req.tool == "Edit" and [o["option_id"] for o in req.meta["acp"]["options"]] == [
            "allow", "reject"]
        await session.decide(req.req_id, "allow_once")
        await session.wait_status("ready")
        view = await session.close()
    text = "".join(t.text for t in log_of(orch, session, TextChunk))
    assert "Perfect!" in text
    assert [s.call_id for s in log_of(orch, session, ToolCallStart)] == ["call_1", "call_2"]
    assert {e.call_id for e in log_of(orch, session, ToolCallEnd)} == {"call_1", "call_2"}
    assert log_of(orch, session, SessionIdle)[-1].stop_reason == "end_turn"
    assert view.status == "completed"


async def test_ts_agent_permission_rejected(orch: Orchestrator, workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        session = await orch.start_session(ts_agent(), "acp", cwd=workdir, permissions="ask",
                                           human=True)
        await session.inject("fix the config")
        await session.wait_status("input_required")
        req = log_of(orch, session, PermissionRequest)[0]
        await session.decide(req.req_id, "deny", reason="not today")
        await session.wait_status("ready")
        await session.close()
    text = "".join(t.text for t in log_of(orch, session, TextChunk))
    assert "prefer not" in text and "Perfect!" not in text
    assert log_of(orch, session, SessionIdle)[-1].stop_reason == "end_turn"


async def test_ts_agent_policy_decides_the_permission(orch: Orchestrator, workdir: Path) -> None:
    # The example edits /home/user/project/config.json, outside the workspace: trio-cap
    # rates it high, and policy allow without --allow-high-risk refuses it.
    with trio.fail_after(SECONDS):
        session = await orch.start_session(ts_agent(), "acp", cwd=workdir, permissions="allow")
        turn = await session.run_turn("fix the config")
        await session.close()
    decided = log_of(orch, session, PermissionDecided)[0]
    assert (decided.decision, decided.risk, decided.by) == ("deny", "high", "policy:allow")
    assert "prefer not" in turn.text and turn.stop_reason == "end_turn"


async def test_ts_agent_cancel_while_a_permission_is_pending(
        orch: Orchestrator, workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        session = await orch.start_session(ts_agent(), "acp", cwd=workdir, permissions="ask",
                                           human=True)
        await session.inject("fix the config")
        await session.wait_status("input_required")
        await session.cancel()
        await session.wait_status("ready")
        turn_end = log_of(orch, session, SessionIdle)[-1]
        # the session goes on: a second turn runs normally
        await session.inject("again")
        await session.wait_status("input_required")
        await session.decide(log_of(orch, session, PermissionRequest)[-1].req_id, "allow_once")
        await session.wait_status("ready")
        await session.close()
    assert turn_end.stop_reason == "cancelled"
    assert log_of(orch, session, SessionIdle)[-1].stop_reason == "end_turn"


async def test_ts_agent_cancel_mid_turn(orch: Orchestrator, workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        session = await orch.start_session(ts_agent(), "acp", cwd=workdir, permissions="ask",
                                           human=True)
        await session.inject("work")
        await wait_for(orch, session, ToolCallStart)
        await session.cancel()
        await session.wait_status("ready")
        view = await session.close()
    assert log_of(orch, session, CancelRequested)
    assert log_of(orch, session, SessionIdle)[-1].stop_reason == "cancelled"
    assert not log_of(orch, session, PermissionRequest)
    assert view.status == "completed"
