"""The driver machine's rules (``machine.py`` D1–D22, H1–H5), one or more cases each, sans-io."""

from __future__ import annotations

import json

import pytest

from tests.driver_a2a.machine_lib import (
    artifact,
    body,
    cap_part,
    driver,
    ends,
    events,
    feed,
    frame,
    inject,
    posts,
    start,
    status,
    task,
    text,
)
from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.actors.bindings.a2a.machine import (
    Body,
    CloseExchange,
    Dropped,
    Ended,
    HttpStatus,
    SseData,
)
from trio_cap.actors.bindings.base import AGENT_RISK
from trio_cap.events.kinds import (
    AgentRaw,
    Artifact,
    AskUser,
    AskUserAnswer,
    Cancel,
    CapError,
    CapSessionReady,
    PermissionRequest,
    PermissionResponse,
    SessionConfig,
    TextChunk,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)


def kinds(out: list) -> list[str]:
    return [type(o).__name__ for o in out if type(o) is not CloseExchange]


# ---- H1, H2: the send -------------------------------------------------------------------


def test_h1_config_is_ready_at_once() -> None:
    d = driver()
    assert d.send([SessionConfig(cwd="/x")]) == [CapSessionReady()]


@pytest.mark.parametrize("spelling", [f.CURRENT, f.DRAFT])
def test_h2_inject_is_a_streaming_send_in_the_spelling(spelling: f.Spelling) -> None:
    d = driver(spelling)
    (post,) = posts(d.send([inject("hi")]))
    sent = body(post)
    assert post.streaming and post.spelling == spelling
    if spelling == f.CURRENT:
        assert sent["method"] == "SendStreamingMessage"
        assert sent["params"]["message"]["role"] == "ROLE_USER"
        assert sent["params"]["message"]["parts"] == [{"text": "hi"}]
    else:
        assert sent["method"] == "message/stream"
        assert sent["params"]["message"] == {"kind": "message", "messageId": "m1",
                                             "role": "user",
                                             "parts": [{"kind": "text", "text": "hi"}]}


def test_h2_a_cap_peer_gets_the_session_config_with_the_first_message() -> None:
    d = driver(cap=True)
    meta = body(posts(d.send([inject()]))[0])["params"]["message"]["metadata"]
    assert meta["cap.session.config"]["cwd"] == "/w"
    plain = driver()
    assert "metadata" not in body(posts(plain.send([inject()]))[0])["params"]["message"]


def test_h2_the_next_task_stays_in_the_context_and_a_waiting_task_takes_the_input() -> None:
    d = driver()
    rid = start(d)
    feed(d, rid, task(), status("TASK_STATE_COMPLETED"))
    msg = body(posts(d.send([inject("next")]))[0])["params"]["message"]
    assert msg["contextId"] == "C" and "taskId" not in msg  # a new task in the context
    rid = d.stream_id
    feed(d, rid, task(tid="T2"), status("TASK_STATE_INPUT_REQUIRED", text("name?"), tid="T2"))
    msg = body(posts(d.send([inject("Ada")]))[0])["params"]["message"]
    assert (msg["taskId"], msg["contextId"]) == ("T2", "C")  # the follow-up: both ids


# ---- D1–D6: text, artifacts, data parts ----------------------------------------------------


def test_d1_agent_message_text_once_per_message_id() -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, task(), status("TASK_STATE_WORKING", text("a"), mid="x"),
               status("TASK_STATE_WORKING", text("a"), mid="x"),
               status("TASK_STATE_WORKING", text("b"), mid="y", role="ROLE_USER"))
    assert [e.text for e in events(out) if type(e) is TextChunk] == ["a"]


def test_d2_d3_d4_artifact_chunks_then_one_artifact() -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, task(), artifact("A", text("one "), name="story"),
               artifact("A", text("two "), append=True),
               artifact("A", text("three"), append=True, last=True))
    chunks = [(e.message_id, e.text) for e in events(out) if type(e) is TextChunk]
    assert chunks == [("A", "one "), ("A", "two "), ("A", "three")]
    (art,) = [e for e in events(out) if type(e) is Artifact]
    assert (art.name, art.mime_type, art.size, art.content) == ("story", "text/plain", 13, None)


