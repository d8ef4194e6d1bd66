"""The FaceMachine's rules, one at a time, on hand-made envelopes (no Trio, no fleet run):
what the face's client sees of what a run logs."""

from __future__ import annotations

from trio_cap.actors.fleet.face import FaceMachine
from trio_cap.actors.relay import Relay
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    CapError,
    Event,
    FleetCompleted,
    FleetFailed,
    FleetMember,
    FleetMessageConsumed,
    FleetMessageDelivered,
    FleetMessageQueued,
    PermissionDecided,
    PermissionRequest,
    PermissionResponse,
    Plan,
    PlanEntry,
    SessionInputRequired,
    SessionTurnEnded,
    SessionWorking,
    TextChunk,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

FLEET = "fleet:f"


class Feed:
    def __init__(self) -> None:
        self.relay = Relay(absolute=True)
        self.relay.face_cwd = "/repo"
        self.face = FaceMachine(self.relay, "f")
        self.seq = 0
        for member in ("a", "b"):
            self(FLEET, FleetMember(member=member, session_id=f"f.{member}", agent="x",
                                    cwd=f"/repo/.cap-worktrees/{member}"))

    def __call__(self, stream: str, *events: Event) -> list[Event]:
        out: list[Event] = []
        for event in events:
            self.seq += 1
            out += self.face.observe(Envelope(self.seq, 0.0, stream, None, event))
        return out


def test_streams_that_are_not_the_runs_are_ignored():
    feed = Feed()
    assert feed("other", TextChunk(message_id="m", text="hi")) == []
    assert feed("f.c", TextChunk(message_id="m", text="hi")) == []


def test_the_plan_follows_each_message_from_queued_to_consumed():
    feed = Feed()
    (queued,) = feed(FLEET, FleetMessageQueued(message_id="m1", source="fleet", target="a",
                                               text="do it\nin detail", via="task"))
    assert [(e.id, e.content, e.status) for e in queued.entries] == [("m1", "a: do it",
                                                                      "pending")]
    assert queued.entries[0].meta["cap.assigned_to"] == "cap://f.a"
    (delivered,) = feed(FLEET, FleetMessageDelivered(message_id="m1", target="a", input_seq=1))
    assert delivered.entries[0].status == "in_progress"
    (consumed,) = feed(FLEET, FleetMessageConsumed(message_id="m1", target="a",
                                                   stop_reason="cancelled"))
    assert consumed.entries[0].status == "cancelled"
    assert feed(FLEET, FleetMessageQueued(message_id="m2", source="fleet", target="b",
                                          text="x", via="subtask")) == []  # master plan's


def test_the_master_plan_comes_first_and_members_own_plans_last():
    feed = Feed()
    feed(FLEET, FleetMessageQueued(message_id="m1", source="fleet", target="a", text="t",
                                   via="task"))
    feed("f.b", Plan(entries=(PlanEntry(id="1", content="step"),)))
    (plan,) = feed(FLEET, Plan(entries=(PlanEntry(id="draft", content="write"),)))
    assert [e.id for e in plan.entries] == ["draft", "m1", "b.1"]
    assert plan.entries[2].content == "b: step" and plan.entries[2].meta["cap.member"] == "b"


def test_text_names_its_speaker_when_the_speaker_changes():
    feed = Feed()
    out = feed("f.a", TextChunk(message_id="m", text="one "), TextChunk(message_id="m",
                                                                          text="two"))
    out += feed("f.b", TextChunk(message_id="m", text="three"))
    out += feed("f.b", TextChunk(message_id="s", text="notice", channel="system"))
    assert [(e.message_id, e.text, e.meta["cap.member"]) for e in out] == [
        ("a.m", "[a] one ", "a"), ("a.m", "two", "a"), ("b.m", "\n\n[b] three", "b")]


def test_tool_calls_are_renamed_and_their_paths_made_absolute():
    feed = Feed()
    start, end = feed("f.a", ToolCallStart(call_id="call_1", name="Write",
                                           input={"path": "x.txt", "content": "c"}),
                      ToolCallEnd(call_id="call_1", output="ok"))
    assert (start.call_id, start.input["path"]) == ("a.call_1", "/repo/.cap-worktrees/a/x.txt")
    assert end.call_id == "a.call_1" and end.meta["cap.member"] == "a"


def test_a_request_reaches_the_client_only_when_a_person_must_answer_it():
    feed = Feed()
    request = PermissionRequest(req_id="perm_1", tool="Write",
                                intent={"path": "x.txt", "content": "c"})
    assert feed("f.b", request, PermissionDecided(req_id="perm_1", decision="allow_once",
                                                  by="policy:allow")) == []
    feed("f.a", ToolCallStart(call_id="call_1", name="Write", input={"path": "x.txt"}))
    assert feed("f.a", request) == []
    (asked,) = feed("f.a", SessionInputRequired(turn=1, reason="permission", ref="perm_1"))
    assert asked.req_id == "perm_1" and asked.meta["cap.member"] == "a"
    assert asked.meta["cap.call_id"] == "a.call_1"
    assert asked.meta["acp"]["title"] == "a: Write x.txt"
    assert asked.intent["path"] == "/repo/.cap-worktrees/a/x.txt"
    # the answer goes to a's session, its path made a's own again
    verdict = feed.relay.decision(PermissionResponse(
        req_id="perm_1", decision="allow_once",
        meta={"cap.updated_input": {"path": ".cap-worktrees/a/y.txt", "content": "c"}}))
    assert verdict is not None and verdict.to.source == "f.a" and verdict.to.remote == "perm_1"
    assert verdict.updated_input == {"path": "y.txt", "content": "c"}


def test_the_answer_is_the_last_turns_text_and_usage_is_summed():
    feed = Feed()
    feed("f.a", SessionWorking(turn=1), TextChunk(message_id="m", text="first"),
         Usage(input_tokens=1, cost_usd_estimate=0.25), SessionTurnEnded(turn=1))
    feed("f.b", SessionWorking(turn=1), TextChunk(message_id="m", text="the "),
         TextChunk(message_id="m", text="answer"), Usage(input_tokens=2,
                                                         cost_usd_estimate=0.5),
         SessionTurnEnded(turn=1))
    feed(FLEET, FleetCompleted(fleet="f"))
    assert feed.face.ended
    text, usage = feed.face.closing("end")
    assert text.text == "\n\nthe answer" and text.meta is None
    assert (usage.input_tokens, usage.cost_usd_estimate) == (3, 0.75)


def test_a_failed_fleet_closes_with_why_and_members_errors_are_named():
    feed = Feed()
    (error,) = feed("f.b", CapError(code="model_unavailable", message="down"))
    assert (error.code, error.message) == ("model_unavailable", "b: down")
    feed(FLEET, FleetFailed(fleet="f", reason="b: turn ended with error"))
    text, failed, _usage = feed.face.closing("end")
    assert text.text == "The fleet f failed: b: turn ended with error"
    assert (failed.code, failed.message) == ("fleet_failed", "b: turn ended with error")
