"""The pure part of ``cap fleet resume``: a fleet's log, cut anywhere, replays into a state
that accounts for every message exactly once (:mod:`trio_cap.actors.fleet.resume`)."""

from __future__ import annotations

import msgspec
import pytest

from tests.fleet.helpers import copy_examples, run_file
from trio_cap.actors.fleet import load_fleet
from trio_cap.actors.fleet.outputs import Deliver, Emit, Finished
from trio_cap.actors.fleet.resume import (
    CannotResumeFleet,
    actions,
    pick_fleet,
    rebuild_fleet,
    wakes,
)
from trio_cap.events.kinds import (
    FleetCompleted,
    FleetMessageConsumed,
    FleetMessageDelivered,
    FleetMessageQueued,
    FleetMessageRefused,
    FleetRoute,
)


async def _run(tmp_path, name: str):
    where = copy_examples(tmp_path)
    outcome, log, _ = await run_file(where / name)
    assert outcome.completed, outcome.reason
    return load_fleet(where / name), log.read(1)


def _fates(point, logged: list) -> dict[str, str]:
    """Each message the prefix or the replay knows of → what happens to it next."""
    fates: dict[str, str] = {}
    for env in logged:
        ev = env.event
        if type(ev) is FleetMessageQueued:
            fates[ev.message_id] = "queued"
        elif type(ev) is FleetMessageDelivered:
            fates[ev.message_id] = "delivered"
        elif type(ev) in (FleetMessageConsumed, FleetMessageRefused) and ev.message_id:
            fates[ev.message_id] = "done"
    for emit in point.unlogged:
        ev = emit.event
        if type(ev) is FleetMessageQueued:
            fates[ev.message_id] = "queued"
        elif type(ev) in (FleetMessageConsumed, FleetMessageRefused) and ev.message_id:
            fates[ev.message_id] = "done"
    return fates


@pytest.mark.parametrize("name", ["fan_out_join.toml", "messages.toml", "pipeline.toml",
                                  "race.toml", "by_subtask.toml"])
async def test_every_cut_of_a_fleet_log_replays_and_owes_each_message_once(tmp_path, name):
    fleet, envs = await _run(tmp_path, name)
    started = next(i for i, e in enumerate(envs) if e.kind == "fleet.started")
    for cut in range(started + 1, len(envs) + 1):
        point = rebuild_fleet(fleet, envs[:cut])
        if point.machine is None:
            assert not any(e.kind == "fleet.message.queued" for e in envs[:cut])
            continue
        owed = [d.message_id for d in point.deliver]
        claimed = [e.event.message_id for e in point.claimed]
        assert len(set(owed)) == len(owed) and not set(owed) & set(claimed)
        assert not set(owed) & set(point.redelivered)
        fates = _fates(point, envs[:cut])
        for mid in owed:  # owed: known, never delivered, not consumed
            assert fates[mid] == "queued", (cut, mid, fates)
        for mid in claimed:  # its inject is in the log, its record is not
            assert fates[mid] in ("queued", "done"), (cut, mid, fates)
        for mid in point.redelivered:  # delivered, its turn cut: the session re-runs it
            assert fates[mid] == "delivered" or mid in claimed, (cut, mid, fates)
        waiting = {m for member in point.machine.members.values() for m in member.queue}
        current = {m.current for m in point.machine.members.values() if m.current}
        for mid, fate in fates.items():
            if fate == "queued":
                assert mid in waiting | set(owed) | set(claimed), (cut, mid)
            elif fate == "delivered":
                assert mid in current, (cut, mid)
    final = rebuild_fleet(fleet, envs)
    assert final.ended == "completed" and actions(final) == []


