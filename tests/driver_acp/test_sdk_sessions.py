"""The handshake's choices and the turn's interruptions against an agent on the official
Python SDK (``exerciser_agent.py``), through the orchestrator, the connector and the log.

``authenticate`` with the method named by ``TRIO_CAP_ACP_AUTH_METHOD`` or the
manifest's ``[x-acp] auth-method``; ``session/load`` of the agent session a
previous run recorded (its history replayed and recorded), and ``session/new``
when the load fails; ``session/set_mode`` for ``options["acp_mode"]`` and for
``[x-acp] bypass-mode`` under ``--permissions bypass``; a permission request
allowed, rejected and cancelled while pending; two pending at once (as from two
sub-agents), each answered with its own option or both cancelled; cancel in the middle of
a turn.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.driver_acp.acp_lib import acp_manifest_toml
from tests.driver_acp.conftest import sdk_python
from trio_cap.actors.bindings.acp.connector import AUTH_ENV
from trio_cap.actors.orchestrator import Orchestrator, Session
from trio_cap.events.kinds import (
    AgentRaw,
    CapSessionReady,
    PermissionRequest,
    SessionFailed,
    SessionIdle,
    SessionReady,
    TextChunk,
)

pytestmark = pytest.mark.peers  # the official Python SDK's peer (cap peers install)

SECONDS = 60
EXERCISER = Path(__file__).with_name("exerciser_agent.py")


def command() -> list[str]:
    return [str(sdk_python()), str(EXERCISER)]


def adhoc() -> str:
    return "acp:" + shlex.join(command())


def manifest(tmp_path: Path, x_acp: str) -> str:
    """A manifest file for the exerciser with its own ``[x-acp]`` table."""
    path = tmp_path / "exerciser.toml"
    path.write_text(acp_manifest_toml("exerciser", command(), ready="^never$", x_acp=x_acp))
    return str(path)


def log_of(orch: Orchestrator, session: Session, kind: type) -> list[Any]:
    return [env.event for env in orch.log.read(1, session.id) if type(env.event) is kind]


async def first(orch: Orchestrator, session: Session, kind: type) -> Any:
    """The first event of ``kind`` in the session's log, waiting as the log grows."""
    while not (found := log_of(orch, session, kind)):
        seen = orch.log.last_seq
        await orch.wait_until(lambda s, seen=seen: s.last_seq > seen)
    return found[0]


async def run(session: Session, *steps: dict[str, Any]) -> list[dict[str, Any]]:
    turn = await session.run_turn(json.dumps(list(steps)))
    assert turn.stop_reason == "end_turn", turn
    return json.loads(turn.text)


async def described(session: Session) -> dict[str, Any]:
    (seen,) = await run(session, {"call": "session"})
    return seen["ok"]


# ---- authenticate ----------------------------------------------------------------------------


async def test_the_auth_method_from_the_environment_is_used(orch: Orchestrator,
                                                            workdir: Path) -> None:
    env = {"EXERCISER_AUTH": "exerciser-key", AUTH_ENV: "exerciser-key"}
    with trio.fail_after(SECONDS):
        session = await orch.start_session(adhoc(), "acp", cwd=workdir,
                                           options={"env": env})
        seen = await described(session)
        await session.close()
    assert seen["auth"] == "exerciser-key"
    ready = log_of(orch, session, CapSessionReady)[0]
    assert ready.meta["acp"]["auth_methods"] == ["exerciser-key"]


async def test_the_auth_method_from_the_manifest_is_used(orch: Orchestrator, workdir: Path,
                                                         tmp_path: Path) -> None:
    agent = manifest(tmp_path, 'auth-method = "exerciser-key"')
    with trio.fail_after(SECONDS):
        session = await orch.start_session(agent, "acp", cwd=workdir, options={
            "env": {"EXERCISER_AUTH": "exerciser-key"}})
        seen = await described(session)
        await session.close()
    assert seen["auth"] == "exerciser-key"


