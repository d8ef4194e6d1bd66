"""The sans-io agent side, driven by hand: client frames in, core events in, frames out."""

from __future__ import annotations

import pytest

from tests.agent_stream_json.harness import (
    SID,
    Harness,
    answer,
    control,
    every_frame_parses_with_the_python_sdk,
    write_call,
)
from trio_cap.actors.bindings.base import UPDATED_INPUT
from trio_cap.actors.bindings.stream_json.agent_side import COMPAT_VERSION
from trio_cap.events.kinds import (
    AskUser,
    AskUserAnswer,
    Cancel,
    CapError,
    CapSessionReady,
    PermissionRequest,
    PermissionResponse,
    Plan,
    PlanEntry,
    SessionConfig,
    TextChunk,
    Thought,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UserInputInject,
)


def test_initialize_is_answered_and_its_system_prompt_goes_into_the_config():
    h = Harness(system_prompt="from argv")
    h.send(control("req_1", subtype="initialize", hooks=None, systemPrompt=["Be terse."],
                   appendSystemPrompt="Really."))
    (reply,) = h.take()
    assert reply["type"] == "control_response"
    body = reply["response"]
    assert (body["subtype"], body["request_id"]) == ("success", "req_1")
    assert body["response"]["claude_code_version"] == COMPAT_VERSION
    assert body["response"]["pid"] == 4242
    h.prompt("hello")
    config = h.delivered[0]
    assert isinstance(config, SessionConfig)
    assert config.system_prompt == "Be terse.\nReally."
    assert config.cwd == "/work"
    assert isinstance(h.delivered[1], UserInputInject) and h.delivered[1].text == "hello"
    assert h.kinds() == ["cap.session.config", "cap.user_input.inject"]


def test_an_empty_system_prompt_means_none():
    h = Harness(system_prompt=None)
    h.send(control("r", subtype="initialize", systemPrompt=[""]))
    h.prompt("hi")
    assert h.delivered[0].system_prompt is None


def test_one_turn_gives_init_assistant_frames_a_diff_and_exactly_one_result():
    h = Harness()
    h.prompt("write a.txt: x", uuid="u-1")
    init = h.frames("system", "init")[0]
    assert init["session_id"] == SID and init["claude_code_version"] == COMPAT_VERSION
    assert init["cwd"] == "/work" and init["model"] == "cap-scripted"
    assert init["permissionMode"] == "default" and "Write" in init["tools"]
    h.core(CapSessionReady(session_id=SID), TextChunk(message_id="m1", text="Hello "),
           TextChunk(message_id="m1", text="there."))
    assert h.frames("assistant") == []  # a block goes out when it is complete
    h.core(Usage(input_tokens=3, output_tokens=2, cost_usd_estimate=0.25, duration_ms=7))
    h.end_turn()
    (assistant,) = h.frames("assistant")
    assert assistant["message"]["content"] == [{"type": "text", "text": "Hello there."}]
    assert assistant["message"]["model"] == "cap-scripted"
    diff, result = h.out[-2:]
    assert diff["subtype"] == "cap.transcript_diff"
    assert diff["cap"]["from_seq"] == 1 and diff["cap"]["to_seq"] == len(h.log)
    assert result["type"] == "result" and result["subtype"] == "success"
    assert result["result"] == "Hello there." and result["is_error"] is False
    assert result["num_turns"] == 1 and result["total_cost_usd"] == 0.25
    assert result["usage"]["input_tokens"] == 3 and result["user_message_uuid"] == "u-1"
    assert result["_meta"]["cap.transcript_seq"] == len(h.log)
    assert len(h.frames("result")) == 1
    every_frame_parses_with_the_python_sdk(h)


def test_partial_messages_follow_claude_codes_order():
    h = Harness(partial_messages=True)
    h.prompt("go")
    h.take()
    h.core(Thought(message_id="t", text="hmm"), TextChunk(message_id="m", text="Hi"),
           ToolCallStart(call_id="c1", name="Bash", input={"command": "ls"}))
    events = [(fr["type"], fr.get("event", {}).get("type"),
               (fr.get("event", {}).get("delta") or {}).get("type")) for fr in h.out]
    assert events == [
        ("stream_event", "message_start", None),
        ("stream_event", "content_block_start", None),
        ("stream_event", "content_block_delta", "thinking_delta"),
        ("stream_event", "content_block_delta", "signature_delta"),
        ("assistant", None, None),
        ("stream_event", "content_block_stop", None),
        ("stream_event", "content_block_start", None),
        ("stream_event", "content_block_delta", "text_delta"),
        ("assistant", None, None),
        ("stream_event", "content_block_stop", None),
        ("stream_event", "content_block_start", None),
        ("stream_event", "content_block_delta", "input_json_delta"),
        ("assistant", None, None),
        ("stream_event", "content_block_stop", None),
        ("stream_event", "message_delta", None),
        ("stream_event", "message_stop", None),
    ]
    ids = {fr["message"]["id"] for fr in h.frames("assistant")}
    assert len(ids) == 1  # blocks of one API message share its id
    assert all(fr["uuid"] and fr["session_id"] == SID for fr in h.frames("stream_event"))
    every_frame_parses_with_the_python_sdk(h)


