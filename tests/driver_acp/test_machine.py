"""The ACP client machine's rules (machine.py A1-A21, C1-C6), one case each, sans-io."""

from __future__ import annotations

import json

import pytest

from tests.driver_acp.acp_lib import (
    CWD,
    ClientOptions,
    error,
    events,
    line,
    notify,
    of,
    prompt,
    ready_client,
    request,
    result,
    serves,
    turn_ends,
    update,
    written,
)
from trio_cap.actors.bindings.acp.machine import AcpClient, ClientState, Withdraw
from trio_cap.events.kinds import (
    AgentRaw,
    AskUser,
    AskUserAnswer,
    Cancel,
    CapError,
    CapSessionReady,
    PermissionRequest,
    PermissionResponse,
    Plan,
    TextChunk,
    Thought,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

PERMISSION = {
    "sessionId": "s1",
    "toolCall": {"toolCallId": "call_2", "title": "Modify config", "kind": "edit",
                 "locations": [{"path": f"{CWD}/config.json"}],
                 "rawInput": {"path": f"{CWD}/config.json"}},
    "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                {"optionId": "always", "name": "Always", "kind": "allow_always"},
                {"optionId": "no", "name": "Reject", "kind": "reject_once"}],
}


# ---- handshake (A1-A4) --------------------------------------------------------------------


def test_initialize_advertises_exactly_what_is_served() -> None:
    client = AcpClient(ClientOptions(cwd=CWD))
    sent = json.loads(client.initialize())
    assert sent["method"] == "initialize" and sent["id"] == 0
    params = sent["params"]
    assert params["protocolVersion"] == 1
    assert params["clientCapabilities"] == {
        "fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True,
        "elicitation": {"form": {}}, "auth": {}}
    narrow = AcpClient(ClientOptions(cwd=CWD, terminal=False, elicitation=False, fs_write=False))
    caps = json.loads(narrow.initialize())["params"]["clientCapabilities"]
    assert caps == {"fs": {"readTextFile": True}, "terminal": False, "auth": {}}


def test_minimal_initialize_answer_gets_defaults_and_session_new_has_mcp_servers() -> None:
    client = AcpClient(ClientOptions(cwd=CWD))
    client.initialize()
    out = client.receive_data(result(0, {"protocolVersion": 1}))
    assert written(out) == [{"jsonrpc": "2.0", "id": 1, "method": "session/new",
                             "params": {"cwd": CWD, "mcpServers": []}}]
    out = client.receive_data(result(1, {"sessionId": "abc"}))
    ready = of(out, CapSessionReady)
    assert ready and ready[0].session_id == "abc"
    assert ready[0].meta == {"acp": {"protocol_version": 1, "load_session": False}}
    assert client.state is ClientState.READY


def test_other_protocol_version_fails_the_handshake() -> None:
    client = AcpClient(ClientOptions(cwd=CWD))
    client.initialize()
    out = client.receive_data(result(0, {"protocolVersion": 7}))
    assert client.state is ClientState.FAILED
    assert "version 7" in (client.handshake_error or "")
    assert of(out, CapError)[0].code == "cap_binding_unavailable"


def test_auth_required_authenticates_with_the_configured_method_then_retries() -> None:
    init = {"protocolVersion": 1, "authMethods": [{"id": "key", "name": "API key"}]}
    client = AcpClient(ClientOptions(cwd=CWD, auth_method=None))
    client.initialize()
    client.receive_data(result(0, init))
    out = client.receive_data(error(1, -32000, "Authentication required"))
    assert client.state is ClientState.FAILED
    assert "methods: key" in (client.handshake_error or "")

    client = AcpClient(ClientOptions(cwd=CWD, auth_method="key"))
    client.initialize()
    out = client.receive_data(result(0, init))
    assert written(out)[0]["method"] == "authenticate"
    assert written(out)[0]["params"] == {"methodId": "key"}
    out = client.receive_data(result(1, None))  # null result accepted
    assert written(out)[0]["method"] == "session/new"


def test_unknown_auth_method_fails_naming_the_offered_ones() -> None:
    client = AcpClient(ClientOptions(cwd=CWD, auth_method="nope"))
    client.initialize()
    client.receive_data(result(0, {"protocolVersion": 1, "authMethods": [
        {"id": "tty", "name": "Terminal", "type": "terminal"}]}))
    assert client.state is ClientState.FAILED
    assert "'nope'" in (client.handshake_error or "") and "tty" in (client.handshake_error or "")


