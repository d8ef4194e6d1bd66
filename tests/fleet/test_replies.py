"""A mediated message is answered: the final text of the turn that took it goes back to its
sender as a reply, audited like any message, never itself answered, rebuilt once on resume."""

from __future__ import annotations

import msgspec

from tests.fleet.helpers import events, run_file
from trio_cap.actors.fleet import load_fleet
from trio_cap.actors.fleet.machine import Deliver, Emit, FleetMachine
from trio_cap.actors.fleet.model import Fleet, Member
from trio_cap.actors.fleet.resume import rebuild_fleet
from trio_cap.events.kinds import (
    FleetMessageQueued,
    FleetMessageRefused,
    SessionCompleted,
    SessionTurnEnded,
    TextChunk,
)
from trio_cap.events.replay import replay


def _emitted(out, kind):
    return [o.event for o in out if isinstance(o, Emit) and isinstance(o.event, kind)]


def _two(hop_limit: int = 4) -> FleetMachine:
    fleet = Fleet(name="f", task="go", sessions=(Member("a", start=True),
                                                 Member("b", start=False)),
                  hop_limit=hop_limit)
    m = FleetMachine(fleet, {"a": "f.a", "b": "f.b"})
    m.start()
    return m


def _turn(m: FleetMachine, stream: str, seq: int, text: str, stop="end_turn"):
    m.observe(stream, seq, TextChunk(message_id=f"t{seq}", text=text))
    return m.observe(stream, seq + 1, SessionTurnEnded(turn=1, stop_reason=stop))


def test_the_turn_that_took_a_message_replies_once_and_the_reply_is_not_answered():
    m = _two()
    (asked,) = _emitted(_turn(m, "f.a", 10, "@cap://b check it"), FleetMessageQueued)
    out = _turn(m, "f.b", 20, "Checked.\nAll fine.")
    (reply,) = _emitted(out, FleetMessageQueued)
    assert (reply.source, reply.target, reply.via, reply.reply_to, reply.hops, reply.text) == (
        "b", "a", "reply", asked.message_id, 2, "Message from b (reply): Checked.\nAll fine.")
    assert next(o for o in out if isinstance(o, Emit) and o.event == reply).cause == 21
    assert Deliver(reply.message_id, "a", reply.text) in out
    out = _turn(m, "f.a", 30, "Thanks.")  # a's turn on the reply: nothing goes back
    assert not _emitted(out, FleetMessageQueued) and not _emitted(out, FleetMessageRefused)


def test_a_line_back_to_the_sender_is_the_reply_and_no_second_copy_is_sent():
    m = _two()
    (asked,) = _emitted(_turn(m, "f.a", 10, "@cap://b check it"), FleetMessageQueued)
    (back,) = _emitted(_turn(m, "f.b", 20, "@cap://a it is fine"), FleetMessageQueued)
    assert (back.via, back.reply_to, back.text) == ("message", asked.message_id,
                                                   "Message from b: it is fine")
    out = _turn(m, "f.a", 30, "ok")
    assert not _emitted(out, FleetMessageQueued)


def test_a_reply_counts_toward_the_hop_limit():
    m = _two(hop_limit=1)
    (asked,) = _emitted(_turn(m, "f.a", 10, "@cap://b check it"), FleetMessageQueued)
    out = _turn(m, "f.b", 20, "fine")
    assert not _emitted(out, FleetMessageQueued)
    (refused,) = _emitted(out, FleetMessageRefused)
    assert (refused.target, refused.reason, refused.hops, refused.reply_to) == (
        "a", "hop_limit", 2, asked.message_id)


def test_a_reply_to_a_sender_that_ended_is_audited_undeliverable():
    m = _two()
    (asked,) = _emitted(_turn(m, "f.a", 10, "@cap://b check it"), FleetMessageQueued)
    m.observe("f.b", 15, TextChunk(message_id="x", text="looking"))
    m.observe("f.a", 16, SessionCompleted())
    out = m.observe("f.b", 17, SessionTurnEnded(turn=1, stop_reason="end_turn"))
    (refused,) = _emitted(out, FleetMessageRefused)
    assert (refused.source, refused.target, refused.reason, refused.reply_to,
            refused.text) == ("b", "a", "target_ended", asked.message_id, "looking")


def test_a_turn_that_fails_sends_no_reply():
    m = _two()
    _turn(m, "f.a", 10, "@cap://b check it")
    out = _turn(m, "f.b", 20, "half", stop="error")
    assert not _emitted(out, FleetMessageQueued) and not _emitted(out, FleetMessageRefused)


def _files(tmp_path):
    (tmp_path / "alice.toml").write_text(
        '[[turn]]\nsteps = [ { say = "Starting.\\n@cap://bob please check the plan" } ]\n'
        '[[turn]]\nsteps = [ { say = "Thanks." } ]\n')
    (tmp_path / "bob.toml").write_text(
        '[[turn]]\nsteps = [ { say = "Checked: the plan is fine." } ]\n')
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(
        'name = "rp"\ntask = "Coordinate."\nworktrees = "dirs"\npermissions = "allow"\n'
        '[[session]]\nid = "alice"\nbinding = "inproc"\nscript = "alice.toml"\n'
        '[[session]]\nid = "bob"\nbinding = "inproc"\nscript = "bob.toml"\nstart = false\n')
    return fleet


async def test_a_reply_goes_back_end_to_end_audited_and_replays(tmp_path):
    path = _files(tmp_path)
    outcome, log, live = await run_file(path)
    assert outcome.completed, outcome.reason
    queued = {e.event.message_id: e for e in events(log, "fleet.message.queued")}
    asked = next(e.event for e in queued.values() if e.event.via == "message")
    (reply_env,) = [e for e in queued.values() if e.event.via == "reply"]
    reply = reply_env.event
    assert (reply.source, reply.target, reply.reply_to, reply.hops) == (
        "bob", "alice", asked.message_id, 2)
    cause = log.read(reply_env.cause, until=reply_env.cause)[0]
    assert (cause.kind, cause.stream) == ("session.turn_ended", "rp.bob")
    assert [e.event.text for e in events(log, "input.injected", "rp.alice")] == [
        "Coordinate.", "Message from bob (reply): Checked: the plan is fine."]
    view = live.fleets["rp"].messages[reply.message_id]
    assert (view.state, view.reply_to) == ("consumed", asked.message_id)
    assert [e.event.message_id for e in events(log, "fleet.message.delivered")].count(
        reply.message_id) == 1
    assert msgspec.to_builtins(replay(log).fleets) == msgspec.to_builtins(live)
    # every cut of the log rebuilds the reply once: queued, owed or delivered, never twice
    fleet, envs = load_fleet(path), log.read(1)
    log.close()
    at = next(i for i, e in enumerate(envs) if e.kind == "fleet.message.queued"
              and e.event.via == "reply")
    for cut in range(at - 3, len(envs) + 1):
        point = rebuild_fleet(fleet, envs[:cut])
        logged = [e.event for e in envs[:cut] if e.kind == "fleet.message.queued"]
        unlogged = [e.event for e in point.unlogged if type(e.event) is FleetMessageQueued]
        replies = [q for q in logged + unlogged if q.via == "reply"]
        assert replies in ([], [reply]), cut
        owed = [d for d in point.deliver if d.message_id == reply.message_id]
        assert len(owed) <= 1
        if not replies:
            assert not owed
