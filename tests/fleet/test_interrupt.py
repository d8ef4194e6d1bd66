"""Cooperative interruption (CAP §10.6): a person's correction mid-turn cancels the turn,
keeps what it said, and gives the member its input again with the correction."""

from __future__ import annotations

import functools

import msgspec
import pytest
import trio

from tests.fleet.helpers import events
from trio_cap.actors.cli.fleet_render import describe_fleet
from trio_cap.actors.fleet import InterruptRefused, load_fleet, run_fleet
from trio_cap.actors.fleet.machine import CancelTurn, Deliver, Emit, FleetMachine
from trio_cap.actors.fleet.model import Fleet, Member, Pipeline
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.events.kinds import (
    FleetCancel,
    FleetInterrupt,
    FleetMessageQueued,
    FleetRoute,
    SessionTurnEnded,
    TextChunk,
)
from trio_cap.events.log import FileEventLog
from trio_cap.events.replay import replay


def _emitted(out, kind):
    return [o.event for o in out if isinstance(o, Emit) and isinstance(o.event, kind)]


def _machine() -> FleetMachine:
    fleet = Fleet(name="f", task="write it", sessions=(Member("a"), Member("b")),
                  routes=(Pipeline(("a", "b")),))
    m = FleetMachine(fleet, {"a": "f.a", "b": "f.b"})
    m.start()
    return m


def test_an_interrupted_turn_is_cancelled_and_its_input_comes_back_with_the_correction():
    m = _machine()
    m.observe("f.a", 10, TextChunk(message_id="x", text="half a dra"))
    out = m.interrupt("a", "in French")
    (asked,) = _emitted(out, FleetInterrupt)
    assert (asked.member, asked.correction, asked.message_id, asked.refused) == (
        "a", "in French", "m1", None)
    assert CancelTurn("a") in out
    assert [c.reason for c in _emitted(out, FleetCancel)] == ["interrupt"]
    # the turn ends cancelled: no route fires, no failure; the task comes back first
    out = m.observe("f.a", 11, SessionTurnEnded(turn=1, stop_reason="cancelled"))
    (again,) = _emitted(out, FleetMessageQueued)
    assert (again.source, again.target, again.via, again.replaces) == (
        "human", "a", "interrupt", "m1")
    assert again.text.startswith("write it\n\n") and again.text.endswith("in French")
    assert not _emitted(out, FleetRoute)
    assert Deliver(again.message_id, "a", again.text) in out
    # the corrected turn ends well: the pipeline goes on, and the fleet completes
    m.observe("f.a", 20, TextChunk(message_id="y", text="un brouillon"))
    out = m.observe("f.a", 21, SessionTurnEnded(turn=2, stop_reason="end_turn"))
    (handed,) = _emitted(out, FleetMessageQueued)
    assert handed.target == "b" and handed.text == "Result from a:\nun brouillon"
    out = m.observe("f.b", 30, SessionTurnEnded(turn=1, stop_reason="end_turn"))
    assert type(out[-1]).__name__ == "Finished" and out[-1].completed


def test_a_turn_that_ends_well_before_the_cancel_lands_is_superseded_all_the_same():
    m = _machine()
    m.interrupt("a", "shorter")
    m.interrupt("a", "and in French")  # a second word before the turn stopped
    out = m.observe("f.a", 11, SessionTurnEnded(turn=1, stop_reason="end_turn"))
    (again,) = _emitted(out, FleetMessageQueued)
    assert again.via == "interrupt" and again.text.endswith("shorter\nand in French")
    assert not _emitted(out, FleetRoute)


def test_a_member_not_in_a_turn_is_not_interrupted():
    m = _machine()
    out = m.interrupt("b", "hurry")
    assert [(e.member, e.refused) for e in _emitted(out, FleetInterrupt)] == [
        ("b", "not_working")]
    assert len(out) == 1
    assert _emitted(m.interrupt("zed", "?"), FleetInterrupt)[0].refused == "unknown_member"


WRITER = """\
[[turn]]
steps = [ { say = "Draft: the first half" }, { wait = 60 }, { say = "never said" } ]
[[turn]]
steps = [ { say = "Corrected draft" } ]
"""


