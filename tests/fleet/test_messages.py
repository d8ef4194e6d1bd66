"""Mediated routing: ``@cap://<id> text`` lines become injects, each one audited."""

from __future__ import annotations

from tests.fleet.helpers import copy_examples, events, run_file


async def test_a_directive_is_queued_delivered_consumed_and_refusals_are_audited(tmp_path):
    where = copy_examples(tmp_path)
    outcome, log, live = await run_file(where / "messages.toml")
    assert outcome.completed, outcome.reason
    fleet_events = log.read(1, "fleet:messages")
    queued = {e.event.message_id: e for e in fleet_events if e.kind == "fleet.message.queued"
              and e.event.via == "message"}
    first = next(e for e in queued.values() if e.event.target == "bob")
    assert first.event.source == "alice" and first.event.hops == 1
    assert first.event.text == "Message from alice: please review the plan"
    # the cause is the turn end of alice's turn that said it
    cause = log.read(first.cause, until=first.cause)[0]
    assert cause.kind == "session.turn_ended" and cause.stream == "messages.alice"
    (delivered,) = [e for e in fleet_events if e.kind == "fleet.message.delivered"
                    and e.event.message_id == first.event.message_id]
    injected = log.read(delivered.event.input_seq, until=delivered.event.input_seq)[0]
    assert injected.kind == "input.injected" and injected.stream == "messages.bob"
    assert injected.event.text == first.event.text
    (consumed,) = [e for e in fleet_events if e.kind == "fleet.message.consumed"
                   and e.event.message_id == first.event.message_id]
    assert consumed.seq > delivered.seq
    # bob's answer came back to alice as a message of hop 2 ...
    back = next(e for e in queued.values() if e.event.target == "alice")
    assert back.event.hops == 2 and back.event.text == "Message from bob: the plan is fine"
    # ... and alice's reply to that (hop 3) is past the limit of 2; carol does not exist
    refused = {(e.event.target, e.event.reason, e.event.hops)
               for e in events(log, "fleet.message.refused")}
    assert refused == {("carol", "unknown_target", 1), ("bob", "hop_limit", 3)}
    audit = live.fleets["messages"].audit
    assert [(r.kind, r.target, r.detail) for r in audit if r.kind.endswith("refused")] == [
        ("fleet.message.refused", "carol", "unknown_target"),
        ("fleet.message.refused", "bob", "hop_limit")]
    states = {m.target: m.state for m in live.fleets["messages"].messages.values()
              if m.via == "message"}
    assert states == {"bob": "consumed", "alice": "consumed"}


async def test_a_message_answered_through_a_route_still_counts_toward_the_hop_limit(tmp_path):
    """oc messages the lead; the lead's reply turn hands on to oc by the pipeline; oc
    messages again … The hand-off carries the hops of the message that started the turn,
    so the ping-pong is refused at the hop limit instead of running until the budget
    (found with real agents: it ran 50 turns)."""
    ping = '[[turn]]\nsteps = [ { say = "@cap://lead ping" } ]\n' * 12
    ok = '[[turn]]\nsteps = [ { say = "ok" } ]\n' * 12
    (tmp_path / "oc.toml").write_text(ping)
    (tmp_path / "lead.toml").write_text(ok)
    fleet = tmp_path / "loop.toml"
    fleet.write_text('name = "loop"\ntask = "Start."\nworktrees = "dirs"\n'
                     'permissions = "allow"\nhop_limit = 3\n'
                     '[[session]]\nid = "lead"\nbinding = "inproc"\nscript = "lead.toml"\n'
                     '[[session]]\nid = "oc"\nbinding = "inproc"\nscript = "oc.toml"\n'
                     '[[route]]\npipeline = ["lead", "oc"]\n')
    outcome, log, _ = await run_file(fleet)
    assert outcome.completed, outcome.reason
    queued = [(e.event.via, e.event.target, e.event.hops)
              for e in events(log, "fleet.message.queued")]
    assert queued == [("task", "lead", 0), ("pipeline", "oc", 0), ("message", "lead", 1),
                      ("pipeline", "oc", 1), ("message", "lead", 2),
                      ("pipeline", "oc", 2), ("message", "lead", 3),
                      ("pipeline", "oc", 3)]
    refused = [(e.event.target, e.event.reason, e.event.hops)
               for e in events(log, "fleet.message.refused")]
    assert refused == [("lead", "hop_limit", 4)]
    turns = [e for e in events(log, "session.turn_ended")]
    assert len(turns) == 8  # four each, then the loop is cut
