"""Real Claude Code (the pinned peer) driven over stream-json, through the orchestrator.

Every test goes the whole way: manifest resolution of ``claude-code``, the
session actor, the connector spawning ``claude``, the driver, the log.  The
model is the scripted server; a missing peer fails (never skips).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from trio_cap.actors.model_server import ModelServer, script_from_obj
from trio_cap.actors.orchestrator import Orchestrator
from trio_cap.events.kinds import (
    AgentRaw,
    CapError,
    CapSessionReady,
    PermissionDecided,
    PermissionRequest,
    SessionIdle,
    SessionTurnEnded,
    TextChunk,
    Thought,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UserInputInject,
)

pytestmark = pytest.mark.peers

SECONDS = 120


def events_of(orch: Orchestrator, session_id: str, kind: type) -> list[Any]:
    return [env.event for env in orch.log.read(1, session_id) if type(env.event) is kind]


def write_rule(target: Path) -> dict[str, Any]:
    return {"match": "create hello", "text": "On it.",
            "tool_calls": [{"name": "Write", "arguments": {"file_path": str(target),
                                                            "content": "hi from claude\n"}}],
            "then": {"text": "Finished."}}


async def test_multi_turn_streams_text_once_with_usage_and_cost(
    claude: tuple[Orchestrator, Path], model_server: ModelServer
) -> None:
    orch, workdir = claude
    model_server.set_script(script_from_obj({"turns": [
        {"thinking": "Let me think.", "text": "first answer here"},
        {"text": "second answer, longer than the first"},
    ]}))
    with trio.fail_after(SECONDS):
        session = await orch.start_session("claude-code", "stream-json", cwd=workdir)
        first = await session.run_turn("say something")
        second = await session.run_turn("and again")
        view = await session.close()
    assert view.status == "completed", view
    assert (first.text, first.stop_reason) == ("first answer here", "end_turn")
    assert second.text == "second answer, longer than the first"
    sid = session.id
    # Partial messages are on: deltas gave the text, the assistant frame only confirmed it.
    # (Deltas that arrive in one read are one chunk: driver rule R2.)
    chunks = events_of(orch, sid, TextChunk)
    assert all(c.channel == "assistant" for c in chunks)
    assert "".join(c.text for c in chunks) == (
        "first answer here" "second answer, longer than the first")
    assert "".join(t.text for t in events_of(orch, sid, Thought)) == "Let me think."
    (ready,) = events_of(orch, sid, CapSessionReady)
    assert ready.session_id and ready.meta["stream_json"]["claude_code_version"] == "2.1.332"
    # Each prompt went out with a uuid; system/init came twice and was kept once.
    assert len(events_of(orch, sid, UserInputInject)) == 2
    assert [r.reason for r in events_of(orch, sid, AgentRaw) if r.source == "stdout"] == ["init"]
    usages = events_of(orch, sid, Usage)
    assert len(usages) == 2
    assert all(u.input_tokens > 0 and u.output_tokens > 0 for u in usages)
    assert all(u.model_id == "claude-opus-5-5" for u in usages)
    # Cost is per turn (delta of the CLI's running total), so neither is the total.
    assert all(u.cost_usd_estimate > 0 for u in usages)
    assert usages[1].cost_usd_estimate < usages[0].cost_usd_estimate * 1.5
    assert orch.state.usage is not None


async def test_write_allowed_by_a_human_runs(
    claude: tuple[Orchestrator, Path], model_server: ModelServer
) -> None:
    orch, workdir = claude
    target = workdir / "hello.txt"
    model_server.set_script(script_from_obj({"rules": [write_rule(target)]}))
    with trio.fail_after(SECONDS):
        session = await orch.start_session("claude-code", "stream-json", cwd=workdir,
                                           permissions="ask")
        accepted = await session.inject("please create hello.txt")
        view = await session.wait_status("input_required")
        request = events_of(orch, session.id, PermissionRequest)[-1]
        assert view.waiting_on == f"permission:{request.req_id}"
        assert request.tool == "Write" and request.scope == "write"
        assert request.risk_level == "medium"
        assert request.intent["file_path"] == str(target)
        assert not target.exists()
        await session.decide(request.req_id, "allow_once")
        await orch.wait_until(lambda s: s.sessions.sessions[session.id].ended_turn >= 1)
        view = await session.close()
    assert target.read_text() == "hi from claude\n"
    assert view.status == "completed"
    sid = session.id
    (start,) = events_of(orch, sid, ToolCallStart)
    (end,) = events_of(orch, sid, ToolCallEnd)
    assert start.name == "Write" and end.call_id == start.call_id and not end.is_error
    text = "".join(c.text for c in events_of(orch, sid, TextChunk) if c.channel == "assistant")
    assert text == "On it.Finished."
    assert accepted.turn == 1


async def test_write_denied_by_policy_does_not_run(
    claude: tuple[Orchestrator, Path], model_server: ModelServer
) -> None:
    orch, workdir = claude
    target = workdir / "hello.txt"
    model_server.set_script(script_from_obj({"rules": [write_rule(target)]}))
    with trio.fail_after(SECONDS):
        session = await orch.start_session("claude-code", "stream-json", cwd=workdir,
                                           permissions="deny")
        result = await session.run_turn("please create hello.txt")
        await session.close()
    assert not target.exists()
    sid = session.id
    (decided,) = events_of(orch, sid, PermissionDecided)
    assert decided.decision == "deny" and decided.by == "policy:deny"
    (end,) = events_of(orch, sid, ToolCallEnd)
    assert end.is_error
    assert result.stop_reason == "end_turn"
    # The model saw the refusal as the tool result and went on.
    follow_up = model_server.records[-1]["body"]["messages"][-1]["content"]
    refusals = [b for b in follow_up if b.get("type") == "tool_result" and b.get("is_error")]
    assert refusals and "--permissions" in str(refusals[0]["content"])  # told why


async def test_interrupt_cancels_the_turn_and_the_session_goes_on(
    claude: tuple[Orchestrator, Path], model_server: ModelServer
) -> None:
    orch, workdir = claude
    slow = " ".join(f"word{i}" for i in range(200))
    model_server.set_script(script_from_obj({"turns": [
        {"text": slow, "delay_ms": 50}, {"text": "back again"}]}))
    with trio.fail_after(SECONDS):
        session = await orch.start_session("claude-code", "stream-json", cwd=workdir)
        await session.inject("talk slowly")
        # Readiness on output: cancel once the reply is visibly streaming.
        await orch.wait_until(lambda _: bool(events_of(orch, session.id, TextChunk)))
        await session.cancel()
        await orch.wait_until(lambda s: s.sessions.sessions[session.id].ended_turn >= 1)
        assert session.view.last_stop_reason == "cancelled"  # type: ignore[union-attr]
        again = await session.run_turn("are you there?")
        view = await session.close()
    assert again.text == "back again" and again.stop_reason == "end_turn"
    assert view.status == "completed"
    idles = events_of(orch, session.id, SessionIdle)
    assert [i.stop_reason for i in idles] == ["cancelled", "end_turn"]
    streamed = "".join(c.text for c in events_of(orch, session.id, TextChunk)
                       if c.channel == "assistant" and c.message_id != "")
    assert streamed.endswith("back again") and len(streamed) < len(slow) + len("back again")


async def test_prompts_sent_mid_turn_go_out_at_once_and_every_turn_ends(
    claude: tuple[Orchestrator, Path], model_server: ModelServer
) -> None:
    """Claude Code queues mid-turn prompts and coalesces them into one turn whose
    result names both uuids; each prompt's turn must still end exactly once."""
    orch, workdir = claude
    slow = " ".join(f"word{i}" for i in range(60))
    model_server.set_script(script_from_obj({"turns": [
        {"text": slow, "delay_ms": 50}, {"text": "both noted"}]}))
    with trio.fail_after(SECONDS):
        session = await orch.start_session("claude-code", "stream-json", cwd=workdir)
        first = await session.inject("talk slowly")
        await orch.wait_until(lambda _: bool(events_of(orch, session.id, TextChunk)))
        two = await session.inject("remember two")
        three = await session.inject("remember three")
        assert (first.turn, two.turn, three.turn) == (1, 2, 3)
        await orch.wait_until(lambda s: s.sessions.sessions[session.id].ended_turn >= 3)
        view = await session.close()
    assert view.status == "completed"
    kinds = [env.kind for env in orch.log.read(1, session.id)]
    sent = [i for i, k in enumerate(kinds) if k == "cap.user_input.inject"]
    assert len(sent) == 3 and sent[2] < kinds.index("session.turn_ended")  # sent mid-turn
    ended = events_of(orch, session.id, SessionTurnEnded)
    assert [(e.turn, e.stop_reason) for e in ended] == [(1, "end_turn"), (2, "end_turn"),
                                                        (3, "end_turn")]
    assert len(events_of(orch, session.id, SessionIdle)) == 1  # idle only when none in flight
    # the model saw the two mid-turn prompts coalesced into one user message
    last_user = model_server.records[-1]["body"]["messages"]
    texts = str([m for m in last_user if m["role"] == "user"][-1])
    assert "remember two" in texts and "remember three" in texts