def test_model_is_applied_through_the_model_config_option() -> None:
    new = {"sessionId": "s1", "configOptions": [
        {"id": "model", "name": "Model", "category": "model", "type": "select",
         "currentValue": "a", "options": [{"value": "a", "name": "A"},
                                          {"group": "g", "name": "G",
                                           "options": [{"value": "b", "name": "B"}]}]}]}
    client = AcpClient(ClientOptions(cwd=CWD, model="b"))
    client.initialize()
    client.receive_data(result(0, {"protocolVersion": 1}))
    out = client.receive_data(result(1, new))
    sent = written(out)
    assert sent[0]["method"] == "session/set_config_option"
    assert sent[0]["params"] == {"sessionId": "s1", "configId": "model", "value": "b"}
    assert not of(out, CapSessionReady)
    out = client.receive_data(result(2, {"configOptions": []}))
    assert of(out, CapSessionReady)


def test_model_not_offered_is_recorded_and_the_session_still_opens() -> None:
    _, out = ready_client(model="zzz")
    assert any(r.reason == "model_not_applied" for r in of(out, AgentRaw))
    assert of(out, CapSessionReady)


def test_resume_loads_and_records_the_replayed_history() -> None:
    client = AcpClient(ClientOptions(cwd=CWD, resume_id="old"))
    client.initialize()
    out = client.receive_data(result(0, {"protocolVersion": 1,
                                         "agentCapabilities": {"loadSession": True}}))
    assert written(out)[0]["method"] == "session/load"
    assert written(out)[0]["params"]["sessionId"] == "old"
    out = client.receive_data(update("user_message_chunk", "old",
                                     content={"type": "text", "text": "earlier"}))
    assert [r.reason for r in of(out, AgentRaw)] == ["replayed_history"]
    out = client.receive_data(result(1, None))
    assert of(out, CapSessionReady)[0].session_id == "old"


def test_load_failing_falls_back_to_a_new_session() -> None:
    client = AcpClient(ClientOptions(cwd=CWD, resume_id="old"))
    client.initialize()
    client.receive_data(result(0, INIT := {"protocolVersion": 1,
                                           "agentCapabilities": {"loadSession": True}}))
    assert INIT
    out = client.receive_data(error(1, -32002, "no such session"))
    assert written(out)[0]["method"] == "session/new"
    assert any(r.reason == "load_failed" for r in of(out, AgentRaw))


# ---- prompts and updates (A5-A10, C1) -----------------------------------------------------------


def test_updates_map_to_core_events_and_the_prompt_response_ends_the_turn() -> None:
    client, _ = ready_client()
    pid = prompt(client)
    data = b"".join([
        update("agent_thought_chunk", content={"type": "text", "text": "hmm"}),
        update("agent_message_chunk", content={"type": "text", "text": "Hel"}, messageId="m1"),
        update("agent_message_chunk", content={"type": "text", "text": "lo"}, messageId="m1"),
        update("tool_call", toolCallId="c1", title="Read a", kind="read", status="pending",
               rawInput={"path": "/a"}, locations=[{"path": "/a", "line": 2}]),
        update("tool_call_update", toolCallId="c1", status="in_progress",
               content=[{"type": "content", "content": {"type": "text", "text": "part"}}]),
        update("tool_call_update", toolCallId="c1", status="completed",
               content=[{"type": "content", "content": {"type": "text", "text": "part two"}},
                        {"type": "diff", "path": "/a", "oldText": None, "newText": "x"}]),
        update("plan", entries=[{"content": "do", "priority": "high", "status": "pending"}]),
        update("usage_update", used=10, size=100, cost={"amount": 0.5, "currency": "USD"}),
        update("usage_update", used=20, size=100, cost={"amount": 0.75, "currency": "USD"}),
        result(pid, {"stopReason": "end_turn"}),
    ])
    out = client.receive_data(data)
    kinds = [type(e).__name__ for e in events(out)]
    assert kinds == ["Thought", "TextChunk", "TextChunk", "ToolCallStart", "ToolCallDelta",
                     "ToolCallEnd", "Plan", "Usage", "Usage"]
    assert of(out, Thought)[0].message_id == "turn_1"
    assert [t.text for t in of(out, TextChunk)] == ["Hel", "lo"]
    start = of(out, ToolCallStart)[0]
    assert (start.name, start.input) == ("read", {"path": "/a"})
    assert start.meta["acp"]["locations"] == [{"path": "/a", "line": 2}]
    assert of(out, ToolCallDelta)[0].output_chunk == "part"
    end = of(out, ToolCallEnd)[0]
    assert end.output == "part two" and not end.is_error
    assert end.meta["acp"]["diffs"] == [{"type": "diff", "path": "/a", "newText": "x",
                                         "oldText": None}]
    assert of(out, Plan)[0].entries[0].priority == "high"
    assert [u.cost_usd_estimate for u in of(out, Usage)] == [0.5, 0.25]
    assert turn_ends(out) == ["end_turn"]
    assert type(out[-1]).__name__ == "TurnEnded"  # nothing follows the turn's end