def test_d2_one_read_joins_an_artifacts_chunks() -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, task(), artifact("A", text("one ")),
               artifact("A", text("two "), append=True),
               artifact("A", text("three"), append=True), batch=True)
    assert [e.text for e in events(out) if type(e) is TextChunk] == ["one ", "two three"]


def test_d3_an_artifact_left_open_closes_with_the_turn() -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, task(), artifact("A", text("x")), status("TASK_STATE_COMPLETED"))
    assert kinds(out) == ["TextChunk", "Artifact", "TurnEnded"]


def test_d3_a_tool_calls_artifact_is_its_output() -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, task(),
               status("TASK_STATE_WORKING", cap_part("cap.tool_call.start", call_id="c1",
                                                     name="shell")),
               artifact("c1", text("line1\n")),
               artifact("c1", text("line2\n"), append=True, last=True))
    evs = events(out)
    assert [type(e) for e in evs] == [ToolCallStart, ToolCallDelta, ToolCallDelta, ToolCallEnd]
    assert evs[-1].output == "line1\nline2\n"


def test_d3_data_and_file_artifacts_carry_their_content() -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, task(), artifact("D", {"data": {"n": 1}}, last=True, name="result"),
               artifact("F", {"raw": "aGk=", "filename": "hi.txt", "mediaType": "text/plain"},
                        last=True))
    data_art, file_art = [e for e in events(out) if type(e) is Artifact]
    assert (data_art.mime_type, data_art.content) == ("application/json", '{"n":1}')
    assert (file_art.name, file_art.size, file_art.content) == ("hi.txt", 2, "aGk=")
    assert file_art.meta == {"cap.encoding": "base64"}


def test_d4_a_replace_restarts_the_artifact_and_a_repeat_is_ignored() -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, task(), artifact("A", text("v1")), artifact("A", text("v1")),
               artifact("A", text("v2")))
    assert [e.text for e in events(out) if type(e) is TextChunk] == ["v1", "v2"]


def test_d5_cap_data_parts_become_their_events() -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, task(), status("TASK_STATE_WORKING",
                                      cap_part("cap.plan", entries=[{"id": "1",
                                                                     "content": "x"}]),
                                      cap_part("cap.usage", input_tokens=3.0)))
    plan, usage = events(out)
    assert plan.entries[0].content == "x" and type(usage) is Usage
    assert usage.input_tokens == 3  # a whole float from google.protobuf.Value is an int


def test_d5_the_other_spellings_of_the_cap_kind_are_read() -> None:
    d = driver()
    rid = start(d)
    cap_rs = {"data": {"kind": "cap.thought", "message_id": "t", "text": "hm"},
              "_meta": {"cap": {"kind": "cap.thought"}}}
    bare = {"data": {"kind": "cap.thought", "message_id": "t", "text": "hm2"}}
    out = feed(d, rid, task(), status("TASK_STATE_WORKING", cap_rs, bare))
    assert [e.text for e in events(out)] == ["hm", "hm2"]


def test_d5_a_bad_or_foreign_cap_part_is_typed_and_kept() -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, task(), status("TASK_STATE_WORKING",
                                      cap_part("cap.usage", input_tokens="lots"),
                                      cap_part("cap.permission.response", req_id="r",
                                               decision="allow_always")))
    error, raw1, raw2 = events(out)
    assert error.code == "parse_failed" and raw1.reason == "a2a_cap_part_invalid"
    assert raw2.reason == "a2a_cap_part_not_agent_event"  # a peer cannot decide for us


def test_d6_other_data_parts_are_kept_raw() -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, task(), status("TASK_STATE_WORKING", {"data": {"tool": "x"}}))
    (raw,) = events(out)
    assert (raw.reason, json.loads(raw.text)) == ("a2a_data_part", {"tool": "x"})


# ---- D7–D12: states and turn ends --------------------------------------------------------


