"""The sans-io stream-json driver: bytes in, CAP events out, no processes involved."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trio_cap.actors.bindings.base import AGENT_RISK, TurnEnded
from trio_cap.actors.bindings.stream_json.driver import StreamJsonDriver, ToAgent
from trio_cap.actors.bindings.stream_json.driver_argv import driver_argv
from trio_cap.actors.bindings.stream_json.driver_rules import error_code
from trio_cap.events.kinds import (
    AgentRaw,
    AskUser,
    AskUserAnswer,
    Cancel,
    CapError,
    CapSessionReady,
    PermissionRequest,
    PermissionResponse,
    SessionConfig,
    TextChunk,
    Thought,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

from .frames_lib import (
    SID,
    assistant,
    block_start,
    block_stop,
    can_use_tool,
    delta,
    init_ok,
    line,
    merged,
    message_start,
    new_driver,
    prompt,
    result,
    system_init,
    text_turn,
    tool_result,
)


def ready_driver() -> StreamJsonDriver:
    driver = new_driver()
    driver.initialize()
    (ready,) = driver.receive_data(init_ok())
    assert isinstance(ready, CapSessionReady) and ready.session_id == SID
    return driver


def of(outputs: list[Any], kind: type) -> list[Any]:
    return [o for o in outputs if type(o) is kind]


def text(outputs: list[Any], channel: str = "assistant") -> str:
    return "".join(o.text for o in of(outputs, TextChunk) if o.channel == channel)


def sent(data: bytes) -> dict[str, Any]:
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    return json.loads(data)


# ---- handshake and prompts --------------------------------------------------


def test_initialize_first_then_ready_from_its_answer() -> None:
    driver = new_driver()
    frame = sent(driver.initialize())
    assert frame["type"] == "control_request"
    assert frame["request"]["subtype"] == "initialize"
    assert driver.receive_data(system_init()) == [AgentRaw(
        binding="stream-json", reason="init", text=system_init().decode().strip())]
    (ready,) = driver.receive_data(init_ok(frame["request_id"]))
    assert ready.meta == {"stream_json": {"claude_code_version": "2.1.332", "pid": 42}}
    with pytest.raises(RuntimeError):
        driver.initialize()


def test_refused_initialize_is_a_handshake_failure() -> None:
    driver = new_driver()
    request_id = sent(driver.initialize())["request_id"]
    (err,) = driver.receive_data(line({"type": "control_response", "response": {
        "subtype": "error", "request_id": request_id, "error": "nope"}}))
    assert isinstance(err, CapError) and driver.handshake_error == "nope"
    assert driver.state.value == "failed"


def test_every_prompt_carries_a_uuid_and_keeps_the_role() -> None:
    driver = ready_driver()
    first, second = sent(driver.send(prompt("one"))), sent(driver.send(prompt("two")))
    assert first["message"] == {"role": "user", "content": "one"}
    assert (first["uuid"], second["uuid"]) == ("u1", "u2")
    assert driver.send(SessionConfig(cwd="/work")) == b""


# ---- text, thinking, tools --------------------------------------------------


def test_partial_messages_are_not_doubled_by_the_assistant_frame() -> None:
    driver = ready_driver()
    driver.send(prompt("hi"))
    out = driver.receive_data(system_init() + text_turn("hello there, world"))
    assert text(out) == "hello there, world"
    assert len(of(out, TextChunk)) == 1  # R2: the deltas of one block in one read: one event
    assert {c.message_id for c in of(out, TextChunk)} == {"msg_1"}
    driver.send(prompt("again"))
    out = []
    for piece in text_turn("one delta at a time", msg="msg_2").splitlines(keepends=True):
        out += driver.receive_data(piece)
    chunks = [c.text for c in of(out, TextChunk)]
    assert "".join(chunks) == "one delta at a time" and len(chunks) == 4  # one per read


def test_assistant_frame_completes_what_deltas_missed() -> None:
    driver = ready_driver()
    driver.send(prompt("hi"))
    out = driver.receive_data(
        message_start() + block_start(0, {"type": "text", "text": ""})
        + delta(0, {"type": "text_delta", "text": "hel"})
        + assistant({"type": "text", "text": "hello"}) + block_stop(0))
    assert [c.text for c in of(out, TextChunk)] == ["hel", "lo"]


def test_without_partial_messages_the_assistant_frame_is_the_text() -> None:
    driver = ready_driver()
    driver.send(prompt("hi"))
    out = driver.receive_data(assistant({"type": "thinking", "thinking": "hmm", "signature": "s"},
                                         {"type": "text", "text": "answer"}))
    assert [type(o) for o in out] == [Thought, TextChunk]
    assert (out[0].text, out[1].text) == ("hmm", "answer")


def test_thinking_deltas_are_thoughts() -> None:
    driver = ready_driver()
    driver.send(prompt("hi"))
    out = driver.receive_data(
        message_start() + block_start(0, {"type": "thinking", "thinking": "", "signature": ""})
        + delta(0, {"type": "thinking_delta", "thinking": "Let "})
        + delta(0, {"type": "thinking_delta", "thinking": "me."})
        + delta(0, {"type": "signature_delta", "signature": "sig"})
        + assistant({"type": "thinking", "thinking": "Let me.", "signature": "sig"})
        + block_stop(0))
    assert [o.text for o in of(out, Thought)] == ["Let me."]
    assert not of(out, TextChunk)


def test_tool_use_starts_once_and_its_result_ends_it() -> None:
    driver = ready_driver()
    driver.send(prompt("write"))
    call = {"type": "tool_use", "id": "toolu_1", "name": "Write",
            "input": {"file_path": "/work/a.txt", "content": "x"}}
    out = driver.receive_data(
        message_start() + block_start(0, {**call, "input": {}})
        + delta(0, {"type": "input_json_delta", "partial_json": '{"file_path":"/work/a.txt",'})
        + delta(0, {"type": "input_json_delta", "partial_json": '"content":"x"}'})
        + assistant(call) + block_stop(0) + tool_result("toolu_1", "File created"))
    (start,) = of(out, ToolCallStart)
    assert (start.call_id, start.name, start.input) == ("toolu_1", "Write", call["input"])
    (end,) = of(out, ToolCallEnd)
    assert (end.call_id, end.output, end.is_error) == ("toolu_1", "File created", False)


def test_streamed_tool_input_is_used_when_no_assistant_frame_comes() -> None:
    driver = ready_driver()
    driver.send(prompt("run"))
    out = driver.receive_data(
        message_start() + block_start(0, {"type": "tool_use", "id": "t9", "name": "Bash",
                                          "input": {}})
        + delta(0, {"type": "input_json_delta", "partial_json": '{"command":"ls"}'})
        + block_stop(0))
    (start,) = of(out, ToolCallStart)
    assert start.input == {"command": "ls"}


# ---- turns ------------------------------------------------------------------


def test_result_ends_the_turn_with_usage_and_per_turn_cost() -> None:
    driver = ready_driver()
    driver.send(prompt("one"))
    first = driver.receive_data(result(["u1"], cost=0.25))
    driver.send(prompt("two"))
    second = driver.receive_data(result(["u2"], cost=0.40))
    (u1,), (u2,) = of(first, Usage), of(second, Usage)
    assert u1.cost_usd_estimate == pytest.approx(0.25)
    assert u2.cost_usd_estimate == pytest.approx(0.15)  # the delta, not the running total
    assert (u2.input_tokens, u2.output_tokens, u2.cache_read_tokens, u2.thinking_tokens) == (
        20, 10, 5, 3)
    assert u2.model_id == "claude-opus-5-5" and u2.duration_ms == 100
    assert first[-1] == TurnEnded("end_turn") and second[-1] == TurnEnded("end_turn")


def test_a_second_result_for_the_same_turn_is_kept_raw_not_a_turn_end() -> None:
    driver = ready_driver()
    driver.send(prompt("one"))
    assert of(driver.receive_data(result(["u1"], cost=0.1)), TurnEnded)
    driver.send(prompt("two"))
    again = driver.receive_data(result(["u1"], cost=0.1, uuid="other"))
    assert [type(o) for o in again] == [AgentRaw] and again[0].reason == "duplicate_result"
    assert driver.turn_running
    assert of(driver.receive_data(result(["u2"], cost=0.2)), TurnEnded)


def test_a_repeated_result_without_uuids_is_a_duplicate_too() -> None:
    driver = ready_driver()
    driver.send(prompt("one"))
    frame = result(None, cost=0.1, uuid="r1")
    assert of(driver.receive_data(frame), TurnEnded)
    driver.send(prompt("two"))
    assert not of(driver.receive_data(frame), TurnEnded)
    assert of(driver.receive_data(result(None, cost=0.3, uuid="r2")), TurnEnded)


def test_merged_prompts_end_together_by_uuid() -> None:
    """Prompts queued mid-turn are merged by the CLI: one result closes several uuids."""
    driver = ready_driver()
    for word in ("one", "two", "three"):
        driver.send(prompt(word))
    first = driver.receive_data(result(["u1"], cost=0.1))
    assert of(first, TurnEnded) == [TurnEnded("end_turn")]
    merged = driver.receive_data(result(["u2", "u3"], cost=0.3))
    assert of(merged, TurnEnded) == [TurnEnded("end_turn")] * 2
    assert len(of(merged, Usage)) == 1
    assert not driver.turn_running


def test_system_init_every_turn_is_kept_once() -> None:
    driver = ready_driver()
    kept = []
    for i in (1, 2, 3):
        driver.send(prompt(str(i)))
        kept += of(driver.receive_data(system_init() + result([f"u{i}"], cost=i)), AgentRaw)
    assert [k.reason for k in kept] == ["init"]
    driver.send(prompt("4"))
    changed = of(driver.receive_data(system_init(model="claude-x")), AgentRaw)
    assert [k.reason for k in changed] == ["init_changed"]


# ---- errors -----------------------------------------------------------------


@pytest.mark.parametrize(("status", "message", "code"), [
    (429, "API Error: 429 rate_limit_error", "rate_limit"),
    (401, "API Error: 401 authentication_error", "auth_error"),
    (400, "API Error: 400 prompt is too long: 210000 tokens > 200000 maximum", "context_overflow"),
    (529, "API Error: 529 overloaded", "model_unavailable"),
    (400, "API Error: 400 bad request", "agent_error"),
])
def test_api_error_results_map_to_cap_error_codes(status: int, message: str, code: str) -> None:
    assert error_code(status, message) == code
    driver = ready_driver()
    driver.send(prompt("x"))
    out = driver.receive_data(result(["u1"], is_error=True, text=message,
                                     api_error_status=status, terminal_reason="api_error"))
    (err,) = of(out, CapError)
    assert err.code == code and err.message == message
    assert of(out, Usage)[0].stop_reason == "error"
    assert out[-1] == TurnEnded("error")


def test_synthetic_api_error_message_is_one_error_not_text() -> None:
    driver = ready_driver()
    driver.send(prompt("x"))
    out = driver.receive_data(
        assistant({"type": "text", "text": "API Error: 401 invalid x-api-key"},
                  model="<synthetic>", error="authentication_failed",
                  is_api_error_message=True, api_error_status=401)
        + result(["u1"], is_error=True, text="API Error: 401 invalid x-api-key",
                 api_error_status=401))
    assert [e.code for e in of(out, CapError)] == ["auth_error"]
    assert not of(out, TextChunk)


def test_api_retry_is_a_retryable_error() -> None:
    driver = ready_driver()
    (err,) = driver.receive_data(line({
        "type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 10,
        "retry_delay_ms": 500, "error_status": 529, "error": "overloaded_error"}))
    assert (err.code, err.retryable) == ("model_unavailable", True)


def test_max_turns_and_budget_results() -> None:
    driver = ready_driver()
    driver.send(prompt("x"))
    out = driver.receive_data(result(["u1"], subtype="error_max_turns", is_error=True, text=None,
                                     errors=["Reached maximum number of turns (1)"]))
    assert of(out, CapError)[0].code == "max_turns"
    driver.send(prompt("y"))
    out = driver.receive_data(result(["u2"], subtype="error_max_budget_usd", is_error=True,
                                     text=None, cost=0.5))
    assert of(out, CapError)[0].code == "cap_budget_exceeded"


# ---- malformed and unknown input --------------------------------------------


def test_malformed_line_is_parse_failed_and_decoding_goes_on() -> None:
    driver = ready_driver()
    driver.send(prompt("x"))
    out = driver.receive_data(b"this is not json\n" + b'{"type":"assistant",\n'
                              + text_turn("still here"))
    errors = of(out, CapError)
    assert [e.code for e in errors] == ["parse_failed", "parse_failed"]
    assert errors[0].details["raw"] == "this is not json"
    assert text(out) == "still here"


def test_a_frame_spliced_into_another_line_recovers_both() -> None:
    driver = ready_driver()
    driver.send(prompt("x"))
    driver.receive_data(text_turn("ok"))
    whole = result(["u1"], cost=0.2).rstrip(b"\n")
    spliced = line({"type": "system", "subtype": "status", "status": "requesting"}).rstrip(b"\n")
    async_frame = line({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected"},
                        "uuid": "r", "session_id": SID}).rstrip(b"\n")
    cut = len(whole) // 2
    out = driver.receive_data(whole[:cut] + async_frame + b"\n" + whole[cut:] + b"\n")
    assert [type(o) for o in out] == [CapError, Usage, TurnEnded]
    assert out[0].code == "rate_limit"  # the async frame, recovered first
    # Two frames glued without a newline are split too.
    driver.send(prompt("y"))
    out = driver.receive_data(spliced + result(["u2"], cost=0.3))
    assert of(out, TurnEnded) and not of(out, CapError)


def test_chunk_boundaries_do_not_matter() -> None:
    data = system_init() + text_turn("split anywhere") + result(["u1"])
    whole = ready_driver()
    whole.send(prompt("x"))
    expected = whole.receive_data(data)
    bytewise = ready_driver()
    bytewise.send(prompt("x"))
    got: list[Any] = []
    for i in range(len(data)):
        got += bytewise.receive_data(data[i:i + 1])
    assert merged(got) == merged(expected)  # R2: text boundaries are the only difference
    assert len(of(got, TextChunk)) > len(of(expected, TextChunk)) == 1


def test_unknown_frames_are_kept_raw_and_quiet_ones_dropped() -> None:
    driver = ready_driver()
    out = driver.receive_data(
        line({"type": "transcript_mirror", "data": 1})
        + line({"type": "system", "subtype": "brand_new", "x": 1})
        + line({"type": "system", "subtype": "status", "status": None})
        + line({"type": "command_lifecycle", "command_uuid": "u1", "state": "queued"})
        + line({"type": "keep_alive"}))
    assert [(o.reason, json.loads(o.text)["type"]) for o in out] == [
        ("unknown frame type 'transcript_mirror'", "transcript_mirror"),
        ("unknown_system_frame", "system")]


def test_an_overlong_line_is_reported_not_buffered() -> None:
    driver = StreamJsonDriver(new_uuid=lambda: "u", max_line=1000)
    out = driver.receive_data(b'{"type":"assistant","x":"' + b"a" * 5000)
    assert out == []
    out = driver.receive_data(b'a"}\n' + line({"type": "keep_alive"}))
    (err,) = out
    assert err.code == "parse_failed" and err.details["size"] > 5000


def test_eof_flushes_a_last_line_without_newline() -> None:
    driver = ready_driver()
    driver.send(prompt("x"))
    driver.receive_data(result(["u1"]).rstrip(b"\n"))
    assert of(driver.receive_eof(), TurnEnded)


# ---- permissions and cancel -------------------------------------------------


def test_can_use_tool_is_a_permission_request_the_driver_does_not_rate() -> None:
    """R13: risk is the session machine's; the driver sends CAP's default and the scope."""
    driver = ready_driver()
    driver.send(prompt("x"))
    (write,) = driver.receive_data(can_use_tool("p1", "Write", {"file_path": "/work/a.txt",
                                                                "content": "x"}))
    assert isinstance(write, PermissionRequest)
    assert (write.req_id, write.tool, write.scope, write.risk_level) == (
        "p1", "Write", "write", "medium")
    assert write.meta == {"stream_json": {"tool_use_id": "toolu_1", "description": "do it"}}
    for req_id, tool, args, scope in [
            ("p2", "Read", {"file_path": "/work/a.txt"}, "read"),
            ("p3", "Bash", {"command": "rm -rf /"}, "execute"),
            ("p4", "Write", {"file_path": "/etc/x"}, "write"),
            ("p5", "WebFetch", {"url": "https://x"}, "network")]:
        (request,) = driver.receive_data(can_use_tool(req_id, tool, args))
        assert (request.scope, request.risk_level) == (scope, "medium")
        assert AGENT_RISK not in (request.meta or {})  # Claude Code rates nothing itself


@pytest.mark.parametrize(("claimed", "passed"), [
    ("low", "low"), ("high", "high"), ("medium", "medium"), ("none", None), (3, None)])
def test_an_agent_s_own_rating_passes_through_untouched(claimed: Any, passed: str | None) -> None:
    driver = ready_driver()
    frame = json.loads(can_use_tool("p1", "Bash", {"command": "rm -rf /"}))
    frame["request"]["_meta"] = {AGENT_RISK: claimed}
    (request,) = driver.receive_data(line(frame))
    assert request.risk_level == "medium"
    assert (request.meta or {}).get(AGENT_RISK) == passed


def test_permission_answers_allow_with_input_always_for_the_session_or_deny() -> None:
    driver = ready_driver()
    driver.send(prompt("x"))
    args = {"command": "touch a"}
    driver.receive_data(can_use_tool("p1", "Bash", args) + can_use_tool("p2", "Bash", args)
                        + can_use_tool("p3", "Bash", args))
    allow = sent(driver.send(PermissionResponse(req_id="p1", decision="allow_once")))
    assert allow["response"] == {"subtype": "success", "request_id": "p1",
                                 "response": {"behavior": "allow", "updatedInput": args}}
    always = sent(driver.send(PermissionResponse(req_id="p2", decision="allow_always")))
    assert always["response"]["response"]["updatedPermissions"] == [
        {"type": "setMode", "mode": "acceptEdits", "destination": "session"}]
    deny = sent(driver.send(PermissionResponse(req_id="p3", decision="deny")))
    assert deny["response"]["response"]["behavior"] == "deny"
    assert driver.send(PermissionResponse(req_id="p3", decision="deny")) == b""


def test_control_cancel_request_withdraws_a_pending_prompt() -> None:
    driver = ready_driver()
    driver.send(prompt("x"))
    driver.receive_data(can_use_tool("p1", "Bash", {"command": "touch a"}))
    (withdrawn,) = driver.receive_data(line({"type": "control_cancel_request",
                                             "request_id": "p1"}))
    assert withdrawn.reason == "permission_withdrawn"
    assert driver.send(PermissionResponse(req_id="p1", decision="allow_once")) == b""


def test_unserved_control_requests_are_answered_with_an_error() -> None:
    driver = ready_driver()
    raw, answer = driver.receive_data(line({"type": "control_request", "request_id": "h1",
                                            "request": {"subtype": "hook_callback",
                                                        "callback_id": "hook_0"}}))
    assert raw.reason == "unsupported_control_request"
    assert isinstance(answer, ToAgent)
    body = sent(answer.data)["response"]
    assert (body["subtype"], body["request_id"]) == ("error", "h1")


def test_interrupt_ends_the_turn_as_cancelled() -> None:
    driver = ready_driver()
    assert driver.send(Cancel(scope="current_turn")) == b""  # nothing running
    driver.send(prompt("x"))
    interrupt = sent(driver.send(Cancel(scope="current_turn")))
    assert interrupt["request"] == {"subtype": "interrupt"}
    assert driver.send(Cancel(scope="current_turn")) == b""  # one interrupt is enough
    out = driver.receive_data(result(["u1"], subtype="error_during_execution", is_error=True,
                                     text=None, terminal_reason="aborted_streaming",
                                     errors=["[ede_diagnostic] aborted"]))
    assert not of(out, CapError)
    assert of(out, Usage)[0].stop_reason == "cancelled"
    assert out[-1] == TurnEnded("cancelled")


def test_error_during_execution_without_an_interrupt_is_an_error() -> None:
    driver = ready_driver()
    driver.send(prompt("x"))
    out = driver.receive_data(result(["u1"], subtype="error_during_execution", is_error=True,
                                     text=None, errors=["boom"]))
    assert of(out, CapError)[0].message == "boom"
    assert out[-1] == TurnEnded("error")


# ---- argv -------------------------------------------------------------------


def test_argv_adds_the_session_config_to_the_manifest_argv() -> None:
    base = ("claude", "-p", "--input-format", "stream-json", "--output-format", "stream-json",
            "--verbose")
    config = SessionConfig(cwd="/w", model="m", max_turns=3, system_prompt="be brief",
                           permission_mode="none")
    argv = driver_argv(base, config, "sess-1")
    assert argv[: len(base)] == base
    assert argv[len(base):] == (
        "--include-partial-messages", "--permission-prompt-tool", "stdio",
        "--permission-mode", "bypassPermissions", "--model", "m", "--max-turns", "3",
        "--append-system-prompt", "be brief", "--session-id=sess-1")
    resumed = driver_argv(("agent",), SessionConfig(cwd="/w", session_resume_id="old"), "x")
    assert resumed == ("agent", "--output-format", "stream-json", "--verbose",
                       "--include-partial-messages", "--permission-prompt-tool", "stdio",
                       "--permission-mode", "default", "--resume", "old",
                       "--input-format", "stream-json")


def test_ask_user_question_is_an_ask_and_the_answer_fills_its_input() -> None:
    driver = ready_driver()
    driver.send(prompt("x"))
    question = {"questions": [{"question": "Which DB?", "header": "DB", "multiSelect": False,
                               "options": [{"label": "pg", "description": ""},
                                           {"label": "sqlite", "description": ""}]}]}
    (ask,) = driver.receive_data(can_use_tool("q1", "AskUserQuestion", question))
    assert isinstance(ask, AskUser) and (ask.ask_id, ask.prompt) == ("q1", "Which DB?")
    assert [c["const"] for c in ask.form["oneOf"]] == ["pg", "sqlite"]
    assert driver.pending_permissions == frozenset()  # not a permission
    answer = sent(driver.send(AskUserAnswer(ask_id="q1", value="sqlite")))
    assert answer["response"]["response"] == {
        "behavior": "allow", "updatedInput": {**question, "answers": {"Which DB?": "sqlite"}}}
    assert driver.send(AskUserAnswer(ask_id="q1", value="pg")) == b""  # answered once
    driver.receive_data(can_use_tool("q2", "AskUserQuestion", question))
    declined = sent(driver.send(AskUserAnswer(ask_id="q2", value=None)))
    assert declined["response"]["response"]["behavior"] == "deny"