async def test_an_api_error_from_the_model_becomes_a_typed_cap_error(
    claude: tuple[Orchestrator, Path], model_server: ModelServer
) -> None:
    orch, workdir = claude
    model_server.set_script(script_from_obj({"turns": [
        {"text": "never seen", "error": {"status": 401, "message": "invalid x-api-key",
                                          "times": 5}},
        {"text": "fine now"}]}))
    with trio.fail_after(SECONDS):
        session = await orch.start_session("claude-code", "stream-json", cwd=workdir)
        failed = await session.run_turn("hello?")
        view = await session.close()
    assert failed.stop_reason == "error"
    errors = events_of(orch, session.id, CapError)
    assert errors and errors[-1].code == "auth_error", errors
    assert view.status == "failed" and view.last_error.startswith("auth_error")


async def test_rate_limiting_is_a_retryable_rate_limit_error_and_the_session_goes_on(
    claude: tuple[Orchestrator, Path], model_server: ModelServer
) -> None:
    """Claude Code 2.1.332 gives up on a 429 from this endpoint at once (no retry seen)."""
    orch, workdir = claude
    model_server.set_script(script_from_obj({"turns": [
        {"text": "after the limit", "error": {"status": 429, "message": "slow down",
                                               "retry_after": 0, "times": 1}}]}))
    with trio.fail_after(SECONDS):
        session = await orch.start_session("claude-code", "stream-json", cwd=workdir)
        limited = await session.run_turn("hello?")
        again = await session.run_turn("hello again?")
        view = await session.close()
    assert limited.stop_reason == "error"
    (error,) = events_of(orch, session.id, CapError)
    assert error.code == "rate_limit" and error.retryable and "429" in error.message
    assert (again.text, again.stop_reason) == ("after the limit", "end_turn")
    assert view.status == "completed"