def test_d7_h3_a_cap_ask_holds_the_turn_and_the_answer_follows_up() -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, task(), status("TASK_STATE_INPUT_REQUIRED",
                                      cap_part("cap.ask_user", ask_id="a1", prompt="colour?")))
    assert [type(e) for e in events(out)] == [AskUser] and not ends(out)
    assert d.receive_frame(Ended(rid)) == []  # the stream closes: the turn waits on
    (post,) = posts(d.send([AskUserAnswer(ask_id="a1", value="blue")]))
    msg = body(post)["params"]["message"]
    assert (msg["taskId"], msg["contextId"]) == ("T", "C")
    assert msg["parts"] == [{"data": {"kind": "cap.ask_user.answer", "ask_id": "a1",
                                      "value": "blue"}, "metadata": {"cap.kind":
                                                                     "cap.ask_user.answer"},
                             "mediaType": "application/json"}]
    out = feed(d, post.request_id, status("TASK_STATE_COMPLETED"))
    assert ends(out) == ["end_turn"]


def test_d7_h3_permission_requests_pass_the_agents_risk_and_take_the_decision() -> None:
    d = driver(f.DRAFT)
    rid = start(d)
    req = {"kind": "data", "data": {"req_id": "p1", "tool": "shell", "scope": "execute",
                                    "risk_level": "low"},
           "metadata": {"cap.kind": "cap.permission.request"}}
    out = feed(d, rid, {"kind": "status-update", "taskId": "T", "contextId": "C",
                        "final": False, "status": {"state": "input-required", "message": {
                            "kind": "message", "messageId": "q", "role": "agent",
                            "parts": [req]}}})
    (perm,) = events(out)
    assert type(perm) is PermissionRequest and perm.meta == {AGENT_RISK: "low"}
    (post,) = posts(d.send([PermissionResponse(req_id="p1", decision="deny",
                                               meta={"cap.message": "no"})]))
    part = body(post)["params"]["message"]["parts"][0]
    assert part["kind"] == "data" and part["data"]["decision"] == "deny"
    assert part["data"]["_meta"] == {"cap.message": "no"}


def test_d8_plain_input_required_ends_the_turn() -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, task(), status("TASK_STATE_INPUT_REQUIRED", text("name?")))
    assert [e.text for e in events(out)] == ["name?"] and ends(out) == ["end_turn"]


@pytest.mark.parametrize(("state", "stop", "codes"), [
    ("TASK_STATE_COMPLETED", "end_turn", []),
    ("TASK_STATE_CANCELED", "cancelled", []),
    ("TASK_STATE_FAILED", "error", ["agent_error"]),
    ("TASK_STATE_REJECTED", "error", ["agent_error"]),
    ("TASK_STATE_AUTH_REQUIRED", "error", ["auth_error"]),
])
def test_d9_d10_d11_terminal_and_interrupted_states(state: str, stop: str,
                                                    codes: list[str]) -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, task(), status(state))
    assert ends(out) == [stop]
    assert [e.code for e in events(out) if type(e) is CapError] == codes


def test_d11_a_cap_error_part_replaces_the_generic_one() -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, task(), status("TASK_STATE_FAILED",
                                      cap_part("cap.error", code="rate_limit", message="slow")))
    assert [e.code for e in events(out) if type(e) is CapError] == ["rate_limit"]


def test_d12_a_direct_message_ends_the_turn_and_sets_the_context() -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, {"message": {"messageId": "m", "contextId": "C9", "role": "ROLE_AGENT",
                                    "parts": [text("hi")]}})
    assert ends(out) == ["end_turn"] and d.context_id == "C9"


def test_the_draft_final_flag_is_not_the_end_of_a_turn() -> None:
    d = driver(f.DRAFT)
    rid = start(d)
    out = feed(d, rid, {"kind": "status-update", "taskId": "T", "contextId": "C",
                        "status": {"state": "working"}, "final": True})
    assert not ends(out)


# ---- D13–D17: snapshots, drops, resubscribe, fallback ---------------------------------------


def test_d13_a_snapshot_gives_only_what_was_not_seen() -> None:
    d = driver()
    rid = start(d)
    feed(d, rid, task(), artifact("A", text("a")), status("TASK_STATE_WORKING", text("s"),
                                                          mid="s1"))
    snap = task("TASK_STATE_COMPLETED",
                artifacts=[{"artifactId": "A", "parts": [text("a"), text("b")]}],
                history=[{"messageId": "s1", "role": "ROLE_AGENT", "parts": [text("s")]},
                         {"messageId": "s2", "role": "ROLE_AGENT", "parts": [text("t")]}])
    out = feed(d, rid, snap)
    assert [e.text for e in events(out) if type(e) is TextChunk] == ["t", "b"]
    assert ends(out) == ["end_turn"]


