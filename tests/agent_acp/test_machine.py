"""The ACP agent-side machine's rules and transition table, row by row, with no I/O."""

from __future__ import annotations

from typing import Any

import pytest

from tests.agent_acp.harness import Harness, requests, updates
from trio_cap.actors.bindings.acp import frames as f
from trio_cap.actors.bindings.acp.agent_effects import ClientError
from trio_cap.actors.bindings.base import REFUSAL_MESSAGE
from trio_cap.events.kinds import (
    AskUser,
    AskUserAnswer,
    Cancel,
    CapError,
    PermissionRequest,
    PermissionResponse,
    Plan,
    PlanEntry,
    SessionConfig,
    TextChunk,
    Thought,
    ToolCallEnd,
    ToolCallStart,
    UserInputInject,
)

WRITE = ToolCallStart(call_id="call_1", name="Write", input={"path": "a.txt", "content": "x\n"})
ASK_WRITE = PermissionRequest(req_id="perm_1", tool="Write", scope="write", risk_level="medium",
                              intent={"path": "a.txt", "content": "x\n"})


def decisions(h: Harness, sid: str) -> list[PermissionResponse]:
    return [e for e in h.delivered[sid] if isinstance(e, PermissionResponse)]


def test_session_new_logs_the_config_and_starts_a_core_before_answering() -> None:
    h = Harness(model="m1")
    sid = h.session(cwd="/work/x")
    (start,) = h.started
    assert start.session_id == sid and start.config.cwd == "/work/x"
    assert start.config.model == "m1" and start.config.permission_mode == "interactive"
    assert isinstance(h.log[0].event, SessionConfig) and h.log[0].stream == sid
    result = h.lines[-1]["result"]
    assert result["modes"]["currentModeId"] == "default"
    assert [m["id"] for m in result["modes"]["availableModes"]] == [
        "default", "acceptEdits", "plan", "bypassPermissions"]


