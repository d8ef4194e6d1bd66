"""The driver's rules (the table at the top of ``driver.py``), one row each.

Every row starts from a ready driver with one prompt sent (``u1``), feeds the
row's ``before`` bytes, then its ``input``, and compares what ``input``
produced with the row's expected outputs, shortened to (kind, the field that
matters).  The host → agent rules (H1-H5) are a second table.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from trio_cap.actors.bindings.base import ToAgent, TurnEnded
from trio_cap.actors.bindings.stream_json.driver import DriverState, StreamJsonDriver
from trio_cap.events.kinds import (
    AgentRaw,
    AskUser,
    AskUserAnswer,
    Cancel,
    CapError,
    Event,
    PermissionRequest,
    PermissionResponse,
    SessionConfig,
    TextChunk,
    Thought,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    kind_of,
)

from .frames_lib import (
    assistant,
    block_start,
    block_stop,
    can_use_tool,
    delta,
    init_ok,
    line,
    message_start,
    new_driver,
    prompt,
    result,
    system_init,
    tool_result,
)


def short(o: Any) -> tuple[str, Any]:
    """One output as (kind, the field the rules talk about)."""
    if isinstance(o, TurnEnded):
        return ("turn_ended", o.stop_reason)
    if isinstance(o, ToAgent):
        return ("to_agent", json.loads(o.data)["response"]["subtype"])
    detail: Any = {
        TextChunk: lambda e: (e.text, e.channel), Thought: lambda e: e.text,
        ToolCallStart: lambda e: (e.call_id, e.input), ToolCallEnd: lambda e: e.call_id,
        Usage: lambda e: e.stop_reason, CapError: lambda e: e.code,
        AgentRaw: lambda e: e.reason, PermissionRequest: lambda e: (e.tool, e.risk_level),
        AskUser: lambda e: e.prompt,
    }.get(type(o), lambda e: None)(o)
    return (kind_of(type(o)), detail)


TEXT = {"type": "text", "text": ""}
TOOL = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}
QUESTION = {"questions": [{"question": "Which?", "options": [{"label": "a"}]}]}
_stream_text = message_start() + block_start(0, TEXT)

AGENT_RULES: list[tuple[str, bytes, bytes, list[tuple[str, Any]]]] = [
    # (rule, before, input, outputs of input)
    ("R2 deltas of one block in one read are one event", _stream_text,
     delta(0, {"type": "text_delta", "text": "ab"}) + delta(0, {"type": "text_delta",
                                                                "text": "cd"}),
     [("cap.text_chunk", ("abcd", "assistant"))]),
    ("R2 thinking deltas are thoughts", message_start()
     + block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
     delta(0, {"type": "thinking_delta", "thinking": "hm"}), [("cap.thought", "hm")]),
    ("R2 deltas of a block never started are dropped", message_start(),
     delta(5, {"type": "text_delta", "text": "lost"}), []),
    ("R3 the assistant frame gives only what deltas missed",
     _stream_text + delta(0, {"type": "text_delta", "text": "hel"}),
     assistant({"type": "text", "text": "hello"}), [("cap.text_chunk", ("lo", "assistant"))]),
    ("R3 nothing when the deltas gave it all",
     _stream_text + delta(0, {"type": "text_delta", "text": "hello"}),
     assistant({"type": "text", "text": "hello"}) + block_stop(0), []),
    ("R4 assistant tool_use starts the call once", b"",
     assistant({**TOOL, "input": {"command": "ls"}}) + assistant({**TOOL, "input": {}}),
     [("cap.tool_call.start", ("t1", {"command": "ls"}))]),
    ("R4 a streamed tool block's stop starts it from its input",
     message_start() + block_start(0, TOOL)
     + delta(0, {"type": "input_json_delta", "partial_json": '{"command":"l'})
     + delta(0, {"type": "input_json_delta", "partial_json": 's"}'}),
     block_stop(0), [("cap.tool_call.start", ("t1", {"command": "ls"}))]),
    ("R4 broken streamed input is kept, not lost", message_start() + block_start(0, TOOL)
     + delta(0, {"type": "input_json_delta", "partial_json": '{"comm'}),
     block_stop(0), [("cap.tool_call.start", ("t1", {"_partial_json": '{"comm'}))]),
    ("R5 tool_result ends the call", b"", tool_result("t1", "ok"),
     [("cap.tool_call.end", "t1")]),
    ("R6 user text that is not our prompt is the system speaking", b"",
     line({"type": "user", "uuid": "other", "message": {"role": "user",
                                                        "content": "[Request interrupted]"}}),
     [("cap.text_chunk", ("[Request interrupted]", "system"))]),
    ("R6 our own prompt echoed back is not", b"",
     line({"type": "user", "uuid": "u1", "message": {"role": "user", "content": "go"}}), []),
    ("R7 a result ends the prompts it closes", b"", result(["u1"]),
     [("cap.usage", "end_turn"), ("turn_ended", "end_turn")]),
    ("R7 a failed turn reports its error first", b"",
     result(["u1"], subtype="error_during_execution", is_error=True, text="boom"),
     [("cap.error", "agent_error"), ("cap.usage", "error"), ("turn_ended", "error")]),
    ("R7 without uuids the oldest running prompt", b"", result(None),
     [("cap.usage", "end_turn"), ("turn_ended", "end_turn")]),
    ("R8 a result closing nothing is a duplicate", result(["u1"]), result(["u1"], uuid="x"),
     [("agent.raw", "duplicate_result")]),
    ("R9 system/init once", system_init(), system_init(), []),
    ("R9 then only when it changes", system_init(), system_init("claude-x"),
     [("agent.raw", "init_changed")]),
    ("R10 api_retry is a retryable error", b"",
     line({"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 3,
           "retry_delay_ms": 10, "error_status": 429}), [("cap.error", "rate_limit")]),
    ("R11 system/cap.error is the CAP error", b"",
     line({"type": "system", "subtype": "cap.error",
           "cap": {"code": "tool_timeout", "message": "slow"}}), [("cap.error", "tool_timeout")]),
    ("R11 an unreadable extension is kept raw", b"",
     line({"type": "system", "subtype": "cap.artifact", "cap": {"mime_type": "x"}}),
     [("agent.raw", "unreadable cap.artifact: Object missing required field `artifact_id`")]),
    ("R12 AskUserQuestion is an ask", b"", can_use_tool("q1", "AskUserQuestion", QUESTION),
     [("cap.ask_user", "Which?")]),
    ("R12 an AskUserQuestion without questions is a permission", b"",
     can_use_tool("q1", "AskUserQuestion", {}),
     [("cap.permission.request", ("AskUserQuestion", "medium"))]),
    ("R13 can_use_tool: CAP's default risk, never a binding's rating", b"",
     can_use_tool("p1", "Bash", {"command": "rm -rf /"}),
     [("cap.permission.request", ("Bash", "medium"))]),
    ("R14 other control requests are refused", b"",
     line({"type": "control_request", "request_id": "h", "request": {"subtype": "mcp_message",
                                                                      "server_name": "x"}}),
     [("agent.raw", "unsupported_control_request"), ("to_agent", "error")]),
    ("R15 a withdrawn permission", can_use_tool("p1", "Bash", {}),
     line({"type": "control_cancel_request", "request_id": "p1"}),
     [("agent.raw", "permission_withdrawn")]),
    ("R15 withdrawing nothing says nothing", b"",
     line({"type": "control_cancel_request", "request_id": "p9"}), []),
    ("R16 a rejected rate limit", b"",
     line({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected"}}),
     [("cap.error", "rate_limit")]),
    ("R16 an allowed one is quiet", b"",
     line({"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}}), []),
    ("R17 quiet frames", b"",
     line({"type": "keep_alive"}) + line({"type": "command_lifecycle", "state": "queued"})
     + line({"type": "system", "subtype": "status"}), []),
    ("R18 unknown frame types are kept raw", b"", line({"type": "brand_new"}),
     [("agent.raw", "unknown frame type 'brand_new'")]),
    ("R18 unknown system subtypes too", b"", line({"type": "system", "subtype": "later"}),
     [("agent.raw", "unknown_system_frame")]),
    ("R18 a known type in a shape we cannot read", b"", line({"type": "result"}),
     [("agent.raw", "unreadable result frame: Object missing required field `subtype`")]),
    ("R19 a line that is not JSON", b"", b"garbage\n", [("cap.error", "parse_failed")]),
]


@pytest.mark.parametrize(("rule", "before", "data", "expected"), AGENT_RULES,
                         ids=[r[0] for r in AGENT_RULES])
def test_agent_to_host_rules(rule: str, before: bytes, data: bytes,
                             expected: list[tuple[str, Any]]) -> None:
    driver = ready()
    driver.send(prompt("go"))
    driver.receive_data(before)
    assert [short(o) for o in driver.receive_data(data)] == expected


def ready() -> StreamJsonDriver:
    driver = new_driver()
    driver.initialize()
    driver.receive_data(init_ok())
    return driver


def test_r1_the_handshake_states() -> None:
    driver = new_driver()
    assert driver.state is DriverState.NEW
    driver.initialize()
    assert driver.state is DriverState.INITIALIZING
    assert [short(o) for o in driver.receive_data(init_ok("other"))] == []  # not our request
    assert [short(o) for o in driver.receive_data(init_ok())] == [("cap.session.ready", None)]
    assert driver.state is DriverState.READY
    assert [short(o) for o in driver.receive_data(init_ok())] == []  # answered once
    driver.receive_eof()
    assert driver.state is DriverState.CLOSED


def sent(data: bytes) -> dict[str, Any] | None:
    return json.loads(data) if data else None


HOST_RULES: list[tuple[str, bytes, Event, Callable[[dict[str, Any] | None], bool]]] = [
    ("H1 a prompt carries a fresh uuid", b"", prompt("hi"),
     lambda s: s is not None and s["uuid"] == "u2" and s["message"]["content"] == "hi"),
    ("H2 allow runs the call's own input", can_use_tool("p1", "Bash", {"command": "ls"}),
     PermissionResponse(req_id="p1", decision="allow_once"),
     lambda s: s is not None and s["response"]["response"] == {
         "behavior": "allow", "updatedInput": {"command": "ls"}}),
    ("H2 the decider's rewritten input wins", can_use_tool("p1", "Bash", {"command": "ls"}),
     PermissionResponse(req_id="p1", decision="allow_once",
                        meta={"cap.updated_input": {"command": "pwd"}}),
     lambda s: s is not None and s["response"]["response"]["updatedInput"] == {
         "command": "pwd"}),
    ("H2 deny carries the reason", can_use_tool("p1", "Bash", {}),
     PermissionResponse(req_id="p1", decision="deny", meta={"cap.message": "not today"}),
     lambda s: s is not None and s["response"]["response"] == {"behavior": "deny",
                                                              "message": "not today"}),
    ("H3 an answer fills the ask's input", can_use_tool("q1", "AskUserQuestion", QUESTION),
     AskUserAnswer(ask_id="q1", value="a"),
     lambda s: s is not None and s["response"]["response"]["updatedInput"]["answers"] == {
         "Which?": "a"}),
    ("H4 cancel interrupts the running turn", b"", Cancel(scope="current_turn"),
     lambda s: s is not None and s["request"] == {"subtype": "interrupt"}),
    ("H5 an answer to nothing writes nothing", b"",
     PermissionResponse(req_id="nope", decision="allow_once"), lambda s: s is None),
    ("H5 a withdrawn request is not answered",
     can_use_tool("p1", "Bash", {}) + line({"type": "control_cancel_request",
                                             "request_id": "p1"}),
     PermissionResponse(req_id="p1", decision="allow_once"), lambda s: s is None),
    ("H5 cancelling the session is the shell's (stdin closes)", b"", Cancel(scope="session"),
     lambda s: s is None),
    ("H5 the session config went into the argv", b"", SessionConfig(cwd="/w"),
     lambda s: s is None),
]


@pytest.mark.parametrize(("rule", "before", "frame", "check"), HOST_RULES,
                         ids=[r[0] for r in HOST_RULES])
def test_host_to_agent_rules(rule: str, before: bytes, frame: Event,
                             check: Callable[[dict[str, Any] | None], bool]) -> None:
    driver = ready()
    driver.send(prompt("go"))
    driver.receive_data(before)
    assert check(sent(driver.send(frame)))


def test_h4_one_interrupt_per_turn_and_none_without_a_turn() -> None:
    driver = ready()
    assert driver.send(Cancel(scope="current_turn")) == b""
    driver.send(prompt("go"))
    assert driver.send(Cancel(scope="current_turn"))
    assert driver.send(Cancel(scope="current_turn")) == b""
