"""The publisher machine's rules (P1–P10 in ``publisher.py``, W1–W4 in ``publisher_wire.py``),
one table row at a time, with no server: envelopes in, updates and actions out.

Plus hypothesis: any request body in either spelling is a typed fault or a value, never an
exception; any sequence of session events leaves the machine consistent.
"""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_cap.actors.bindings import jsonrpc
from trio_cap.actors.bindings.a2a import publisher_wire as wire
from trio_cap.actors.bindings.a2a.publisher import (
    Answer,
    Decide,
    Inbound,
    Inject,
    Plan,
    PublisherMachine,
    RpcFault,
    StartSession,
)
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    AskUser,
    CapError,
    InputInjected,
    PermissionDecided,
    PermissionRequest,
    PlanEntry,
    PtyRawBytes,
    SessionFailed,
    SessionInputRequired,
    SessionTurnEnded,
    SessionWorking,
    TextChunk,
    ToolCallStart,
    Usage,
)
from trio_cap.events.kinds import (
    Plan as CapPlan,
)


def machine() -> PublisherMachine:
    counter = itertools.count(1)
    return PublisherMachine(lambda prefix: f"{prefix}{next(counter)}")


class Feed:
    """A session's stream for one context: numbered envelopes, the turn's cause set."""

    def __init__(self, m: PublisherMachine, context: str) -> None:
        self.m, self.context, self.seq, self.cause = m, context, 0, None

    def __call__(self, *events: Any) -> list:
        envs = []
        for event in events:
            self.seq += 1
            if isinstance(event, InputInjected):
                self.cause = self.seq
                envs.append(Envelope(self.seq, 1.0, self.context, None, event))
            else:
                envs.append(Envelope(self.seq, 1.0, self.context, self.cause, event))
        return self.m.on_envelopes(self.context, envs)


def start(m: PublisherMachine, text: str = "hi", owner: str = "alice") -> tuple[Plan, Feed]:
    plan = m.send(owner, Inbound("m1", text))
    assert isinstance(plan, Plan)
    feed = Feed(m, plan.context_id)
    feed(InputInjected(text=text, source=f"a2a:{plan.task_id}"))
    return plan, feed


def test_p1_a_new_message_opens_a_context_and_a_task() -> None:
    m = machine()
    plan = m.send("alice", Inbound("m1", "hello"))
    assert isinstance(plan, Plan)
    assert plan.actions == (StartSession(plan.context_id),
                            Inject(plan.context_id, plan.task_id, "hello"))
    assert plan.actions[1].source == f"a2a:{plan.task_id}"
    assert m.tasks[plan.task_id].state == "submitted" and plan.start == 0


def test_p1_unknown_context_and_p3_one_task_at_a_time() -> None:
    m = machine()
    unknown = m.send("alice", Inbound("m1", "hi", context_id="ctx-made-up"))
    assert isinstance(unknown, RpcFault) and unknown.code == -32602
    plan, feed = start(m)
    busy = m.send("alice", Inbound("m2", "more", context_id=plan.context_id))
    assert isinstance(busy, RpcFault) and busy.code == -32004 and plan.task_id in busy.message
    feed(SessionTurnEnded(turn=1))
    nxt = m.send("alice", Inbound("m3", "more", context_id=plan.context_id))
    assert isinstance(nxt, Plan) and nxt.actions == (Inject(plan.context_id, nxt.task_id,
                                                            "more"),)


def test_p2_another_callers_ids_do_not_exist() -> None:
    m = machine()
    plan, _ = start(m)
    for fault in (m.task_for("bob", plan.task_id), m.cancel("bob", plan.task_id),
                  m.subscribe("bob", plan.task_id),
                  m.send("bob", Inbound("m", "x", task_id=plan.task_id))):
        assert isinstance(fault, RpcFault) and fault.code == -32001
    mine, never = m.task_for("bob", plan.task_id), m.task_for("bob", "never-issued")
    assert mine.message.replace(plan.task_id, "X") == never.message.replace("never-issued", "X")
    other = m.send("bob", Inbound("m", "x", context_id=plan.context_id))
    assert isinstance(other, RpcFault) and other.code == -32602


@pytest.mark.parametrize(("reply", "expected"), [
    (Inbound("m", "blue"), Answer("C", "ask_1", "blue")),
    (Inbound("m", "", data=(({"kind": "cap.ask_user.answer", "value": 3},
                             "cap.ask_user.answer"),)), Answer("C", "ask_1", 3)),
])
def test_p4_answers_to_an_ask(reply: Inbound, expected: Answer) -> None:
    m = machine()
    plan, feed = start(m)
    feed(AskUser(ask_id="ask_1", prompt="colour?"),
         SessionInputRequired(turn=1, reason="ask", ref="ask_1"))
    follow = m.send("alice", msgspec.structs.replace(reply, task_id=plan.task_id))
    assert isinstance(follow, Plan)
    assert follow.actions == (msgspec.structs.replace(expected, context_id=plan.context_id),)


@pytest.mark.parametrize(("text", "decision"), [
    ("allow", "allow_once"), ("Yes.", "allow_once"), ("always", "allow_always"),
    ("deny", "deny"), ("No!", "deny"), ("maybe", None), ("allow it all", None)])