def test_tool_inputs_use_claude_codes_shapes_and_an_allow_can_rewrite_them():
    h = Harness(permission_prompt_tool="stdio")
    h.prompt("go")
    write_call(h)
    (request,) = h.frames("control_request")
    body = request["request"]
    assert body["subtype"] == "can_use_tool" and body["tool_name"] == "Write"
    assert body["input"] == {"file_path": "/work/a.txt", "content": "x\n"}
    assert body["blocked_path"] == "/work/a.txt" and body["permission_suggestions"] == []
    assert body["_meta"] == {"cap.agent_risk": "medium"}  # the brain's own claim, passed on
    tool_use = h.frames("assistant")[-1]["message"]["content"][0]
    assert body["tool_use_id"] == tool_use["id"]
    assert h.delivered[-1] == UserInputInject(content=h.delivered[-1].content)  # nothing yet
    h.send(answer(request["request_id"], {"behavior": "allow", "updatedInput": {
        "file_path": "/work/sub/b.txt", "content": "y\n"}}))
    reply = h.delivered[-1]
    assert isinstance(reply, PermissionResponse) and reply.decision == "allow_once"
    assert reply.meta[UPDATED_INPUT] == {"path": "sub/b.txt", "content": "y\n"}


def test_an_allow_with_the_input_unchanged_carries_no_rewrite():
    h = Harness(permission_prompt_tool="stdio")
    h.prompt("go")
    write_call(h)
    request = h.frames("control_request")[0]
    h.send(answer(request["request_id"], {"behavior": "allow",
                                          "updatedInput": request["request"]["input"]}))
    assert UPDATED_INPUT not in h.delivered[-1].meta


def test_a_deny_becomes_an_error_tool_result_and_a_permission_denial():
    h = Harness(permission_prompt_tool="stdio")
    h.prompt("go")
    write_call(h)
    request = h.frames("control_request")[0]
    h.send(answer(request["request_id"], {"behavior": "deny", "message": "not today"}))
    assert h.delivered[-1].decision == "deny"
    h.core(ToolCallEnd(call_id="call_1", output="permission denied", is_error=True))
    result_frame = h.frames("user")[-1]
    block = result_frame["message"]["content"][0]
    assert block == {"type": "tool_result", "tool_use_id": request["request"]["tool_use_id"],
                     "content": "not today", "is_error": True}
    h.core(Usage())
    h.end_turn()
    (denial,) = h.frames("result")[0]["permission_denials"]
    assert denial == {"tool_name": "Write", "tool_use_id": request["request"]["tool_use_id"],
                      "tool_input": {"file_path": "/work/a.txt", "content": "x\n"}}


def test_an_error_answer_is_a_deny():
    h = Harness(permission_prompt_tool="stdio")
    h.prompt("go")
    write_call(h)
    h.send(answer(h.frames("control_request")[0]["request_id"], error="callback blew up"))
    assert h.delivered[-1].decision == "deny"
    assert h.delivered[-1].meta["cap.message"] == "callback blew up"


def test_without_the_stdio_prompt_tool_a_call_needing_permission_is_denied_at_once():
    h = Harness()
    h.prompt("go")
    write_call(h)
    assert h.frames("control_request") == []
    (denied,) = h.frames("system", "permission_denied")
    assert denied["tool_name"] == "Write"
    assert h.delivered[-1].decision == "deny"


@pytest.mark.parametrize(("mode", "scope", "tool", "verdict"), [
    ("bypassPermissions", "execute", "Bash", "allow_once"),
    ("acceptEdits", "write", "Write", "allow_once"),
    ("acceptEdits", "execute", "Bash", "ask"),
    ("plan", "write", "Write", "deny"),
    ("plan", "read", "Read", "allow_once"),
    ("default", "read", "Read", "allow_once"),
    ("dontAsk", "write", "Write", "deny"),
])
def test_permission_modes(mode, scope, tool, verdict):
    h = Harness(permission_mode=mode, permission_prompt_tool="stdio")
    h.prompt("go")
    h.core(ToolCallStart(call_id="c", name=tool, input={"path": "a"}),
           PermissionRequest(req_id="p", tool=tool, intent={"path": "a"}, scope=scope))
    if verdict == "ask":
        assert h.frames("control_request")[0]["request"]["tool_name"] == tool
        assert isinstance(h.delivered[-1], UserInputInject)
    else:
        assert h.frames("control_request") == []
        assert h.delivered[-1].decision == verdict