async def test_a_cut_between_the_inject_and_its_record_claims_the_inject(tmp_path):
    fleet, envs = await _run(tmp_path, "pipeline.toml")
    delivered = next(i for i, e in enumerate(envs) if e.kind == "fleet.message.delivered")
    cut = envs[:delivered]
    point = rebuild_fleet(fleet, cut)
    assert point.deliver == []  # not injected twice
    (claim,) = point.claimed
    assert claim.event == envs[delivered].event and claim.cause == envs[delivered].cause


async def test_a_cut_before_the_inject_delivers_once(tmp_path):
    fleet, envs = await _run(tmp_path, "pipeline.toml")
    injected = next(i for i, e in enumerate(envs) if e.kind == "input.injected")
    point = rebuild_fleet(fleet, envs[:injected])
    (deliver,) = point.deliver
    assert isinstance(deliver, Deliver) and deliver.member == "writer"
    assert point.claimed == [] and point.redelivered == []
    assert actions(point)[-1] == deliver


async def test_a_turn_end_the_fleet_never_answered_is_answered_by_the_resume(tmp_path):
    fleet, envs = await _run(tmp_path, "pipeline.toml")
    ended = next(i for i, e in enumerate(envs) if e.kind == "session.turn_ended")
    point = rebuild_fleet(fleet, envs[:ended + 1])
    routed = [e for e in point.unlogged
              if type(e.event) in (FleetMessageConsumed, FleetRoute, FleetMessageQueued)]
    assert [type(e.event) for e in routed] == [FleetMessageConsumed, FleetRoute,
                                               FleetMessageQueued]
    assert {e.cause for e in routed} == {envs[ended].seq}
    (deliver,) = point.deliver  # the hand-off to the reviewer, never delivered
    assert deliver.member == "reviewer"


async def test_a_finished_fleet_whose_end_was_not_logged_ends_on_resume(tmp_path):
    fleet, envs = await _run(tmp_path, "pipeline.toml")
    end = next(i for i, e in enumerate(envs) if e.kind == "fleet.completed")
    point = rebuild_fleet(fleet, envs[:end])
    assert point.ended is None
    out = actions(point)
    assert isinstance(out[-1], Finished) and out[-1].completed
    assert isinstance(out[-2], Emit) and type(out[-2].event) is FleetCompleted


async def test_an_event_the_rules_do_not_make_is_refused(tmp_path):
    fleet, envs = await _run(tmp_path, "pipeline.toml")
    at = next(i for i, e in enumerate(envs) if e.kind == "fleet.route")
    forged = msgspec.structs.replace(envs[at].event, targets=("nobody",))
    changed = [*envs[:at], msgspec.structs.replace(envs[at], event=forged), *envs[at + 1:]]
    with pytest.raises(CannotResumeFleet, match=f"does not replay at seq {envs[at].seq}"):
        rebuild_fleet(fleet, changed)


async def test_pick_fleet_and_paused_wakes(tmp_path):
    fleet, envs = await _run(tmp_path, "pipeline.toml")
    with pytest.raises(CannotResumeFleet, match="has no fleet in it"):
        pick_fleet([e for e in envs if e.kind != "fleet.started"], None)
    with pytest.raises(CannotResumeFleet, match="has no fleet other"):
        pick_fleet(envs, "other")
    assert pick_fleet(envs, None) == "pipeline"
    point = rebuild_fleet(fleet, envs)
    point.paused = {"writer": 105.0, "reviewer": 90.0}
    assert [(w.member, w.delay) for w in wakes(point, 100.0)] == [("writer", 5.0),
                                                                  ("reviewer", 0.0)]


async def test_a_cancel_the_loser_never_saw_end_is_owed_again(tmp_path):
    fleet, envs = await _run(tmp_path, "race.toml")
    cancel = next(i for i, e in enumerate(envs) if e.kind == "fleet.cancel")
    point = rebuild_fleet(fleet, envs[:cancel + 1])
    assert point.cancel == ["slow"] and "m2" in point.redelivered  # its record may lag
    assert {o.member for o in actions(point) if isinstance(o, Deliver)} <= {"judge"}