def test_p4_text_answers_to_a_permission(text: str, decision: str | None) -> None:
    m = machine()
    plan, feed = start(m)
    feed(PermissionRequest(req_id="p1", tool="Write", intent={"path": "a"}),
         SessionInputRequired(turn=1, reason="permission", ref="p1"))
    follow = m.send("alice", Inbound("m", text, task_id=plan.task_id))
    if decision is None:  # never guessed: refused, and the task still waits
        assert isinstance(follow, RpcFault) and follow.code == -32602
        assert m.tasks[plan.task_id].state == "input-required"
    else:
        assert isinstance(follow, Plan)
        (action,) = follow.actions
        assert isinstance(action, Decide) and action.decision == decision


def test_p4_a_working_or_finished_task_takes_no_message() -> None:
    m = machine()
    plan, feed = start(m)
    feed(SessionWorking(turn=1))
    working = m.send("alice", Inbound("m", "x", task_id=plan.task_id))
    assert isinstance(working, RpcFault) and working.code == -32004
    feed(SessionTurnEnded(turn=1))
    done = m.send("alice", Inbound("m", "x", task_id=plan.task_id))
    assert isinstance(done, RpcFault) and done.code == -32004


def test_p5_nothing_counts_before_the_task_is_armed_and_stale_events_drop() -> None:
    m = machine()
    plan = m.send("alice", Inbound("m1", "hi"))
    feed = Feed(m, plan.context_id)
    assert feed(SessionWorking(turn=1), TextChunk(message_id="x", text="early")) == []
    feed(InputInjected(text="hi", source="a2a:someone-else"))
    assert feed(SessionWorking(turn=1)) == []
    feed(InputInjected(text="hi", source=f"a2a:{plan.task_id}"))
    stale = m.on_envelopes(plan.context_id, [Envelope(99, 1.0, plan.context_id, 1,
                                                      TextChunk(message_id="x", text="old"))])
    assert stale == []


def test_p6_the_mapping() -> None:
    m = machine()
    plan, feed = start(m)
    working, t1, t2, tool, plan_ev = feed(
        SessionWorking(turn=1), TextChunk(message_id="msg_1", text="Hel"),
        TextChunk(message_id="msg_1", text="lo"), ToolCallStart(call_id="c", name="Bash"),
        CapPlan(entries=(PlanEntry(id="1", content="a"),)))
    assert working.status.state == "working"
    assert (t1.artifact.artifact_id, t1.append, t2.append) == ("msg_1", False, True)
    assert [p.text for p in t1.artifact.parts + t2.artifact.parts] == ["Hel", "lo"]
    for update, kind in ((tool, "cap.tool_call.start"), (plan_ev, "cap.plan")):
        (part,) = update.status.message.parts
        assert part.data["kind"] == kind and part.metadata == {"cap.kind": kind}
    usage_update = feed(Usage(output_tokens=2))
    assert usage_update == []  # kept for the end
    (end,) = feed(SessionTurnEnded(turn=1))
    assert end.final and end.status.state == "completed"
    assert end.status.message.parts[0].data["kind"] == "cap.usage"
    task = m.tasks[plan.task_id]
    assert [a.artifact_id for a in task.all_artifacts()] == ["msg_1"]
    assert [p.text for p in task.all_artifacts()[0].parts] == ["Hel", "lo"]
    assert [msg.role for msg in task.history] == ["user"]  # streamed text is not history


@pytest.mark.parametrize(("stop", "state"), [("end_turn", "completed"),
                                             ("cancelled", "canceled"), ("error", "failed")])
def test_p6_stop_reasons(stop: str, state: str) -> None:
    m = machine()
    _, feed = start(m)
    feed(CapError(code="agent_error", message="boom"))
    (end,) = feed(SessionTurnEnded(turn=1, stop_reason=stop))
    assert end.status.state == state and end.final
    if state == "failed":
        assert end.status.message.parts[0].text == "agent_error: boom"


def test_p6_policy_decisions_are_told_not_asked() -> None:
    m = machine()
    _, feed = start(m)
    request = PermissionRequest(req_id="p1", tool="Read")
    assert feed(request) == []
    (told,) = feed(PermissionDecided(req_id="p1", decision="allow_once", by="policy:allow"))
    assert told.status.state == "working"
    assert told.status.message.parts[0].data["kind"] == "permission.decided"


def test_p7_raw_bytes_are_marked_and_p8_input_required_is_final() -> None:
    m = machine()
    plan, feed = start(m)
    (raw,) = feed(PtyRawBytes(bytes_b64="aGk="))
    assert raw.raw and not raw.final
    (waiting,) = feed(AskUser(ask_id="a", prompt="go?"),
                      SessionInputRequired(turn=1, reason="ask", ref="a"))
    assert waiting.final and waiting.status.state == "input-required"
    assert waiting.status.message.parts[0].text == "go?"
    assert m.tasks[plan.task_id].interrupted