async def test_without_an_auth_method_the_session_fails_naming_the_offered_ones(
        orch: Orchestrator, workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        session = await orch.start_session(adhoc(), "acp", cwd=workdir, options={
            "env": {"EXERCISER_AUTH": "exerciser-key"}})
        view = await session.wait_terminal()
    assert view.status == "failed"
    (failed,) = log_of(orch, session, SessionFailed)
    assert "requires authentication (methods: exerciser-key)" in failed.message, failed
    assert AUTH_ENV in failed.message, failed  # and how to choose one


# ---- session/load when resuming ------------------------------------------------------------


async def test_resume_loads_the_recorded_agent_session_and_records_its_history(
        orch: Orchestrator, workdir: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    options = {"env": {"EXERCISER_STATE": str(state)}}
    with trio.fail_after(SECONDS):
        earlier = await orch.start_session(adhoc(), "acp", cwd=workdir, options=options)
        before = await described(earlier)
        await earlier.close()
        recorded = log_of(orch, earlier, SessionReady)[0].agent_session_id
        assert recorded == before["id"]
        later = await orch.start_session(adhoc(), "acp", cwd=workdir, options=options,
                                         session_resume_id=recorded)
        after = await described(later)
        await later.close()
    assert after["id"] == recorded and after["loaded"] == 2  # one prompt, one reply
    assert log_of(orch, later, CapSessionReady)[0].session_id == recorded
    replayed = [r for r in log_of(orch, later, AgentRaw) if r.reason == "replayed_history"]
    assert len(replayed) == 2
    prompt, reply = (json.loads(r.text) for r in replayed)
    assert prompt["sessionUpdate"] == "user_message_chunk"  # the earlier prompt …
    assert json.loads(prompt["content"]["text"]) == [{"call": "session"}]
    assert reply["sessionUpdate"] == "agent_message_chunk"  # … and the earlier reply
    assert json.loads(reply["content"]["text"])[0]["ok"]["id"] == recorded
    assert not [r for r in log_of(orch, later, AgentRaw) if r.reason == "load_failed"]


async def test_a_failed_load_falls_back_to_a_new_session(orch: Orchestrator, workdir: Path,
                                                         tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    with trio.fail_after(SECONDS):
        session = await orch.start_session(adhoc(), "acp", cwd=workdir,
                                           options={"env": {"EXERCISER_STATE": str(state)}},
                                           session_resume_id="forgotten-session")
        seen = await described(session)
        await session.close()
    (failed,) = [r for r in log_of(orch, session, AgentRaw) if r.reason == "load_failed"]
    assert "Resource not found" in failed.text
    assert seen["id"] != "forgotten-session" and seen["loaded"] is None
    assert log_of(orch, session, CapSessionReady)[0].session_id == seen["id"]


# ---- modes -------------------------------------------------------------------------------


async def test_the_acp_mode_option_sets_the_session_mode(orch: Orchestrator,
                                                         workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        session = await orch.start_session(adhoc(), "acp", cwd=workdir,
                                           options={"acp_mode": "plan"})
        seen = await described(session)
        await session.close()
    assert seen["mode"] == "plan"
    assert log_of(orch, session, CapSessionReady)[0].meta["acp"]["mode"] == "plan"


@pytest.mark.parametrize(("permissions", "mode"), [("bypass", "yolo"), ("allow", "default")])
async def test_bypass_permissions_map_to_the_manifests_bypass_mode(
        orch: Orchestrator, workdir: Path, tmp_path: Path, permissions: str, mode: str) -> None:
    agent = manifest(tmp_path, 'bypass-mode = "yolo"')
    with trio.fail_after(SECONDS):
        session = await orch.start_session(agent, "acp", cwd=workdir, permissions=permissions)
        seen = await described(session)
        await session.close()
    assert seen["mode"] == mode


# ---- permission round trips and cancel -------------------------------------------------------


@pytest.mark.parametrize(("decision", "outcome"), [
    ("allow_once", {"outcome": "selected", "optionId": "ok", "_meta": None}),
    ("deny", {"outcome": "selected", "optionId": "no", "_meta": None}),
    ("cancel", {"outcome": "cancelled"}),
])
async def test_a_permission_allowed_rejected_or_cancelled_while_pending(
        orch: Orchestrator, workdir: Path, decision: str, outcome: dict[str, Any]) -> None:
    with trio.fail_after(SECONDS):
        session = await orch.start_session(adhoc(), "acp", cwd=workdir, permissions="ask",
                                           human=True)
        await session.inject(json.dumps([{"call": "permission",
                                          "path": str(workdir / "a.py")}]))
        view = await session.wait_status("input_required")
        req = log_of(orch, session, PermissionRequest)[0]
        assert view.waiting_on == f"permission:{req.req_id}"
        assert [o["option_id"] for o in req.meta["acp"]["options"]] == ["ok", "no"]
        if decision == "cancel":
            await session.cancel()
        else:
            await session.decide(req.req_id, decision)  # type: ignore[arg-type]
        await session.wait_status("ready")
        (answer,) = json.loads(log_of(orch, session, TextChunk)[-1].text)
        ended = log_of(orch, session, SessionIdle)[-1]
        again = await described(session)  # the session goes on
        await session.close()
    assert answer["ok"]["outcome"] == outcome
    assert ended.stop_reason == ("cancelled" if decision == "cancel" else "end_turn")
    assert again["id"]


async def all_of(orch: Orchestrator, session: Session, kind: type, n: int) -> list[Any]:
    """The first ``n`` events of ``kind`` in the session's log, waiting as the log grows."""
    while len(found := log_of(orch, session, kind)) < n:
        seen = orch.log.last_seq
        await orch.wait_until(lambda s, seen=seen: s.last_seq > seen)
    return found[:n]


TWO_AT_ONCE = [{"call": "together", "steps": [
    {"call": "permission", "id": "call_a", "path": "a.py"},
    {"call": "permission", "id": "call_b", "path": "b.py"}]}]


async def test_two_permission_requests_pending_at_once_get_their_own_answers(
        orch: Orchestrator, workdir: Path) -> None:
    """Answered in the other order than asked: each JSON-RPC id gets its own decision."""
    with trio.fail_after(SECONDS):
        session = await orch.start_session(adhoc(), "acp", cwd=workdir, permissions="ask",
                                           human=True)
        await session.inject(json.dumps(TWO_AT_ONCE))
        asked = await all_of(orch, session, PermissionRequest, 2)
        by_call = {r.meta["acp"]["tool_call_id"]: r for r in asked}
        await session.wait_status("input_required")
        await session.decide(by_call["call_b"].req_id, "allow")
        await session.decide(by_call["call_a"].req_id, "deny")
        await session.wait_status("ready")
        (answer,) = json.loads(log_of(orch, session, TextChunk)[-1].text)
        await session.close()
    assert [o["outcome"] for o in answer["ok"]] == [
        {"outcome": "selected", "optionId": "no", "_meta": None},   # call_a: denied
        {"outcome": "selected", "optionId": "ok", "_meta": None}]   # call_b: allowed
    assert by_call["call_a"].intent == {"path": "a.py"}


async def test_cancel_with_two_permission_requests_pending_answers_both_cancelled(
        orch: Orchestrator, workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        session = await orch.start_session(adhoc(), "acp", cwd=workdir, permissions="ask",
                                           human=True)
        await session.inject(json.dumps(TWO_AT_ONCE))
        await all_of(orch, session, PermissionRequest, 2)
        await session.cancel()
        await session.wait_status("ready")
        (answer,) = json.loads(log_of(orch, session, TextChunk)[-1].text)
        ended = log_of(orch, session, SessionIdle)[-1]
        await session.close()
    assert [o["outcome"] for o in answer["ok"]] == [{"outcome": "cancelled"}] * 2
    assert ended.stop_reason == "cancelled"


async def test_cancel_mid_turn_ends_it_cancelled_and_the_session_goes_on(
        orch: Orchestrator, workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        session = await orch.start_session(adhoc(), "acp", cwd=workdir)
        await session.inject(json.dumps([{"call": "hang"}]))
        streamed = await first(orch, session, TextChunk)
        await session.cancel()
        await session.wait_status("ready")
        ended = log_of(orch, session, SessionIdle)[-1]
        (answer,) = json.loads(log_of(orch, session, TextChunk)[-1].text)
        again = await described(session)
        await session.close()
    assert streamed.text == "waiting for the cancel"
    assert ended.stop_reason == "cancelled"
    assert answer == {"ok": "cancelled"}  # the agent saw session/cancel
    assert again["id"]