async def test_a_scripted_member_in_a_long_turn_is_interrupted_and_the_fleet_completes(
        tmp_path):
    (tmp_path / "writer.toml").write_text(WRITER)
    (tmp_path / "fleet.toml").write_text(
        'name = "ix"\ntask = "Write the intro."\nworktrees = "dirs"\n'
        '[[session]]\nid = "writer"\nbinding = "inproc"\nscript = "writer.toml"\n'
        '[[session]]\nid = "reviewer"\nbinding = "inproc"\n'
        '[[route]]\npipeline = ["writer", "reviewer"]\n')
    fleet = load_fleet(tmp_path / "fleet.toml")
    log_path = tmp_path / "fleet.caplog"
    async with open_orchestrator(log_path, ids=SequentialIds()) as orch:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                handle = await nursery.start(functools.partial(run_fleet, orch, fleet))
                async for batch in orch.log.subscribe(1, "ix.writer"):
                    if any(env.kind == "cap.text_chunk" and "first half" in env.event.text
                           for env in batch):
                        break  # the writer said part of its answer and is now waiting
                with pytest.raises(InterruptRefused, match="not_working"):
                    handle.interrupt("reviewer", "hurry")  # not in a turn
                handle.interrupt("writer", "British spelling, please")
                outcome = await handle.wait()
            await orch.caught_up()
        live = orch.state.fleets
    assert outcome.completed, outcome.reason
    log = FileEventLog(log_path, readonly=True)
    # what it had said stays in the log; the turn ended cancelled
    said = "".join(e.event.text for e in events(log, "cap.text_chunk", "ix.writer"))
    assert "Draft: the first half" in said and "never said" not in said
    ends = [e.event.stop_reason for e in events(log, "session.turn_ended", "ix.writer")]
    assert ends == ["cancelled", "end_turn"]
    # one logged operation: asked, cancelled, the input again naming task and correction
    (asked,) = [e for e in events(log, "fleet.interrupt") if e.event.refused is None]
    (cancel,) = events(log, "fleet.cancel")
    assert cancel.event.reason == "interrupt" and cancel.seq > asked.seq
    (again,) = [e for e in events(log, "fleet.message.queued") if e.event.via == "interrupt"]
    assert again.event.replaces == asked.event.message_id and again.seq > cancel.seq
    inputs = [e.event.text for e in events(log, "input.injected", "ix.writer")]
    assert len(inputs) == 2 and inputs[1] == again.event.text
    assert "Write the intro." in inputs[1] and "British spelling, please" in inputs[1]
    # the reviewer got the corrected turn's whole text only
    (to_reviewer,) = [e.event.text for e in events(log, "input.injected", "ix.reviewer")]
    assert to_reviewer == "Result from writer:\nCorrected draft"
    refused = [(e.event.member, e.event.refused) for e in events(log, "fleet.interrupt")
               if e.event.refused]
    assert refused == [("reviewer", "not_working")]
    view = live.fleets["ix"]
    assert [r.detail for r in view.audit if r.kind == "fleet.interrupt"] == [
        "refused: not_working", f"interrupt {asked.event.message_id}"]
    assert describe_fleet(asked.event) == (
        f"writer: interrupted ({asked.event.message_id}), correction: British spelling, please")
    assert msgspec.to_builtins(replay(log).fleets) == msgspec.to_builtins(live)
    log.close()


def test_a_correction_to_an_input_the_session_refused_is_dropped_with_it():
    fleet = Fleet(name="f", task="go", sessions=(Member("a", start=True), Member("b")),
                  routes=(Pipeline(("b", "a")),))
    m = FleetMachine(fleet, {"a": "f.a", "b": "f.b"})
    m.start()
    m.interrupt("a", "in French")
    out = m.undeliverable("m1", "target_ended")  # a's session never took the task
    out += m.observe("f.b", 10, SessionTurnEnded(turn=1, stop_reason="end_turn"))
    out += m.observe("f.a", 20, SessionTurnEnded(turn=1, stop_reason="end_turn"))
    assert [q.via for q in _emitted(out, FleetMessageQueued)] == ["pipeline"]