def test_p9_updates_are_numbered_and_a_terminal_task_is_not_streamed() -> None:
    m = machine()
    plan, feed = start(m)
    feed(SessionWorking(turn=1), TextChunk(message_id="x", text="a"), SessionTurnEnded(turn=1))
    assert [u.index for u in m.tasks[plan.task_id].updates] == [0, 1, 2]
    refused = m.subscribe("alice", plan.task_id)
    assert isinstance(refused, RpcFault) and refused.code == -32004


def test_p10_a_session_that_dies_fails_its_task_and_ends_the_context() -> None:
    m = machine()
    plan, feed = start(m)
    (end,) = feed(SessionFailed(code="agent_died", message="exit 1"))
    assert end.final and end.status.state == "failed"
    assert "agent_died" in end.status.message.parts[0].text
    again = m.send("alice", Inbound("m", "x", context_id=plan.context_id))
    assert isinstance(again, RpcFault) and again.code == -32004


@pytest.mark.parametrize(("method", "version", "expected"), [
    ("message/stream", None, ("stream", "0.3")), ("message/stream", "0.3", ("stream", "0.3")),
    ("SendStreamingMessage", "1.0", ("stream", "1.0")),
    ("SendStreamingMessage", None, ("stream", "1.0")),  # lenient: no header is not a v1 lie
    ("SendStreamingMessage", "0.3", -32009), ("message/send", "1.0", -32009),
    ("tasks/get", "2.0", -32009), ("tasks/list", None, -32601), ("", None, -32601),
])
def test_w1_spelling_by_method_and_header(method: str, version: str | None,
                                          expected: Any) -> None:
    found = wire.classify(method, version, ("1.0", "0.3"))
    if isinstance(expected, int):
        assert isinstance(found, RpcFault) and found.code == expected
    else:
        assert found == expected


def test_w1_a_spelling_not_offered_is_not_served() -> None:
    found = wire.classify("SendMessage", "1.0", ("0.3",))
    assert isinstance(found, RpcFault) and found.code == -32601


def test_w2_errors_in_each_spelling() -> None:
    fault = RpcFault(-32001, "task 'x' not found", "TASK_NOT_FOUND")
    v1 = msgspec.json.decode(wire.error_body("1.0", 7, fault))
    assert v1["error"]["data"] == [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                    "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org",
                                    "metadata": {}}]
    draft = msgspec.json.decode(wire.error_body("0.3", "7", fault))
    assert draft["id"] == "7" and draft["error"]["data"] == "task 'x' not found"


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda kids: st.lists(kids, max_size=3)
                     | st.dictionaries(st.text(max_size=6), kids, max_size=4), max_leaves=12)
_methods = st.sampled_from(["message/send", "message/stream", "tasks/get", "tasks/cancel",
                            "tasks/resubscribe", "SendMessage", "SendStreamingMessage",
                            "GetTask", "CancelTask", "SubscribeToTask"])


@settings(max_examples=300, deadline=None)
@given(_methods, _json, st.sampled_from(["parts", "message", "id", "role"]))
def test_any_params_decode_to_a_value_or_a_fault(method: str, params: Any, key: str) -> None:
    body = {"message": {"messageId": "m", "role": "user", key: params}} if key != "id" \
        else {"id": params}
    request = jsonrpc.Request(1, method, msgspec.Raw(msgspec.json.encode(body)))
    spelling = "1.0" if method[0].isupper() else "0.3"
    if method in ("message/send", "message/stream", "SendMessage", "SendStreamingMessage"):
        out = wire.send_options(spelling, request)
        assert isinstance(out, wire.SendOptions | RpcFault)
    else:
        out = wire.task_query(spelling, request)
        assert isinstance(out, wire.TaskQuery | RpcFault)


_events = st.sampled_from([
    SessionWorking(turn=1), SessionWorking(turn=1, resumed=True),
    TextChunk(message_id="m", text="t"), TextChunk(message_id="n", text="u"),
    AskUser(ask_id="a", prompt="?"), SessionInputRequired(turn=1, reason="ask", ref="a"),
    SessionInputRequired(turn=1, reason="permission", ref="nope"),
    PermissionRequest(req_id="p", tool="Write"), Usage(), CapError(code="c", message="m"),
    SessionTurnEnded(turn=1), SessionFailed(code="x", message="y"), PtyRawBytes(bytes_b64=""),
])


@settings(max_examples=300, deadline=None)
@given(st.lists(_events, max_size=25), st.lists(st.sampled_from(["hi", "allow", "a"]),
                                                max_size=4))
def test_any_session_stream_keeps_the_machine_consistent(events: list, replies: list) -> None:
    m = machine()
    plan, feed = start(m)
    for event in events:
        feed(event)
        for text in replies:
            m.send("alice", Inbound("m", text, task_id=plan.task_id))
    task = m.tasks[plan.task_id]
    assert [u.index for u in task.updates] == list(range(len(task.updates)))
    finals = [u for u in task.updates if u.final]
    if task.terminal:
        assert finals and task.updates[-1].final
        assert m.contexts[plan.context_id].active is None
    for update in task.updates:  # every update renders in both spellings
        for spelling in ("0.3", "1.0"):
            assert msgspec.json.decode(wire.update_result(update, spelling))