def test_failed_tool_call_and_update_for_a_call_never_started() -> None:
    client, _ = ready_client()
    prompt(client)
    out = client.receive_data(update("tool_call_update", toolCallId="ghost", kind="execute",
                                     status="failed", title="run"))
    assert [type(e).__name__ for e in events(out)] == ["ToolCallStart", "ToolCallEnd"]
    assert of(out, ToolCallEnd)[0].is_error


def test_unknown_and_unstable_kinds_and_bad_optional_fields_are_tolerated() -> None:
    client, _ = ready_client()
    prompt(client)
    out = client.receive_data(b"".join([
        update("future_kind", foo=1),
        update("notice", severity="info", title="x"),
        update("tool_call", toolCallId="c", title="t", kind="not-a-kind",
               locations=[{"path": "/ok"}, {"line": 3}], content=[{"type": "text"}]),
        update("current_mode_update", modeId="plan"),
    ]))
    assert [r.reason for r in of(out, AgentRaw)] == ["unknown_update", "unstable_update",
                                                     "current_mode"]
    start = of(out, ToolCallStart)[0]
    assert start.name == "other" and start.meta["acp"]["locations"] == [{"path": "/ok"}]
    assert client.updates.mode == "plan"


def test_update_after_the_turn_and_for_another_session_are_recorded_not_emitted() -> None:
    client, _ = ready_client()
    pid = prompt(client)
    client.receive_data(result(pid, {"stopReason": "end_turn"}))
    out = client.receive_data(update("agent_message_chunk",
                                     content={"type": "text", "text": "late"}))
    assert not of(out, TextChunk)
    assert [r.reason for r in of(out, AgentRaw)] == ["update_after_turn"]
    out = client.receive_data(update("agent_message_chunk", "other",
                                     content={"type": "text", "text": "x"}))
    assert [r.reason for r in of(out, AgentRaw)] == ["other_session"]


def test_prompts_are_sent_one_at_a_time() -> None:
    client, _ = ready_client()
    first = prompt(client, "one")
    from trio_cap.events.kinds import ContentBlock, UserInputInject

    assert written(client.send(UserInputInject(content=(ContentBlock(text="two"),)))) == []
    out = client.receive_data(result(first, {"stopReason": "end_turn"}))
    assert turn_ends(out) == ["end_turn"]
    assert written(out)[0]["params"]["prompt"] == [{"type": "text", "text": "two"}]


@pytest.mark.parametrize(("stop", "ends", "code"), [
    ("max_tokens", "max_tokens", None), ("cancelled", "cancelled", None),
    ("max_turn_requests", "error", "max_turns"), ("refusal", "error", "agent_error")])
def test_stop_reasons(stop: str, ends: str, code: str | None) -> None:
    client, _ = ready_client()
    pid = prompt(client)
    out = client.receive_data(result(pid, {"stopReason": stop}))
    assert turn_ends(out) == [ends]
    assert [e.code for e in of(out, CapError)] == ([code] if code else [])


def test_prompt_error_and_cancelled_error() -> None:
    client, _ = ready_client()
    pid = prompt(client)
    out = client.receive_data(error(pid, -32603, "model exploded"))
    assert turn_ends(out) == ["error"] and of(out, CapError)[0].code == "agent_error"
    pid = prompt(client)
    assert turn_ends(client.receive_data(error(pid, -32800, "cancelled"))) == ["cancelled"]


