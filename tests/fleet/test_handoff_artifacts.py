"""A worker's result is handed on with that turn's artifacts: its worktree's diff (bounded)
and the agent's own, never the text alone — and a crash while the diff was taken is resumed."""

from __future__ import annotations

import msgspec
import pytest

from tests.fleet.helpers import events, git_repo, run_file
from trio_cap.actors.fleet import load_fleet
from trio_cap.actors.fleet.machine import HANDOFF_DIFF_LIMIT, Collect, Emit, FleetMachine
from trio_cap.actors.fleet.model import Fleet, Member, Pipeline
from trio_cap.actors.fleet.resume import actions, rebuild_fleet
from trio_cap.events.kinds import (
    Artifact,
    FleetDiff,
    FleetMessageQueued,
    SessionTurnEnded,
    TextChunk,
)
from trio_cap.events.replay import replay


@pytest.fixture
def repo(tmp_path):
    repo = git_repo(tmp_path, {"notes.md": "# old\n"})
    (repo / "writer.toml").write_text(
        '[[turn]]\nsteps = [ { write = "notes.md", content = "# Notes\\n" },'
        ' { say = "notes.md has a title." } ]\n')
    line = "x" * 70 + "\\n"
    (repo / "big.toml").write_text(
        f'[[turn]]\nsteps = [ {{ write = "big.txt", content = "{line * 300}" }},'
        ' { say = "big.txt written." } ]\n')
    (repo / "fleet.toml").write_text(
        'name = "ho"\ntask = "Write."\npermissions = "allow"\n'
        '[[session]]\nid = "writer"\nbinding = "inproc"\nscript = "writer.toml"\n'
        '[[session]]\nid = "big"\nbinding = "inproc"\nscript = "big.toml"\n'
        '[[session]]\nid = "lead"\nbinding = "inproc"\n'
        '[[route]]\njoin = { from = ["writer", "big"], to = "lead" }\n')
    return repo


async def test_a_join_hands_each_workers_text_with_its_worktree_diff(repo):
    outcome, log, live = await run_file(repo / "fleet.toml", repo / "run.caplog")
    assert outcome.completed, outcome.reason
    fleet_events = log.read(1, "fleet:ho")
    diffs = {e.event.member: e for e in fleet_events if e.kind == "fleet.diff"}
    assert set(diffs) == {"writer", "big"}
    for member, env in diffs.items():  # caused by the turn end whose result it goes with
        ended = log.read(env.cause, until=env.cause)[0]
        assert (ended.kind, ended.stream) == ("session.turn_ended", f"ho.{member}")
        assert env.event.turn_end == env.cause
    small, big = diffs["writer"].event, diffs["big"].event
    assert "+# Notes" in small.content and not small.truncated
    assert big.size > HANDOFF_DIFF_LIMIT and len(big.content) == HANDOFF_DIFF_LIMIT
    assert big.truncated and big.branch.endswith("/big")
    (joined,) = [e for e in fleet_events if e.kind == "fleet.message.queued"
                 and e.event.via == "join"]
    assert joined.seq > max(e.seq for e in diffs.values())
    text = joined.event.text
    writer_part, big_part = text.split("\n\nResult from big:\n")
    assert writer_part.startswith("Result from writer:\n")
    assert ("notes.md has a title.\n\nArtifacts of that turn:\n"
            "- writer.diff: its worktree's diff (") in writer_part
    assert writer_part.endswith(small.content)
    assert f"{small.size} bytes)" in writer_part and small.uri in writer_part
    assert "big.txt written.\n\nArtifacts of that turn:\n- big.diff:" in big_part
    assert f"its first {HANDOFF_DIFF_LIMIT} characters, the branch holds the rest" in big_part
    assert big_part.endswith(big.content)
    (given,) = [e.event.text for e in events(log, "input.injected", "ho.lead")
                if e.event.text.startswith("Result")]
    assert given == text
    assert msgspec.to_builtins(replay(log).fleets) == msgspec.to_builtins(live)
    # a crash while a diff was being taken: the resume takes it, then the join fires once
    fleet, envs = load_fleet(repo / "fleet.toml"), log.read(1)
    log.close()
    last = max(diffs.values(), key=lambda e: e.seq)
    at = next(i for i, e in enumerate(envs) if e.seq == last.seq)
    point = rebuild_fleet(fleet, envs[:at])
    pending = Collect(last.event.member)
    assert point.collect == [pending] and pending in actions(point)
    assert not [e for e in point.unlogged if type(e.event) is FleetMessageQueued]
    point = rebuild_fleet(fleet, envs[:at + 1])  # the diff is in: the join is owed, once
    assert point.collect == []
    owed = [e.event for e in point.unlogged if type(e.event) is FleetMessageQueued]
    assert [q.text for q in owed] == [text]
    final = rebuild_fleet(fleet, envs)
    assert final.ended == "completed" and actions(final) == []


def test_hand_offs_wait_for_the_diff_in_the_order_the_turns_ended():
    fleet = Fleet(name="f", task="go", sessions=(Member("a", start=True), Member("b"),
                                                 Member("c", start=False)),
                  routes=(Pipeline(stages=("a", "c")), Pipeline(stages=("b", "c"))))
    m = FleetMachine(fleet, {"a": "f.a", "b": "f.b", "c": "f.c"}, diffs=["a"])
    m.start()
    m.observe("f.a", 10, TextChunk(message_id="t", text="from a"))
    m.observe("f.a", 11, Artifact(artifact_id="r", mime_type="text/plain", name="report.txt",
                                  size=3, uri="file:///tmp/report.txt"))
    out = m.observe("f.a", 12, SessionTurnEnded(turn=1))
    assert Collect("a") in out and not [o for o in out if isinstance(o, Emit)
                                        and type(o.event) is FleetMessageQueued]
    m.observe("f.b", 13, TextChunk(message_id="t", text="from b"))
    out = m.observe("f.b", 14, SessionTurnEnded(turn=1))  # b ended later: it waits behind a
    assert not [o for o in out if isinstance(o, Emit) and type(o.event) is FleetMessageQueued]
    out = m.collected("a", "", 0, "file:///w/a", None)  # no changes: no diff line
    assert type(out[0].event) is FleetDiff and out[0].cause == 12
    queued = [o.event for o in out if isinstance(o, Emit)
              and type(o.event) is FleetMessageQueued]
    assert [q.source for q in queued] == ["a", "b"]
    assert queued[0].text == ("Result from a:\nfrom a\n\nArtifacts of that turn:\n"
                              "- report.txt (file:///tmp/report.txt, 3 bytes)")
    assert queued[1].text == "Result from b:\nfrom b"
