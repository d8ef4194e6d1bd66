"""What goes wrong between the driver and an A2A agent becomes a typed event or a clear refusal.

Auth and the card are tested against the real a2a-sdk server; what the SDK never
sends (broken SSE data, HTTP errors, a refused spelling, silence) against a
hand-made Starlette server on a real socket, parsed by the same httpx-sse path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from starlette.responses import JSONResponse, Response

from tests.driver_a2a.conftest import SECONDS, events_of, one_turn
from tests.driver_a2a.servers import A2aServer, Echo, RawServer, sse
from trio_cap.actors.bindings.a2a.connector import A2aConnector
from trio_cap.actors.orchestrator import Orchestrator
from trio_cap.events.kinds import AgentRaw, CapError, SessionWarning, TextChunk

TOKEN = "s3cret-token-value"


def _log_text(orch: Orchestrator) -> str:
    return b"".join(msgspec.json.encode(env.event) for env in orch.log.read(1)).decode()


async def _failed_start(orch: Orchestrator, url: str, tmp_path: Path) -> str:
    session = await orch.start_session(f"a2a:{url}", cwd=tmp_path)
    view = await session.wait_terminal()
    assert view.status == "failed"
    return view.last_error or ""


# ---- auth ------------------------------------------------------------------------------


async def test_bearer_token_from_a_file_is_sent_and_never_logged(
        orch: Orchestrator, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    orch.connectors["a2a"] = A2aConnector(token_file=str(token_file))
    with A2aServer(Echo(), token=TOKEN).running() as srv, trio.fail_after(SECONDS):
        _session, turn = await one_turn(orch, srv.base, tmp_path, "hi")
    assert turn.text == "echo: hi"
    assert TOKEN not in _log_text(orch)


async def test_bearer_token_from_the_environment(orch: Orchestrator, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAP_A2A_TOKEN", TOKEN)
    with A2aServer(Echo(), versions=("0.3",), token=TOKEN).running() as srv, \
            trio.fail_after(SECONDS):
        _session, turn = await one_turn(orch, srv.base, tmp_path, "hi")
    assert turn.text == "echo: hi"
    assert TOKEN not in _log_text(orch)


@pytest.mark.parametrize("given", [None, "wrong-token"])
async def test_a_missing_or_wrong_token_is_refused_with_what_to_do(
        orch: Orchestrator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        given: str | None) -> None:
    monkeypatch.delenv("CAP_A2A_TOKEN", raising=False)
    orch.connectors["a2a"] = A2aConnector(token=given)
    with A2aServer(Echo(), token=TOKEN).running() as srv, trio.fail_after(SECONDS):
        error = await _failed_start(orch, srv.base, tmp_path)
    assert "HTTP 401" in error and "--token-file" in error
    assert TOKEN not in _log_text(orch) and "wrong-token" not in _log_text(orch)


async def test_an_unreadable_token_file_is_a_one_line_refusal(
        orch: Orchestrator, tmp_path: Path) -> None:
    orch.connectors["a2a"] = A2aConnector(token_file=str(tmp_path / "missing"))
    with A2aServer(Echo()).running() as srv, trio.fail_after(SECONDS):
        error = await _failed_start(orch, srv.base, tmp_path)
    assert "cannot read the token file" in error and "missing" in error


# ---- the card ----------------------------------------------------------------------------


async def test_the_legacy_card_path_is_the_fallback(orch: Orchestrator, tmp_path: Path) -> None:
    with A2aServer(Echo(), legacy_card_only=True).running() as srv, trio.fail_after(SECONDS):
        _session, turn = await one_turn(orch, srv.base, tmp_path, "old card")
    assert turn.text == "echo: old card"


async def test_strict_mode_refuses_a_card_without_the_cap_extension(
        orch: Orchestrator, tmp_path: Path) -> None:
    orch.connectors["a2a"] = A2aConnector(cap_extension="strict")
    with A2aServer(Echo()).running() as srv, trio.fail_after(SECONDS):
        error = await _failed_start(orch, srv.base, tmp_path)
    assert "does not declare the CAP extension 'cap-protocol/v1'" in error


async def test_strict_mode_accepts_a_card_with_it(orch: Orchestrator, tmp_path: Path) -> None:
    orch.connectors["a2a"] = A2aConnector(cap_extension="strict")
    with A2aServer(Echo(), cap_extension=True).running() as srv, trio.fail_after(SECONDS):
        session, turn = await one_turn(orch, srv.base, tmp_path, "hi")
    assert turn.text == "echo: hi"
    assert not events_of(orch, session.id, SessionWarning)


async def test_a_card_with_no_spelling_we_speak_is_refused(orch: Orchestrator,
                                                          tmp_path: Path) -> None:
    async def never(body: dict[str, Any]) -> Response:
        raise AssertionError("nothing may be sent to an agent we cannot speak to")

    with RawServer(never, binding="GRPC").running() as srv, trio.fail_after(SECONDS):
        error = await _failed_start(orch, srv.base, tmp_path)
    assert "offers no spelling trio-cap speaks" in error and "GRPC 1.0" in error


async def test_no_card_at_all(orch: Orchestrator, tmp_path: Path) -> None:
    async def never(body: dict[str, Any]) -> Response:
        raise AssertionError

    server = RawServer(never)
    server.card = None
    with server.running() as srv, trio.fail_after(SECONDS):
        error = await _failed_start(orch, srv.base + "/agents/x", tmp_path)
    assert "/agents/x/.well-known/agent-card.json" in error
    assert error.count("/.well-known/agent.json") == 2  # under the path, then at the root
    assert "no A2A agent card at" in error and "HTTP 404" in error


async def test_a_card_that_is_not_a_card(orch: Orchestrator, tmp_path: Path) -> None:
    async def never(body: dict[str, Any]) -> Response:
        raise AssertionError

    server = RawServer(never)
    server.card = {"supportedInterfaces": "nope"}
    with server.running() as srv, trio.fail_after(SECONDS):
        error = await _failed_start(orch, srv.base, tmp_path)
    assert "is not valid" in error


async def test_an_unreachable_agent(orch: Orchestrator, tmp_path: Path) -> None:
    with A2aServer(Echo()).running() as srv:
        url = srv.base
    with trio.fail_after(SECONDS):
        error = await _failed_start(orch, url, tmp_path)
    assert "cannot reach the A2A agent" in error


# ---- the stream ----------------------------------------------------------------------------

TASK = {"id": "T", "contextId": "C", "status": {"state": "TASK_STATE_WORKING"}}


def _frame(rid: Any, result: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result})


async def test_malformed_sse_data_is_a_typed_error_and_nothing_after_it_is_lost(
        orch: Orchestrator, tmp_path: Path) -> None:
    async def answer(body: dict[str, Any]) -> Response:
        rid = body["id"]
        return sse(_frame(rid, {"task": TASK}),
                   "{not json at all",
                   _frame(rid, {"statusUpdate": {"taskId": "T", "status": "weird"}}),
                   _frame(rid, {"artifactUpdate": {"taskId": "T", "artifact": {
                       "artifactId": "A", "parts": [{"text": "still here"}]}, "lastChunk": True}}),
                   _frame(rid, {"statusUpdate": {"taskId": "T", "contextId": "C", "status": {
                       "state": "TASK_STATE_COMPLETED"}}}))

    with RawServer(answer).running() as srv, trio.fail_after(SECONDS):
        session, turn = await one_turn(orch, srv.base, tmp_path, "hi")
    assert turn.text == "still here" and turn.stop_reason == "end_turn"
    errors = events_of(orch, session.id, CapError)
    assert [e.code for e in errors] == ["parse_failed", "parse_failed"]
    raws = [r for r in events_of(orch, session.id, AgentRaw)
            if r.reason == "a2a_malformed_sse_data"]
    assert raws[0].text == "{not json at all" and len(raws) == 2
    assert srv.requests[0]["headers"]["a2a-version"] == "1.0"


async def test_an_http_error_ends_the_turn_with_a_typed_error(orch: Orchestrator,
                                                              tmp_path: Path) -> None:
    async def answer(body: dict[str, Any]) -> Response:
        return Response("overloaded", status_code=503)

    with RawServer(answer).running() as srv, trio.fail_after(SECONDS):
        session, turn = await one_turn(orch, srv.base, tmp_path, "hi")
    assert turn.stop_reason == "error"
    (error,) = events_of(orch, session.id, CapError)
    assert (error.code, error.retryable) == ("a2a_http_error", True)
    assert "HTTP 503" in error.message and "overloaded" in error.message


async def test_a_json_rpc_error_answer(orch: Orchestrator, tmp_path: Path) -> None:
    async def answer(body: dict[str, Any]) -> Response:
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "error": {
            "code": -32005, "message": "Content type not supported",
            "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo"}]}})

    with RawServer(answer).running() as srv, trio.fail_after(SECONDS):
        session, turn = await one_turn(orch, srv.base, tmp_path, "hi")
    assert turn.stop_reason == "error"
    (error,) = events_of(orch, session.id, CapError)
    assert error.code == "a2a_rpc_error" and "-32005" in error.message
    assert error.details and error.details["rpc_code"] == -32005


async def test_the_other_spelling_is_tried_when_the_first_is_refused(
        orch: Orchestrator, tmp_path: Path) -> None:
    async def answer(body: dict[str, Any]) -> Response:
        rid = body["id"]
        if body["method"] == "SendStreamingMessage":
            return JSONResponse({"jsonrpc": "2.0", "id": rid, "error": {
                "code": -32009, "message": "A2A version '1.0' is not supported"}})
        assert body["method"] == "message/stream"
        assert body["params"]["message"]["parts"] == [{"kind": "text", "text": "hi"}]
        return sse(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {
            "kind": "message", "messageId": "m", "role": "agent",
            "parts": [{"kind": "text", "text": "draft it is"}]}}))

    with RawServer(answer, versions=("1.0", "0.3")).running() as srv, trio.fail_after(SECONDS):
        session, turn = await one_turn(orch, srv.base, tmp_path, "hi")
    assert (turn.text, turn.stop_reason) == ("draft it is", "end_turn")
    assert [r["headers"]["a2a-version"] for r in srv.requests] == ["1.0", "0.3"]
    assert any(r.reason == "a2a_spelling_fallback" for r in events_of(orch, session.id, AgentRaw))


async def test_silence_past_the_stream_timeout_is_a_typed_timeout(
        orch: Orchestrator, tmp_path: Path) -> None:
    async def answer(body: dict[str, Any]) -> Response:
        import asyncio

        await asyncio.sleep(3)  # the server thread's own loop; the driver gives up first
        return JSONResponse({})

    orch.connectors["a2a"] = A2aConnector(stream_timeout=0.5, max_resubscribes=0)
    with RawServer(answer).running() as srv, trio.fail_after(SECONDS):
        session, turn = await one_turn(orch, srv.base, tmp_path, "hi")
    assert turn.stop_reason == "error"
    (error,) = events_of(orch, session.id, CapError)
    assert (error.code, error.retryable) == ("a2a_timeout", True)


async def test_an_agent_gone_mid_session_fails_the_turn_not_the_process(
        orch: Orchestrator, tmp_path: Path) -> None:
    server = A2aServer(Echo())
    with server.running(), trio.fail_after(SECONDS):
        session = await orch.start_session(f"a2a:{server.base}", cwd=tmp_path)
        first = await session.run_turn("one")
    with trio.fail_after(SECONDS):
        second = await session.run_turn("two")
        await session.close()
    assert first.text == "echo: one" and second.stop_reason == "error"
    errors = events_of(orch, session.id, CapError)
    assert [e.code for e in errors] == ["a2a_unreachable"]
    assert not [t for t in events_of(orch, session.id, TextChunk) if t.text == "echo: two"]


async def test_a_card_asking_for_a_token_none_is_set_is_a_warning(
        orch: Orchestrator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CAP_A2A_TOKEN", raising=False)

    async def answer(body: dict[str, Any]) -> Response:
        return sse(json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": {"message": {
            "messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "open anyway"}]}}}))

    server = RawServer(answer)
    assert server.card is not None
    server.card["securitySchemes"] = {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
    with server.running() as srv, trio.fail_after(SECONDS):
        session, turn = await one_turn(orch, srv.base, tmp_path, "hi")
    assert turn.text == "open anyway"
    assert "authorization" not in srv.requests[0]["headers"]
    codes = [w.code for w in events_of(orch, session.id, SessionWarning)]
    assert codes == ["a2a_no_cap_extension", "a2a_no_token"]