def test_allowed_and_disallowed_tool_rules():
    h = Harness(permission_prompt_tool="stdio", allowed_tools=("Bash(git:*)",),
                disallowed_tools=("Write",))
    h.prompt("go")
    h.core(ToolCallStart(call_id="c1", name="Bash", input={"command": "git status"}),
           PermissionRequest(req_id="p1", tool="Bash", intent={"command": "git status"},
                             scope="execute"))
    assert h.delivered[-1].decision == "allow_once"
    write_call(h, call_id="c2")
    assert h.delivered[-1].decision == "deny"
    h.core(ToolCallStart(call_id="c3", name="Bash", input={"command": "rm x"}),
           PermissionRequest(req_id="p3", tool="Bash", intent={"command": "rm x"},
                             scope="execute"))
    assert h.frames("control_request")[0]["request"]["input"] == {"command": "rm x"}


def test_interrupt_withdraws_the_prompt_cancels_the_turn_and_ends_it_with_an_error_result():
    h = Harness(permission_prompt_tool="stdio")
    h.prompt("go")
    write_call(h)
    request_id = h.frames("control_request")[0]["request_id"]
    h.send(control("req_9", subtype="interrupt"))
    reply = h.frames("control_response")[-1]["response"]
    assert reply["subtype"] == "success" and reply["request_id"] == "req_9"
    assert h.frames("control_cancel_request") == [
        {"type": "control_cancel_request", "request_id": request_id}]
    assert h.delivered[-1] == Cancel(scope="current_turn", reason="interrupt")
    h.core(Usage(stop_reason="cancelled"))
    h.end_turn("cancelled")
    notice = h.frames("user")[-1]["message"]["content"][0]["text"]
    assert notice == "[Request interrupted by user for tool use]"
    result = h.frames("result")[-1]
    assert result["subtype"] == "error_during_execution" and result["is_error"] is True
    assert "result" not in result and result["terminal_reason"] == "aborted_tools"
    h.send(answer(request_id, {"behavior": "allow"}))  # too late: refused, not applied
    assert h.log[-1].event.code == "cap_unknown_permission"
    every_frame_parses_with_the_python_sdk(h)


def test_interrupt_when_idle_is_answered_and_nothing_else_happens():
    h = Harness()
    h.send(control("r1", subtype="interrupt"))
    assert h.take() == [{"type": "control_response", "response": {
        "subtype": "success", "request_id": "r1", "response": {"still_queued": []}}}]
    assert h.delivered == []


def test_prompts_wait_for_the_turn_before_them():
    h = Harness()
    h.prompt("one")
    h.prompt("two")
    assert [e.text for e in h.delivered if isinstance(e, UserInputInject)] == ["one"]
    h.core(Usage())
    h.end_turn()
    assert [e.text for e in h.delivered if isinstance(e, UserInputInject)] == ["one", "two"]
    assert len(h.frames("result")) == 1 and len(h.frames("system", "init")) == 2


def test_a_cap_session_config_before_the_first_prompt_is_the_config():
    h = Harness()
    h.send({"type": "cap.session.config", "cwd": "/elsewhere", "model": "m2",
            "system_prompt": "S", "max_turns": 3, "budget_usd": 1.5,
            "permission_mode": "none", "session_resume_id": "old",
            "profile_config": {"coding": {"fs": "workspace_only"}}})
    h.prompt("hi")
    config = h.delivered[0]
    assert config == SessionConfig(cwd="/elsewhere", model="m2", system_prompt="S", max_turns=3,
                                   budget_usd=1.5, permission_mode="none",
                                   session_resume_id="old",
                                   profile_config={"coding": {"fs": "workspace_only"}})
    assert h.frames("system", "init")[0]["model"] == "m2"


def test_a_late_cap_session_config_is_refused():
    h = Harness()
    h.prompt("hi")
    h.send({"type": "cap.session.config", "cwd": "/late"})
    (error,) = h.frames("system", "cap.error")
    assert error["cap"]["code"] == "cap_session_config_missing"
    assert error["cap"]["numeric"] == -32002
    assert next(e for e in h.delivered if isinstance(e, SessionConfig)).cwd == "/work"