def test_prompt_usage_becomes_cap_usage() -> None:
    client, _ = ready_client()
    pid = prompt(client)
    out = client.receive_data(result(pid, {"stopReason": "end_turn", "usage": {
        "inputTokens": 7, "outputTokens": 3, "totalTokens": 10}}))
    usage = of(out, Usage)[0]
    assert (usage.input_tokens, usage.output_tokens, usage.stop_reason) == (7, 3, "end_turn")


# ---- reverse requests (A11-A19, C2-C5) --------------------------------------------------


def test_permission_request_carries_options_and_maps_decisions_to_option_ids() -> None:
    client, _ = ready_client()
    prompt(client)
    out = client.receive_data(request(0, "session/request_permission", PERMISSION))
    req = of(out, PermissionRequest)[0]
    assert req.tool == "Edit" and req.scope == "write"
    assert req.intent == {"path": f"{CWD}/config.json"}
    assert [o["kind"] for o in req.meta["acp"]["options"]] == ["allow_once", "allow_always",
                                                               "reject_once"]
    out = client.send(PermissionResponse(req_id=req.req_id, decision="allow_always"))
    assert written(out) == [{"jsonrpc": "2.0", "id": 0, "result": {
        "outcome": {"outcome": "selected", "optionId": "always"}}}]
    out = client.receive_data(request("x-1", "session/request_permission", PERMISSION))
    req = of(out, PermissionRequest)[0]
    out = client.send(PermissionResponse(req_id=req.req_id, decision="deny"))
    assert written(out)[0]["id"] == "x-1"  # string ids echoed exactly
    assert written(out)[0]["result"]["outcome"] == {"outcome": "selected", "optionId": "no"}
    assert client.send(PermissionResponse(req_id=req.req_id, decision="deny")) == []


def test_agent_risk_in_meta_is_passed_through_untouched() -> None:
    client, _ = ready_client()
    prompt(client)
    params = {**PERMISSION, "_meta": {"cap.agent_risk": "low"}}
    req = of(client.receive_data(request(0, "session/request_permission", params)),
             PermissionRequest)[0]
    assert req.meta["cap.agent_risk"] == "low" and req.risk_level == "medium"


def test_permission_naming_an_earlier_tool_call_is_rated_from_it() -> None:
    client, _ = ready_client()
    prompt(client)
    client.receive_data(update("tool_call", toolCallId="c9", title="Run", kind="execute",
                               rawInput={"command": "rm -rf /"}))
    out = client.receive_data(request(3, "session/request_permission", {
        "sessionId": "s1", "toolCall": {"toolCallId": "c9"},
        "options": [{"optionId": "ok", "name": "OK", "kind": "allow_once"}]}))
    req = of(out, PermissionRequest)[0]
    assert (req.tool, req.scope, req.intent) == ("Bash", "execute", {"command": "rm -rf /"})
    # a deny with no reject option offered: cancelled, never an allow
    out = client.send(PermissionResponse(req_id=req.req_id, decision="deny"))
    assert written(out)[0]["result"]["outcome"] == {"outcome": "cancelled"}


def test_two_permission_requests_pending_at_once() -> None:
    client, _ = ready_client()
    prompt(client)
    out = client.receive_data(request(5, "session/request_permission", PERMISSION)
                              + request(6, "session/request_permission", PERMISSION))
    a, b = of(out, PermissionRequest)
    assert a.req_id != b.req_id
    assert written(client.send(PermissionResponse(req_id=b.req_id, decision="allow_once")))[0][
        "id"] == 6
    assert written(client.send(PermissionResponse(req_id=a.req_id, decision="deny")))[0][
        "id"] == 5


def test_cancel_sends_session_cancel_and_answers_everything_pending() -> None:
    client, _ = ready_client()
    pid = prompt(client)
    client.receive_data(request(0, "session/request_permission", PERMISSION))
    client.receive_data(request(1, "elicitation/create", {
        "sessionId": "s1", "mode": "form", "message": "pick",
        "requestedSchema": {"properties": {"x": {"type": "string"}}}}))
    client.receive_data(request(2, "fs/write_text_file", {
        "sessionId": "s1", "path": f"{CWD}/a", "content": "x"}))
    out = client.send(Cancel(scope="current_turn"))
    sent = written(out)
    assert sent[0] == {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}}
    by_id = {m["id"]: m for m in sent[1:]}
    assert by_id[0]["result"] == {"outcome": {"outcome": "cancelled"}}
    assert by_id[1]["result"] == {"action": "cancel"}
    assert by_id[2]["error"]["code"] == -32800
    assert client.send(Cancel(scope="current_turn")) == []  # once per turn
    # an agent that answers end_turn after a cancel still ended cancelled
    assert turn_ends(client.receive_data(result(pid, {"stopReason": "end_turn"}))) == [
        "cancelled"]