async def test_claude_asking_the_user_is_a_cap_ask_answered_by_a_human(
    claude: tuple[Orchestrator, Path], model_server: ModelServer
) -> None:
    orch, workdir = claude
    question = {"questions": [{"question": "Which database?", "header": "DB",
                               "multiSelect": False,
                               "options": [{"label": "postgres", "description": "server"},
                                           {"label": "sqlite", "description": "a file"}]}]}
    model_server.set_script(script_from_obj({"rules": [{
        "match": "pick a database", "text": "Let me ask.",
        "tool_calls": [{"name": "AskUserQuestion", "arguments": question}],
        "then": {"text": "Going with your choice."}}]}))
    with trio.fail_after(SECONDS):
        session = await orch.start_session("claude-code", "stream-json", cwd=workdir,
                                           human=True)
        accepted = await session.inject("pick a database for me")
        view = await session.wait_status("input_required")
        (ask,) = orch.state.pending.asks[session.id].values()
        assert view.waiting_on == f"ask:{ask.ask_id}"
        assert ask.prompt == "Which database?"
        assert [c["const"] for c in ask.form["oneOf"]] == ["postgres", "sqlite"]
        assert events_of(orch, session.id, PermissionRequest) == []
        await session.answer(ask.ask_id, "sqlite")
        await orch.wait_until(lambda s: s.sessions.sessions[session.id].ended_turn >= 1)
        await session.close()
    assert accepted.turn == 1
    follow_up = model_server.records[-1]["body"]["messages"][-1]["content"]
    results = [b for b in follow_up if b.get("type") == "tool_result"]
    assert results and "sqlite" in str(results[0]["content"])
    text = "".join(c.text for c in events_of(orch, session.id, TextChunk)
                   if c.channel == "assistant")
    assert text.endswith("Going with your choice.")
