"""``_meta`` ``cap.message_to``: the structured twin of an ``@cap://`` directive, delivered,
audited and refused by the same rules."""

from __future__ import annotations

import msgspec

from tests.fleet.helpers import events, run_file
from trio_cap.actors.fleet.machine import Deliver, Emit, FleetMachine
from trio_cap.actors.fleet.model import Fleet, Member
from trio_cap.events.kinds import (
    FleetMessageQueued,
    FleetMessageRefused,
    SessionTurnEnded,
    TextChunk,
)
from trio_cap.events.replay import replay


def _emitted(out, kind):
    return [o.event for o in out if isinstance(o, Emit) and isinstance(o.event, kind)]


def test_a_message_streamed_in_chunks_is_queued_once_and_strangers_are_refused():
    fleet = Fleet(name="f", task="go", sessions=(Member("a", start=True), Member("b", start=False)),
                  hop_limit=1)
    m = FleetMachine(fleet, {"a": "f.a", "b": "f.b"})
    m.start()
    to_b = {"cap.message_to": "cap://f.b"}
    m.observe("f.a", 10, TextChunk(message_id="m1", text="Working. "))
    m.observe("f.a", 11, TextChunk(message_id="m2", text="please ", meta=to_b))
    m.observe("f.a", 12, TextChunk(message_id="m2", text="review", meta=to_b))
    m.observe("f.a", 13, TextChunk(message_id="m3", text="hello",
                                   meta={"cap.message_to": ["zed", "a"]}))
    out = m.observe("f.a", 14, SessionTurnEnded(turn=1, stop_reason="end_turn"))
    (queued,) = _emitted(out, FleetMessageQueued)
    assert (queued.source, queued.target, queued.via, queued.hops, queued.text) == (
        "a", "b", "message", 1, "Message from a: please review")
    assert [(r.target, r.reason) for r in _emitted(out, FleetMessageRefused)] == [
        ("zed", "unknown_target"), ("a", "self")]
    assert Deliver(queued.message_id, "b", queued.text) in out
    # the reply, a message's turn, is one hop more: past the limit of 1
    m.observe("f.b", 20, TextChunk(message_id="r", text="thanks", meta={"cap.message_to": "a"}))
    out = m.observe("f.b", 21, SessionTurnEnded(turn=1, stop_reason="end_turn"))
    assert [(r.target, r.reason, r.hops) for r in _emitted(out, FleetMessageRefused)] == [
        ("a", "hop_limit", 2)]
    assert not _emitted(out, FleetMessageQueued)


def test_a_turn_that_does_not_end_well_sends_nothing():
    fleet = Fleet(name="f", task="go", sessions=(Member("a", start=True), Member("b", start=False)))
    m = FleetMachine(fleet, {"a": "f.a", "b": "f.b"})
    m.start()
    m.observe("f.a", 10, TextChunk(message_id="m", text="hi", meta={"cap.message_to": "b"}))
    out = m.observe("f.a", 11, SessionTurnEnded(turn=1, stop_reason="error"))
    assert not _emitted(out, FleetMessageQueued)


async def test_a_scripted_members_message_to_is_delivered_consumed_and_replays(tmp_path):
    (tmp_path / "alice.toml").write_text(
        '[[turn]]\nsteps = [ { say = "Starting." },\n'
        '  { say = "please review the plan", meta = { "cap.message_to" = "cap://mt.bob" } },\n'
        '  { say = "anyone?", meta = { "cap.message_to" = ["carol"] } } ]\n'
        '[[turn]]\nsteps = [ { say = "Thanks." } ]\n')
    (tmp_path / "bob.toml").write_text(
        '[[turn]]\n[[turn.steps]]\nsay = "the plan is fine"\n'
        'meta = { "cap.message_to" = "alice" }\n')
    (tmp_path / "fleet.toml").write_text(
        'name = "mt"\ntask = "Coordinate."\nworktrees = "dirs"\n'
        '[[session]]\nid = "alice"\nbinding = "inproc"\nscript = "alice.toml"\n'
        '[[session]]\nid = "bob"\nbinding = "inproc"\nscript = "bob.toml"\nstart = false\n')
    outcome, log, live = await run_file(tmp_path / "fleet.toml")
    assert outcome.completed, outcome.reason
    queued = [e for e in events(log, "fleet.message.queued") if e.event.via == "message"]
    assert [(e.event.source, e.event.target, e.event.text, e.event.hops) for e in queued] == [
        ("alice", "bob", "Message from alice: please review the plan", 1),
        ("bob", "alice", "Message from bob: the plan is fine", 2)]
    first = queued[0]
    assert log.read(first.cause, until=first.cause)[0].kind == "session.turn_ended"
    (delivered,) = [e for e in events(log, "fleet.message.delivered")
                    if e.event.message_id == first.event.message_id]
    injected = log.read(delivered.event.input_seq, until=delivered.event.input_seq)[0]
    assert (injected.kind, injected.stream) == ("input.injected", "mt.bob")
    assert injected.event.text == first.event.text
    assert [(e.event.target, e.event.reason) for e in events(log, "fleet.message.refused")] == [
        ("carol", "unknown_target")]
    states = {m.target: m.state for m in live.fleets["mt"].messages.values()
              if m.via == "message"}
    assert states == {"bob": "consumed", "alice": "consumed"}
    assert msgspec.to_builtins(replay(log).fleets) == msgspec.to_builtins(live)
    log.close()