def test_elicitation_form_to_ask_and_answers_validated() -> None:
    client, _ = ready_client()
    prompt(client)
    schema = {"properties": {"strategy": {"type": "string", "enum": ["a", "b"]},
                             "n": {"type": "integer", "minimum": 1}},
              "required": ["strategy"]}
    out = client.receive_data(request(4, "elicitation/create", {
        "sessionId": "s1", "mode": "form", "message": "How?", "requestedSchema": schema}))
    ask = of(out, AskUser)[0]
    assert ask.prompt == "How?" and ask.form["type"] == "object"
    out = client.send(AskUserAnswer(ask_id=ask.ask_id, value={"strategy": "a", "n": 2}))
    assert written(out)[0]["result"] == {"action": "accept",
                                         "content": {"strategy": "a", "n": 2}}
    out = client.receive_data(request(5, "elicitation/create", {
        "sessionId": "s1", "mode": "form", "message": "How?", "requestedSchema": schema}))
    ask = of(out, AskUser)[0]
    out = client.send(AskUserAnswer(ask_id=ask.ask_id, value={"strategy": "zzz"}))
    assert written(out)[0]["result"] == {"action": "decline"}
    assert of(out, CapError)[0].code == "cap_invalid_answer"
    out = client.receive_data(request(6, "elicitation/create", {
        "sessionId": "s1", "mode": "form", "message": "?", "requestedSchema": schema}))
    out = client.send(AskUserAnswer(ask_id=of(out, AskUser)[0].ask_id, value=None))
    assert written(out)[0]["result"] == {"action": "decline"}


def test_url_elicitation_is_refused_as_not_advertised() -> None:
    client, _ = ready_client()
    out = client.receive_data(request(1, "elicitation/create", {
        "requestId": 3, "mode": "url", "message": "go", "url": "https://x", "elicitationId": "e"}))
    assert written(out)[0]["error"]["code"] == -32602
    assert not of(out, AskUser)


def test_fs_read_is_served_by_the_shell_and_answered_with_its_id() -> None:
    client, _ = ready_client()
    out = client.receive_data(request("r1", "fs/read_text_file", {
        "sessionId": "s1", "path": f"{CWD}/a", "line": 2, "limit": 1}))
    (serve,) = serves(out)
    assert serve.rpc_id == "r1" and serve.params.line == 2
    from trio_cap.actors.bindings.acp import frames as f

    out = client.answer("r1", f.ReadTextFileResult(content="b\n"))
    assert written(out) == [{"jsonrpc": "2.0", "id": "r1", "result": {"content": "b\n"}}]
    assert client.answer("r1", {}) == []  # answered once


def test_writes_and_terminals_are_vetted_unless_the_agent_asked_for_the_same() -> None:
    client, _ = ready_client()
    prompt(client)
    out = client.receive_data(request(1, "fs/write_text_file", {
        "sessionId": "s1", "path": f"{CWD}/new.txt", "content": "hello"}))
    vet = of(out, PermissionRequest)[0]
    assert (vet.tool, vet.intent) == ("Write", {"file_path": f"{CWD}/new.txt",
                                                "content": "hello"})
    assert serves(client.send(PermissionResponse(req_id=vet.req_id, decision="allow_once")))
    out = client.receive_data(request(2, "terminal/create", {
        "sessionId": "s1", "command": "ls", "args": ["-l", "a b"]}))
    vet = of(out, PermissionRequest)[0]
    assert (vet.tool, vet.scope, vet.intent["command"]) == ("Bash", "execute", "ls -l 'a b'")
    out = client.send(PermissionResponse(req_id=vet.req_id, decision="deny",
                                         meta={"cap.message": "no"}))
    assert written(out)[0]["error"]["message"] == "permission denied: no"
    # the agent's own allowed request for the file covers the write that follows
    req = of(client.receive_data(request(3, "session/request_permission", PERMISSION)),
             PermissionRequest)[0]
    client.send(PermissionResponse(req_id=req.req_id, decision="allow_once"))
    out = client.receive_data(request(4, "fs/write_text_file", {
        "sessionId": "s1", "path": f"{CWD}/config.json", "content": "{}"}))
    assert serves(out) and not of(out, PermissionRequest)