def test_d15_a_drop_resubscribes_with_a_delay_and_d20_gives_up_after_the_budget() -> None:
    d = driver(max_resubscribes=2)
    rid = start(d)
    feed(d, rid, task())
    out = d.receive_frame(Dropped(rid, "cut", responded=True))
    (post,) = posts(out)
    assert body(post)["method"] == "SubscribeToTask" and body(post)["params"] == {"id": "T"}
    assert post.delay == 0.5 and [e.reason for e in events(out)] == ["a2a_stream_dropped"]
    (post2,) = posts(d.receive_frame(Dropped(post.request_id, "cut again")))
    assert post2.delay == 1.0
    out = d.receive_frame(Dropped(post2.request_id, "cut for good"))
    assert [e.code for e in events(out) if type(e) is CapError] == ["a2a_stream_lost"]
    assert ends(out) == ["error"]


def test_d16_a_refused_resubscribe_reads_the_task() -> None:
    d = driver(f.DRAFT)
    rid = start(d)
    feed(d, rid, {"kind": "task", "id": "T", "contextId": "C", "status": {"state": "working"}})
    (sub,) = posts(d.receive_frame(Dropped(rid, "cut", responded=True)))
    error = json.dumps({"jsonrpc": "2.0", "id": sub.request_id, "error": {
        "code": -32004, "message": "terminal"}}).encode()
    (get,) = posts(d.receive_frame(SseData(sub.request_id, error)))
    assert body(get)["method"] == "tasks/get"
    reply = json.dumps({"jsonrpc": "2.0", "id": get.request_id, "result": {
        "id": "T", "contextId": "C", "status": {"state": "completed"},
        "artifacts": [{"artifactId": "A", "parts": [{"kind": "text", "text": "late"}]}]}})
    out = d.receive_frame(Body(get.request_id, reply.encode()))
    assert [e.text for e in events(out) if type(e) is TextChunk] == ["late"]
    assert ends(out) == ["end_turn"]


def test_d14_a_clean_end_without_a_final_state_ends_the_turn() -> None:
    d = driver()
    rid = start(d)
    feed(d, rid, task())
    assert ends(d.receive_frame(Ended(rid))) == ["end_turn"]


def test_d17_the_other_spelling_after_a_refusal() -> None:
    d = driver(other=True)
    rid = start(d, "hello")
    refusal = json.dumps({"jsonrpc": "2.0", "id": rid, "error": {
        "code": -32009, "message": "version"}}).encode()
    out = d.receive_frame(Body(rid, refusal))
    (post,) = posts(out)
    assert post.spelling == f.DRAFT and body(post)["method"] == "message/stream"
    assert body(post)["params"]["message"]["parts"] == [{"kind": "text", "text": "hello"}]
    assert d.spelling == f.DRAFT


# ---- D18–D22: errors ----------------------------------------------------------------------


def test_d18_json_rpc_error() -> None:
    d = driver()
    rid = start(d)
    err = json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32001,
                                                              "message": "nope"}}).encode()
    out = d.receive_frame(SseData(rid, err))
    (e,) = events(out)
    assert e.code == "a2a_rpc_error" and e.details == {"rpc_code": -32001, "data": None}
    assert ends(out) == ["error"]


@pytest.mark.parametrize(("status_code", "code", "retryable"), [
    (401, "auth_error", False), (403, "auth_error", False), (429, "rate_limit", True),
    (404, "a2a_http_error", False), (502, "a2a_http_error", True)])
def test_d19_d20_http_statuses(status_code: int, code: str, retryable: bool) -> None:
    d = driver()
    rid = start(d)
    out = d.receive_frame(HttpStatus(rid, status_code, b"why"))
    (e,) = events(out)
    assert (e.code, e.retryable) == (code, retryable) and ends(out) == ["error"]


@pytest.mark.parametrize(("timeout", "code"), [(False, "a2a_unreachable"),
                                                (True, "a2a_timeout")])
def test_d20_no_answer(timeout: bool, code: str) -> None:
    d = driver()
    rid = start(d)
    out = d.receive_frame(Dropped(rid, "refused", timeout=timeout))
    assert [e.code for e in events(out)] == [code] and ends(out) == ["error"]