def test_an_a2a_agents_cap_text_chunk_part_brings_its_message_to_along():
    """A real agent's way to say it: A2A's CAP data part keeps ``_meta`` on the chunk."""
    from trio_cap.actors.bindings.a2a.machine_parts import cap_event

    (chunk,) = cap_event("cap.text_chunk", {"message_id": "m", "text": "hi",
                                            "_meta": {"cap.message_to": ["cap://f.b"]}})
    assert isinstance(chunk, TextChunk) and chunk.meta == {"cap.message_to": ["cap://f.b"]}


def _acp_lines(*updates: dict) -> bytes:
    return b"".join(msgspec.json.encode({
        "jsonrpc": "2.0", "method": "session/update",
        "params": {"sessionId": "sess_bench", "update": u}}) + b"\n" for u in updates)


def test_an_acp_chunks_cap_meta_reaches_its_event_on_the_block_and_line_paths():
    """The ACP client's hot path joins a message's chunks inline; a chunk with ``_meta``
    leaves it, so the update's and the block's CAP keys reach its event (and only those:
    the rest of ``_meta`` is the agent's), and the plain chunks after it join again."""
    from bench.acp_bench import new_client
    from trio_cap.actors.bindings.acp.machine import events_of

    to = {"cap.message_to": "cap://f.b", "vendor.x": 1}
    data = _acp_lines(
        {"sessionUpdate": "agent_message_chunk", "messageId": "m1",
         "content": {"type": "text", "text": "plain "}},
        {"sessionUpdate": "agent_message_chunk", "messageId": "m2", "_meta": to,
         "content": {"type": "text", "text": "please "}},
        {"sessionUpdate": "agent_message_chunk", "messageId": "m2",
         "content": {"type": "text", "text": "review", "_meta": to}},
        {"sessionUpdate": "agent_message_chunk", "messageId": "m2",
         "content": {"type": "text", "text": " it"}},
        {"sessionUpdate": "agent_message_chunk", "messageId": "m2",
         "content": {"type": "text", "text": " now"}})
    for read in (len(data), 7):
        client = new_client()
        out = []
        for i in range(0, len(data), read):
            out += events_of(client.receive_data(data[i:i + read]))
        chunks = [(e.message_id, e.text, e.meta) for e in out if isinstance(e, TextChunk)]
        assert chunks == [("m1", "plain ", None),
                          ("m2", "please ", {"cap.message_to": "cap://f.b"}),
                          ("m2", "review", {"cap.message_to": "cap://f.b"}),
                          *([("m2", " it now", None)] if read == len(data) else
                            [("m2", " it", None), ("m2", " now", None)])]


async def test_an_acp_agent_on_the_official_sdk_messages_a_member_through_meta(tmp_path):
    """A real ACP agent (the official Python SDK) puts ``cap.message_to`` in ``_meta``:
    the fleet delivers the message, once, and the member's reply turn consumes it."""
    import shlex
    from pathlib import Path

    from tests.driver_acp.conftest import sdk_python

    agent = Path(__file__).with_name("messenger_agent.py")
    command = shlex.join([str(sdk_python()), str(agent), "cap://am.bob"])
    (tmp_path / "fleet.toml").write_text(
        f'name = "am"\ntask = "Coordinate."\nworktrees = "dirs"\n'
        f'[[session]]\nid = "alice"\nagent = "acp:{command}"\n'
        '[[session]]\nid = "bob"\nagent = "acp:' + command.replace("cap://am.bob", "nobody")
        + '"\nstart = false\n')
    outcome, log, live = await run_file(tmp_path / "fleet.toml")
    assert outcome.completed, outcome.reason
    queued = [e.event for e in events(log, "fleet.message.queued") if e.event.via == "message"]
    assert [(q.source, q.target, q.text) for q in queued] == [
        ("alice", "bob", "Message from alice: please review the plan")]
    delivered = [d.event for d in events(log, "fleet.message.delivered")
                 if d.event.message_id == queued[0].message_id]
    assert len(delivered) == 1
    inputs = [e.event.text for e in events(log, "input.injected", "am.bob")]
    assert inputs == [queued[0].text]
    states = {m.target: m.state for m in live.fleets["am"].messages.values()
              if m.via == "message"}
    assert states == {"bob": "consumed"}
    assert msgspec.to_builtins(replay(log).fleets) == msgspec.to_builtins(live)
    log.close()