def test_bypass_mode_serves_writes_without_asking() -> None:
    client, _ = ready_client(permission_mode="none")
    out = client.receive_data(request(1, "fs/write_text_file", {
        "sessionId": "s1", "path": f"{CWD}/x", "content": ""}))
    assert serves(out) and not of(out, PermissionRequest)


def test_unadvertised_capability_unknown_method_and_bad_params() -> None:
    client, _ = ready_client(terminal=False)
    out = client.receive_data(request(1, "terminal/create", {"sessionId": "s1", "command": "x"}))
    assert written(out)[0]["error"]["code"] == -32601
    assert of(out, CapError)[0].code == "cap_unsupported_capability"
    out = client.receive_data(request(2, "_zed.dev/thing", {}))
    assert written(out)[0]["error"]["code"] == -32601
    assert of(out, AgentRaw)[0].reason == "unknown_request"
    out = client.receive_data(request(3, "fs/read_text_file", {"sessionId": "s1"}))
    assert written(out)[0]["error"]["code"] == -32602
    out = client.receive_data(request(4, "fs/read_text_file", {"sessionId": "zz", "path": "/a"}))
    assert written(out)[0]["error"]["code"] == -32602
    assert client.receive_data(notify("_ext/hello", {}))[0].reason == "unknown_notification"


def test_cancel_request_withdraws_a_pending_request() -> None:
    client, _ = ready_client()
    prompt(client)
    out = client.receive_data(request(9, "terminal/wait_for_exit",
                                      {"sessionId": "s1", "terminalId": "t"}))
    assert serves(out)
    out = client.receive_data(notify("$/cancel_request", {"requestId": 9}))
    assert of(out, Withdraw) == [Withdraw(9)]
    assert written(out)[0] == {"jsonrpc": "2.0", "id": 9, "error": {
        "code": -32800, "message": "request cancelled by the agent"}}
    assert client.answer(9, {}) == []


def test_broken_lines_get_typed_errors_and_replies() -> None:
    client, _ = ready_client()
    out = client.receive_data(b"this is not json\n")
    assert of(out, CapError)[0].code == "parse_failed"
    assert written(out)[0]["error"]["code"] == -32700
    out = client.receive_data(line({"id": 3, "method": "x"}))  # no jsonrpc member
    assert written(out)[0]["error"]["code"] == -32600
    out = client.receive_data(result(99, {}))
    assert of(out, AgentRaw)[0].reason == "stray_response"


def test_overlong_line_is_a_parse_error_and_the_next_line_still_counts() -> None:
    client = AcpClient(ClientOptions(cwd=CWD), max_line=64)
    client.initialize()
    out = client.receive_data(b"x" * 200 + b"\n" + result(0, {"protocolVersion": 1}))
    assert of(out, CapError)[0].code == "parse_failed"
    assert written(out)[-1]["method"] == "session/new"


def test_a_request_named_session_update_is_answered_not_taken_for_the_notification() -> None:
    client, _ = ready_client()
    prompt(client)
    body = {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk",
                                          "content": {"type": "text", "text": "x"}}}
    out = client.receive_data(update("agent_message_chunk", content={"type": "text",
                                                                      "text": "a"})
                              + request(7, "session/update", body))
    assert [t.text for t in of(out, TextChunk)] == ["a"]
    assert written(out)[0]["id"] == 7 and written(out)[0]["error"]["code"] == -32601


def test_consecutive_chunks_of_one_read_are_one_event_with_the_same_text() -> None:
    client, _ = ready_client()
    prompt(client)
    lines = b"".join(update("agent_message_chunk", content={"type": "text", "text": w},
                            messageId="m") for w in ("a", "b", "c"))
    whole = of(client.receive_data(lines), TextChunk)
    client2, _ = ready_client()
    prompt(client2)
    split = [e for i in range(len(lines)) for e in of(client2.receive_data(lines[i:i + 1]),
                                                      TextChunk)]
    assert [t.text for t in whole] == ["abc"]
    assert "".join(t.text for t in split) == "abc" and {t.message_id for t in split} == {"m"}