def test_d21_malformed_data_is_typed_and_the_stream_goes_on() -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, task())
    from trio_cap.actors.bindings.a2a.machine import SseBatch

    out = d.receive_frame(SseBatch(rid, [b"{broken", frame(rid, artifact("A", text("ok")))]))
    assert kinds(out) == ["CapError", "AgentRaw", "TextChunk"]


def test_d22_stray_empty_and_unknown() -> None:
    d = driver()
    rid = start(d)
    out = d.receive_frame(SseData(rid, frame(rid + 7, task())))
    out += d.receive_frame(SseData(rid, frame(rid, {})))
    out += feed(d, rid, task("TASK_STATE_SOMETHING_NEW"))
    assert [e.reason for e in events(out) if type(e) is AgentRaw] == [
        "a2a_stray_response", "a2a_empty_result", "a2a_unknown_state"]


# ---- H4, H5 -------------------------------------------------------------------------------


def test_h4_cancel_waits_for_the_task_id_then_cancels() -> None:
    d = driver()
    rid = start(d)
    assert posts(d.send([Cancel()])) == []
    (cancel,) = posts(feed(d, rid, task("TASK_STATE_WORKING")))
    assert body(cancel)["method"] == "CancelTask" and body(cancel)["params"] == {"id": "T"}
    reply = json.dumps({"jsonrpc": "2.0", "id": cancel.request_id, "result": {
        "id": "T", "contextId": "C", "status": {"state": "TASK_STATE_CANCELED"}}}).encode()
    out = d.receive_frame(Body(cancel.request_id, reply))
    assert ends(out) == ["cancelled"]


def test_h4_cancel_while_waiting_on_an_answer_ends_the_turn() -> None:
    d = driver(f.DRAFT)
    rid = start(d)
    feed(d, rid, {"kind": "status-update", "taskId": "T", "contextId": "C", "final": False,
                  "status": {"state": "input-required", "message": {
                      "messageId": "q", "role": "agent", "parts": [
                          {"kind": "data", "data": {"ask_id": "a", "prompt": "?"},
                           "metadata": {"cap.kind": "cap.ask_user"}}]}}})
    d.receive_frame(Ended(rid))
    out = d.send([Cancel()])
    assert body(posts(out)[0])["method"] == "tasks/cancel" and ends(out) == ["cancelled"]


def test_h5_refusals_send_nothing() -> None:
    d = driver()
    start(d)
    out = d.send([inject("again")]) + d.send([AskUserAnswer(ask_id="nope", value=1)])
    assert [e.code for e in events(out)] == ["invalid_state", "unknown_ask"]
    assert not posts(out)


def test_closed_machine_sends_nothing_and_ignores_late_input() -> None:
    d = driver()
    rid = start(d)
    out = d.close()
    assert out == [CloseExchange(rid)]
    assert d.send([inject()]) == [] and feed(d, rid, task()) == []


def test_d2_an_artifact_repeating_the_turns_text_is_not_streamed_twice() -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, task(), status("TASK_STATE_WORKING", text("hello "), mid="a"),
               status("TASK_STATE_WORKING", text("world"), mid="b"),
               artifact("R", text("hello world"), last=True, name="response"),
               status("TASK_STATE_COMPLETED"))
    assert "".join(e.text for e in events(out) if type(e) is TextChunk) == "hello world"
    (art,) = [e for e in events(out) if type(e) is Artifact]
    assert (art.name, art.size) == ("response", 11)


def test_d3_an_artifact_with_a_cap_part_is_that_part() -> None:
    d = driver()
    rid = start(d)
    out = feed(d, rid, task(), artifact("X", text("diff text"), cap_part(
        "cap.artifact", artifact_id="x1", mime_type="text/x-diff", name="patch",
        content="diff text"), last=True))
    (art,) = events(out)
    assert (art.artifact_id, art.mime_type, art.content) == ("x1", "text/x-diff", "diff text")


def test_d15_the_resubscribe_names_the_last_event_taken() -> None:
    from trio_cap.actors.bindings.a2a.machine import SseBatch

    d = driver()
    rid = start(d)
    d.receive_frame(SseBatch(rid, [frame(rid, task())], "4"))
    (post,) = posts(d.receive_frame(Dropped(rid, "cut", responded=True)))
    assert post.last_event_id == "4"
