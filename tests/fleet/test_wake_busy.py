"""Waking a busy recipient: a message to a member in a turn is injected at once when its
manifest declares ``queued_input``, else held and delivered the moment that turn ends.

Bob's first turn is held open by a question only the test answers (``human``), so the
message from alice always arrives mid-turn — no timing, no sleeps."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from trio_cap.actors.fleet import load_fleet, run_fleet
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.manifest.resolve import bundled_dir
from trio_cap.actors.orchestrator import open_orchestrator


def _files(tmp_path: Path, queued: bool) -> Path:
    manifest = (bundled_dir() / "cap-agent.toml").read_text()
    assert "queued_input = true" in manifest
    (tmp_path / "busy-agent.toml").write_text(
        manifest.replace('name = "cap-agent"', 'name = "busy-agent"')
        .replace("queued_input = true", f"queued_input = {str(queued).lower()}"))
    (tmp_path / "alice.toml").write_text(
        '[[turn]]\nsteps = [ { say = "@cap://bob please look" } ]\n'
        '[[turn]]\nsteps = [ { say = "ok" } ]\n')
    (tmp_path / "bob.toml").write_text(
        '[[turn]]\nsteps = [ { ask = "go on?" }, { say = "first done" } ]\n'
        '[[turn]]\nsteps = [ { say = "looked" } ]\n')
    path = tmp_path / "fleet.toml"
    path.write_text(
        'name = "wake"\ntask = "Go."\nworktrees = "dirs"\npermissions = "allow"\n'
        '[[session]]\nid = "alice"\nbinding = "inproc"\nscript = "alice.toml"\n'
        f'[[session]]\nid = "bob"\nbinding = "inproc"\nscript = "bob.toml"\n'
        f'agent = "{tmp_path / "busy-agent.toml"}"\n')
    return path


async def _until(orch, predicate, from_seq: int = 1):
    async for batch in orch.log.subscribe(from_seq):
        for env in batch:
            if predicate(env):
                return env
    raise AssertionError("the log ended first")


@pytest.mark.parametrize("queued", [True, False], ids=["queued_input", "held"])
async def test_a_message_to_a_busy_member(tmp_path, queued):
    fleet = load_fleet(_files(tmp_path, queued))
    async with open_orchestrator(tmp_path / "run.caplog", ids=SequentialIds()) as orch:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                handle = await nursery.start(lambda task_status: run_fleet(
                    orch, fleet, human=True, task_status=task_status))
                asked = await _until(orch, lambda e: e.kind == "cap.ask_user"
                                     and e.stream == "wake.bob")
                queued_env = await _until(orch, lambda e: e.kind == "fleet.message.queued"
                                          and e.event.via == "message")
                mid = queued_env.event.message_id
                bob = handle._shell.machine.members["bob"]
                assert bob.status == "working"  # its first turn waits for our answer
                if queued:  # injected at once, while the turn is still open
                    assert mid in bob.inflight and mid not in bob.queue
                    delivered = await _until(orch, lambda e: e.kind ==
                                             "fleet.message.delivered"
                                             and e.event.message_id == mid)
                else:  # held: the machine decided not to deliver it (same step as queued)
                    assert mid in bob.queue and not bob.inflight
                ended = [e for e in orch.log.read(1, "wake.bob")
                         if e.kind == "session.turn_ended"]
                assert ended == []
                await orch.session("wake.bob").answer(asked.event.ask_id, "yes")
                outcome = await handle.wait()
        assert outcome.completed, outcome.reason
        log = list(orch.log.read(1))
    bob_events = [e for e in log if e.stream == "wake.bob"]
    first_end = next(e for e in bob_events if e.kind == "session.turn_ended")
    (delivered_env,) = [e for e in log if e.kind == "fleet.message.delivered"
                        and e.event.message_id == mid]
    injects = [e for e in bob_events if e.kind == "input.injected"]
    assert [e.event.text for e in injects] == ["Go.", "Message from alice: please look"]
    if queued:
        assert delivered_env.seq == delivered.seq < first_end.seq
        assert injects[1].seq < first_end.seq
    else:  # delivered by the very machine step that took the turn end
        assert injects[1].seq > first_end.seq
        consumed = next(e for e in log if e.kind == "fleet.message.consumed"
                        and e.event.target == "bob")
        assert consumed.cause == first_end.seq
        between = [e for e in log if consumed.seq < e.seq < delivered_env.seq
                   and e.stream == "fleet:wake"]
        assert all(e.kind != "fleet.message.consumed" for e in between), between
    # either way the message is consumed by bob's second turn, and bob's answer goes back
    consumed_msg = next(e for e in log if e.kind == "fleet.message.consumed"
                        and e.event.message_id == mid)
    second_end = [e for e in bob_events if e.kind == "session.turn_ended"][1]
    assert consumed_msg.cause == second_end.seq
    (reply,) = [e.event for e in log if e.kind == "fleet.message.queued"
                and e.event.via == "reply"]
    assert reply.text == "Message from bob (reply): looked" and reply.reply_to == mid