def test_a_turn_streams_its_updates_and_ends_with_the_response_last() -> None:
    h = Harness()
    sid = h.session()
    rid = h.prompt(sid, "hello")
    (inject,) = [e for e in h.delivered[sid] if isinstance(e, UserInputInject)]
    assert inject.text == "hello"
    lines = h.core(sid, Thought(message_id="t1", text="hmm"),
                   TextChunk(message_id="m1", text="Hi "),
                   Plan(entries=(PlanEntry(id="p1", content="a", status="cancelled",
                                           priority="urgent"),)),
                   WRITE, ToolCallEnd(call_id="call_1", output="wrote 2 bytes"))
    kinds = [u["sessionUpdate"] for u in updates(lines)]
    assert kinds == ["agent_thought_chunk", "agent_message_chunk", "plan", "tool_call",
                     "tool_call_update"]
    plan = updates(lines)[2]["entries"][0]
    assert (plan["priority"], plan["status"]) == ("high", "completed")
    call = updates(lines)[3]
    assert call["kind"] == "edit" and call["locations"] == [{"path": "/w/a.txt"}]
    assert call["content"] == [{"type": "diff", "path": "/w/a.txt", "newText": "x\n",
                                "oldText": None}]
    end = h.end(sid)
    assert end == [{"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}}]
    # rule 1: a late event of the answered turn is not shown
    assert h.core(sid, TextChunk(message_id="m1", text="late")) == []


def test_a_second_prompt_while_one_runs_is_refused_and_the_first_goes_on() -> None:
    h = Harness()
    sid = h.session()
    first = h.prompt(sid)
    _, lines = h.request("session/prompt", {"sessionId": sid, "prompt": []})
    assert lines[0]["error"]["code"] == -32602
    assert h.end(sid)[0]["id"] == first


@pytest.mark.parametrize("option, decision", [
    ("allow_once", "allow_once"), ("allow_always", "allow_always"),
    ("reject_once", "deny"), ("reject_always", "deny"), ("made_up", "deny")])
def test_permission_goes_to_the_client_before_the_tool_and_its_choice_applies(
        option: str, decision: str) -> None:
    h = Harness()
    sid = h.session()
    h.prompt(sid)
    lines = h.core(sid, WRITE, ASK_WRITE)
    (ask,) = requests(lines, "session/request_permission")
    params = ask["params"]
    assert params["toolCall"]["toolCallId"] == "call_1"  # the call the client saw
    assert [o["kind"] for o in params["options"]] == [
        "allow_once", "allow_always", "reject_once", "reject_always"]
    assert decisions(h, sid) == []  # nothing decided before the client answers
    h.answer(ask["id"], {"outcome": {"outcome": "selected", "optionId": option}})
    (response,) = decisions(h, sid)
    assert (response.req_id, response.decision) == ("perm_1", decision)
    if decision == "deny":
        assert response.meta and response.meta[REFUSAL_MESSAGE]


@pytest.mark.parametrize("answer", [
    {"result": {"outcome": {"outcome": "cancelled"}}},
    {"error": {"code": -32603, "message": "ui crashed"}},
    {"result": {"outcome": "garbage"}}])
def test_a_permission_the_client_does_not_settle_is_denied(answer: dict[str, Any]) -> None:
    h = Harness()
    sid = h.session()
    h.prompt(sid)
    (ask,) = requests(h.core(sid, WRITE, ASK_WRITE), "session/request_permission")
    h.answer(ask["id"], **answer)
    assert [r.decision for r in decisions(h, sid)] == ["deny"]


@pytest.mark.parametrize("mode, tool, scope, risk, allow_high, expect", [
    ("acceptEdits", "Write", "write", "medium", False, "allow_once"),
    ("acceptEdits", "Bash", "execute", "medium", False, "ask"),
    ("acceptEdits", "Write", "write", "high", False, "ask"),
    ("bypassPermissions", "Bash", "execute", "medium", False, "allow_once"),
    ("bypassPermissions", "Bash", "execute", "high", False, "ask"),
    ("bypassPermissions", "Bash", "execute", "high", True, "allow_once"),
    ("plan", "Write", "write", "low", False, "deny"),
    ("default", "Read", "read", "low", False, "allow_once"),
    ("default", "Write", "write", "low", False, "ask"),
])
def test_modes_decide_before_asking_and_high_risk_always_asks(
        mode: str, tool: str, scope: str, risk: str, allow_high: bool, expect: str) -> None:
    h = Harness(mode=mode, allow_high_risk=allow_high)
    sid = h.session()
    h.prompt(sid)
    lines = h.core(sid, PermissionRequest(req_id="perm_1", tool=tool, scope=scope,  # type: ignore[arg-type]
                                          risk_level=risk, intent={"path": "a"}))  # type: ignore[arg-type]
    asked = requests(lines, "session/request_permission")
    if expect == "ask":
        assert asked and decisions(h, sid) == []
    else:
        assert not asked and [r.decision for r in decisions(h, sid)] == [expect]


def test_set_mode_changes_what_is_asked() -> None:
    h = Harness()
    sid = h.session()
    _, lines = h.request("session/set_mode", {"sessionId": sid, "modeId": "acceptEdits"})
    assert lines[0]["result"] == {}
    _, bad = h.request("session/set_mode", {"sessionId": sid, "modeId": "yolo"})
    assert bad[0]["error"]["code"] == -32602
    h.prompt(sid)
    assert requests(h.core(sid, WRITE, ASK_WRITE), "session/request_permission") == []


def test_allow_always_is_remembered_but_never_for_high_risk() -> None:
    h = Harness()
    sid = h.session()
    h.prompt(sid)
    (ask,) = requests(h.core(sid, WRITE, ASK_WRITE), "session/request_permission")
    h.answer(ask["id"], {"outcome": {"outcome": "selected", "optionId": "allow_always"}})
    again = PermissionRequest(req_id="perm_2", tool="Write", scope="write", risk_level="medium")
    assert requests(h.core(sid, again), "session/request_permission") == []
    high = PermissionRequest(req_id="perm_3", tool="Write", scope="write", risk_level="high")
    assert len(requests(h.core(sid, high), "session/request_permission")) == 1
    assert [r.decision for r in decisions(h, sid)] == ["allow_always", "allow_always"]


def test_cancel_tells_the_core_resolves_what_waits_and_the_answer_is_cancelled() -> None:
    h = Harness()
    sid = h.session(client={"fs": {"readTextFile": True, "writeTextFile": True}})
    h.prompt(sid)
    (ask,) = requests(h.core(sid, WRITE, ASK_WRITE), "session/request_permission")
    written = h.run(h.machine.client_call(7, sid, f.FS_READ, f.ReadTextFileParams(
        session_id=sid, path="/w/a.txt")))
    assert requests(written, f.FS_READ)
    assert h.notify("session/cancel", {"sessionId": sid}) == []
    assert isinstance(h.delivered[sid][-1], Cancel)
    assert isinstance(h.resolved[7], ClientError) and h.resolved[7].code == f.REQUEST_CANCELLED
    # the client's late "cancelled" answer is ignored, not delivered
    h.answer(ask["id"], {"outcome": {"outcome": "cancelled"}})
    assert decisions(h, sid) == []
    # whatever the core reports, the turn was cancelled
    assert h.end(sid, "error")[0]["result"] == {"stopReason": "cancelled"}


def test_a_failed_turn_is_an_error_response_naming_the_errors() -> None:
    h = Harness()
    sid = h.session()
    rid = h.prompt(sid)
    lines = h.core(sid, CapError(code="rate_limit", message="slow down"))
    assert lines == []
    (response,) = h.end(sid, "error")
    assert response["id"] == rid and response["error"]["code"] == -32603
    assert "rate_limit: slow down" in response["error"]["message"]


def test_max_turns_maps_to_max_turn_requests_and_usage_rides_in_meta() -> None:
    from trio_cap.events.kinds import Usage

    h = Harness()
    sid = h.session()
    h.prompt(sid)
    h.core(sid, Usage(model_id="m", input_tokens=3, output_tokens=4))
    (response,) = h.end(sid, "tool_use")
    assert response["result"]["stopReason"] == "max_turn_requests"
    assert response["result"]["_meta"]["cap.usage"]["output_tokens"] == 4


def test_tool_host_requests_only_while_a_turn_runs_and_answers_are_typed() -> None:
    h = Harness()
    sid = h.session(client={"terminal": True})
    params = f.TerminalParams(session_id=sid, terminal_id="t1")
    assert h.run(h.machine.client_call(1, sid, f.TERMINAL_OUTPUT, params)) == []
    assert isinstance(h.resolved[1], ClientError)  # no turn: nothing sent
    h.prompt(sid)
    h.core(sid, ToolCallStart(call_id="call_1", name="Bash", input={"command": "ls"}))
    (sent,) = h.run(h.machine.client_call(2, sid, f.TERMINAL_CREATE, f.CreateTerminalParams(
        session_id=sid, command="/bin/sh", args=("-c", "ls"))))
    h.answer(sent["id"], {"terminalId": "t9"})
    assert h.resolved[2] == f.CreateTerminalResult(terminal_id="t9")
    shown = h.run(h.machine.terminal_started(sid, "t9"))
    assert updates(shown)[0]["content"] == [{"type": "terminal", "terminalId": "t9"}]
    (sent,) = h.run(h.machine.client_call(3, sid, f.TERMINAL_WAIT, params))
    h.answer(sent["id"], error={"code": -32002, "message": "gone"})
    assert h.resolved[3] == ClientError(-32002, "gone")
    end = h.core(sid, ToolCallEnd(call_id="call_1", output="a\n"))
    assert [c["type"] for c in updates(end)[0]["content"]] == ["terminal", "content"]
    h.end(sid)
    # a release after the turn still goes out (cleanup), anything else does not
    assert requests(h.run(h.machine.client_call(4, sid, f.TERMINAL_RELEASE, params)),
                    f.TERMINAL_RELEASE)


def test_a_write_reported_by_the_tool_host_shows_as_the_calls_diff() -> None:
    h = Harness()
    sid = h.session()
    h.prompt(sid)
    h.core(sid, WRITE)
    shown = h.run(h.machine.file_changed(sid, "/w/a.txt", "old\n", "x\n"))
    diff = {"type": "diff", "path": "/w/a.txt", "newText": "x\n", "oldText": "old\n"}
    assert updates(shown)[0]["content"] == [diff]
    end = h.core(sid, ToolCallEnd(call_id="call_1", output="wrote 2 bytes"))
    assert updates(end)[0]["content"][0] == diff


def test_asks_use_form_elicitation_when_advertised_else_go_unanswered() -> None:
    h = Harness()
    sid = h.session(client={"elicitation": {"form": {}}})
    h.prompt(sid)
    form = {"type": "string", "oneOf": [{"const": "a", "title": "a"}]}
    (ask,) = requests(h.core(sid, AskUser(ask_id="ask_1", prompt="which?", form=form)),
                      "elicitation/create")
    schema = ask["params"]["requestedSchema"]
    assert schema["properties"]["answer"]["oneOf"] == form["oneOf"]
    h.answer(ask["id"], {"action": "accept", "content": {"answer": "a"}})
    assert h.delivered[sid][-1] == AskUserAnswer(ask_id="ask_1", value="a")
    plain = Harness()
    sid = plain.session()
    plain.prompt(sid)
    assert plain.core(sid, AskUser(ask_id="ask_1", prompt="which?")) == []
    assert plain.delivered[sid][-1].value is None  # type: ignore[union-attr]


def test_load_replays_the_logged_session_then_answers_then_takes_prompts() -> None:
    h = Harness()
    sid = h.session()
    h.prompt(sid, "do it")
    h.core(sid, TextChunk(message_id="m", text="done"), WRITE,
           ToolCallEnd(call_id="call_1", output="ok"))
    h.end(sid)
    again = Harness()
    again.log = list(h.log)  # the same log, a new process
    again.request("initialize", {"protocolVersion": 1})
    rid, lines = again.request("session/load", {"sessionId": sid, "cwd": "/w",
                                                "mcpServers": []})
    kinds = [u["sessionUpdate"] for u in updates(lines)]
    assert kinds == ["user_message_chunk", "agent_message_chunk", "tool_call",
                     "tool_call_update"]
    assert lines[-1]["id"] == rid and "modes" in lines[-1]["result"]
    (start,) = again.started
    assert start.config.session_resume_id == sid
    again.prompt(sid)
    _, missing = again.request("session/load", {"sessionId": "nope", "cwd": "/w",
                                                "mcpServers": []})
    assert missing[0]["error"]["code"] == f.RESOURCE_NOT_FOUND
    _, no_mcp = again.request("session/load", {"sessionId": sid, "cwd": "/w"})
    assert no_mcp[0]["error"]["code"] == -32602


def test_close_answers_the_running_prompt_and_stops_the_core() -> None:
    h = Harness()
    sid = h.session()
    rid = h.prompt(sid)
    _, lines = h.request("session/close", {"sessionId": sid})
    assert lines[0] == {"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "cancelled"}}
    assert lines[1]["result"] == {} and h.stopped == [sid]
    assert h.end(sid) == []
    _, gone = h.request("session/prompt", {"sessionId": sid, "prompt": []})
    assert gone[0]["error"]["code"] == -32602


def test_eof_cancels_running_turns_stops_every_core_and_finishes() -> None:
    h = Harness()
    a, b = h.session(), h.session()
    rid = h.prompt(a)
    lines = h.run(h.machine.receive_eof())
    assert lines == [{"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "cancelled"}}]
    assert sorted(h.stopped) == sorted([a, b]) and h.finished == 0
    assert h.machine.receive_data(b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\n') == []


def test_core_failure_fails_the_turn_and_ends_the_session() -> None:
    h = Harness()
    sid = h.session()
    rid = h.prompt(sid)
    (response,) = h.run(h.machine.core_failed(sid, "the bridged agent died"))
    assert response["id"] == rid and "died" in response["error"]["message"]
    assert h.stopped == [sid]


def test_prompt_blocks_become_the_brains_text() -> None:
    h = Harness()
    sid = h.session()
    h.request("session/prompt", {"sessionId": sid, "prompt": [
        {"type": "text", "text": "look at"},
        {"type": "resource_link", "uri": "file:///w/a.py", "name": "a.py"},
        {"type": "resource", "resource": {"uri": "file:///w/b.py", "text": "print(1)"}}]})
    (inject,) = [e for e in h.delivered[sid] if isinstance(e, UserInputInject)]
    assert inject.text == "look at\n@file:///w/a.py\nfile:///w/b.py:\nprint(1)"


def test_a_yes_no_ask_without_elicitation_becomes_a_permission_request() -> None:
    h = Harness()
    sid = h.session()
    h.prompt(sid)
    ask = AskUser(ask_id="ask_1", prompt="Allow Write(p.txt)? (y/n)",
                  form={"type": "string", "enum": ["yes", "no"]})
    (request,) = requests(h.core(sid, ask), "session/request_permission")
    assert request["params"]["toolCall"]["title"] == "Allow Write(p.txt)? (y/n)"
    h.answer(request["id"], {"outcome": {"outcome": "selected", "optionId": "reject_once"}})
    assert h.delivered[sid][-1] == AskUserAnswer(ask_id="ask_1", value="no")
    (again,) = requests(h.core(sid, AskUser(ask_id="ask_2", prompt="ok?", form={
        "oneOf": [{"const": "y"}, {"const": "n"}]})), "session/request_permission")
    h.answer(again["id"], {"outcome": {"outcome": "cancelled"}})
    assert h.delivered[sid][-1] == AskUserAnswer(ask_id="ask_2", value=None)


def test_after_a_cancel_nothing_more_is_asked_of_the_client() -> None:
    h = Harness()
    sid = h.session(client={"fs": {"readTextFile": True}})
    h.prompt(sid)
    h.notify("session/cancel", {"sessionId": sid})
    lines = h.core(sid, WRITE, ASK_WRITE, AskUser(ask_id="ask_1", prompt="q"))
    assert requests(lines, "session/request_permission") == []
    assert [r.decision for r in decisions(h, sid)] == ["deny"]
    assert h.run(h.machine.client_call(1, sid, f.FS_READ, {"sessionId": sid})) == []
    assert isinstance(h.resolved[1], ClientError)
    release = h.run(h.machine.client_call(2, sid, f.TERMINAL_RELEASE, {"sessionId": sid}))
    assert requests(release, f.TERMINAL_RELEASE)  # cleanup still goes out


def test_a_bridged_acp_agents_own_tool_call_description_and_diffs_are_passed_on() -> None:
    from trio_cap.events.kinds import ToolCallDelta

    h = Harness()
    sid = h.session()
    h.prompt(sid)
    diff = {"type": "diff", "path": "/w/x.py", "newText": "b\n", "oldText": "a\n"}
    start = ToolCallStart(call_id="c1", name="edit", input={"filePath": "/w/x.py"}, meta={
        "acp": {"title": "Edit x.py", "kind": "edit", "locations": [{"path": "/w/x.py"}]}})
    progress = ToolCallDelta(call_id="c1", output_chunk="", meta={
        "acp": {"status": "in_progress", "diffs": [diff], "terminals": ["driver_term"]}})
    end = ToolCallEnd(call_id="c1", output="done", meta={"acp": {"diffs": [diff]}})
    call, moving, done = updates(h.core(sid, start, progress, end))
    assert (call["title"], call["kind"], call["locations"]) == (
        "Edit x.py", "edit", [{"path": "/w/x.py"}])
    assert moving["content"] == [diff]  # the driver's terminal is not the client's
    assert done["content"][0] == diff and len(done["content"]) == 2  # the diff once, then text