def test_a_turn_that_would_start_over_budget_is_refused():
    h = Harness(budget_usd=0.5)
    h.prompt("one")
    h.core(Usage(cost_usd_estimate=0.5))
    h.end_turn()
    h.prompt("two")
    injects = [e for e in h.delivered if isinstance(e, UserInputInject)]
    assert [e.text for e in injects] == ["one"]
    result = h.frames("result")[-1]
    assert result["subtype"] == "error_max_budget_usd" and result["is_error"] is True
    assert result["errors"][0].startswith("cap_budget_exceeded")
    assert h.log[-1].event == CapError(code="cap_budget_exceeded", message=result["errors"][0],
                                       details={"prompt": "two"})
    assert h.frames("system", "cap.error")[-1]["cap"]["numeric"] == -32004


def test_max_turns_stop_is_an_error_max_turns_result():
    h = Harness(max_turns=1)
    h.prompt("go")
    h.core(Usage(stop_reason="tool_use"))
    h.end_turn("tool_use")
    result = h.frames("result")[-1]
    assert result["subtype"] == "error_max_turns"
    assert result["errors"] == ["Reached maximum number of turns (1)"]


def test_a_failed_turn_reports_the_cap_error():
    h = Harness()
    h.prompt("fail: rate_limit")
    h.core(CapError(code="rate_limit", message="slow down", retryable=True), Usage())
    h.end_turn("error")
    error = h.frames("system", "cap.error")[0]["cap"]
    assert error == {"code": "rate_limit", "message": "slow down", "retryable": True}
    result = h.frames("result")[-1]
    assert result["is_error"] is True and result["errors"] == ["rate_limit: slow down"]


def test_asks_go_through_ask_user_question_and_the_answer_reaches_the_core():
    h = Harness(permission_prompt_tool="stdio")
    h.prompt("ask: Which DB? [pg|sqlite]")
    form = {"type": "string", "oneOf": [{"const": "pg"}, {"const": "sqlite"}]}
    h.core(AskUser(ask_id="ask_1", prompt="Which DB?", form=form))
    request = h.frames("control_request")[0]
    questions = request["request"]["input"]["questions"]
    assert request["request"]["tool_name"] == "AskUserQuestion"
    assert [o["label"] for o in questions[0]["options"]] == ["pg", "sqlite"]
    h.send(answer(request["request_id"], {"behavior": "allow", "updatedInput": {
        "questions": questions, "answers": {"Which DB?": "sqlite"}}}))
    assert h.delivered[-1] == AskUserAnswer(ask_id="ask_1", value="sqlite")
    assert "sqlite" in h.frames("user")[-1]["message"]["content"][0]["content"]


def test_without_the_stdio_prompt_tool_an_ask_is_declined():
    h = Harness()
    h.prompt("ask: ok?")
    h.core(AskUser(ask_id="ask_1", prompt="ok?"))
    assert h.delivered[-1] == AskUserAnswer(ask_id="ask_1", value=None)


def test_a_plan_is_a_todo_write_call_with_its_result():
    h = Harness()
    h.prompt("plan: a; b")
    h.core(Plan(entries=(PlanEntry(id="p1", content="a", status="in_progress"),
                         PlanEntry(id="p2", content="b"))))
    tool = h.frames("assistant")[-1]["message"]["content"][0]
    assert tool["name"] == "TodoWrite"
    assert [t["status"] for t in tool["input"]["todos"]] == ["in_progress", "pending"]
    assert h.frames("user")[-1]["message"]["content"][0]["tool_use_id"] == tool["id"]


def test_control_requests_the_agent_has_no_use_for():
    h = Harness()
    h.send(control("a", subtype="set_permission_mode", mode="plan"),
           control("b", subtype="set_model", model="m9"),
           control("c", subtype="mcp_status"),
           control("d", subtype="rewind_files", user_message_id="x"),
           control("e", subtype="no_such_thing"),
           control("g", subtype="set_permission_mode", mode="sideways"))
    replies = {fr["response"]["request_id"]: fr["response"] for fr in h.frames("control_response")}
    assert replies["a"]["response"] == {"mode": "plan"}
    assert {fr["type"] for fr in h.out} == {"control_response"}  # idle: only the replies
    assert replies["b"]["response"] == {"model": "m9"} and h.models == ["m9"]
    assert replies["c"]["response"] == {"mcpServers": []}
    assert replies["d"]["subtype"] == "error"
    assert replies["e"] == {"subtype": "error", "request_id": "e", "error":
                           "Unsupported control request subtype: no_such_thing",
                           "error_code": "unsupported_request"}
    assert replies["g"]["subtype"] == "error"
    h.take()
    h.prompt("hi")
    assert h.frames("system", "init")[0]["model"] == "m9"
    assert h.frames("system", "init")[0]["permissionMode"] == "plan"
    # the status the mode change made while idle waited for the turn, right after its init
    assert [(fr["type"], fr.get("subtype")) for fr in h.out] == [("system", "init"),
                                                                 ("system", "status")]
    assert h.out[1]["permissionMode"] == "plan"
