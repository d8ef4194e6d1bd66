"""Nodes through the embedding API: an orchestrator on a PostgreSQL URL, ownership and
heartbeats, and takeover of a lapsed node (on any log, and race-free on PostgreSQL)."""

from __future__ import annotations

import attrs
import msgspec
import trio

from tests.pg_fixture import fresh_url
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.nodes import NodesView, fold_nodes, open_node, read_nodes, take_over
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.events.kinds import NodeHeartbeat, NodeStopped, SessionCompleted, SessionOwned
from trio_cap.events.log import MemoryEventLog
from trio_cap.events.log.postgres import PostgresEventLog
from trio_cap.events.projections import forget_finished
from trio_cap.events.replay import replay


@attrs.define
class ManualClock:
    t: float = 1_000.0

    def now(self) -> float:
        return self.t


async def test_an_orchestrator_on_a_url_runs_as_a_node_and_replays_the_same(pg_url, tmp_path):
    async with open_orchestrator(pg_url, ids=SequentialIds()) as orch:
        async with open_node(orch.log, "embedded", lease=30) as node:
            orch.node = node
            session = await orch.start_session(cwd=tmp_path, permissions="allow")
            result = await session.run_turn("say: hi")
            await session.close()
            assert result.stop_reason == "end_turn"
        await orch.caught_up()
        live = msgspec.to_builtins(orch.state)
    stored = PostgresEventLog(pg_url, readonly=True)
    assert msgspec.to_builtins(forget_finished(replay(stored))) == live  # live: summaries
    envs = stored.read()
    owned = [e for e in envs if isinstance(e.event, SessionOwned)]
    assert [(e.stream, e.event.node) for e in owned] == [(session.id, "embedded")]
    assert owned[0].seq < min(e.seq for e in envs if e.stream == session.id and e is not owned[0])
    view = read_nodes(stored)
    assert view.stopped == {"embedded"} and view.live_sessions("embedded") == []


async def _lapsed_node(log, clock: ManualClock, node: str, sessions: list[str]) -> None:
    await log.append([NodeHeartbeat(node=node, lease_until=clock.now() + 5)],
                     stream=f"node:{node}")
    for sid in sessions:
        await log.append([SessionOwned(node=node)], stream=sid)


async def test_take_over_ends_only_the_live_sessions_of_a_lapsed_node():
    clock = ManualClock()
    log = MemoryEventLog(clock)
    await _lapsed_node(log, clock, "dead", ["s1", "s2"])
    await log.append([SessionCompleted(turns=1)], stream="s2")  # already over: left alone
    await _lapsed_node(log, clock, "stopped-cleanly", ["s3"])
    await log.append([NodeStopped(node="stopped-cleanly")], stream="node:stopped-cleanly")
    assert await take_over(log, "rescuer", clock=clock) == []  # leases still valid
    clock.t += 6
    done = await take_over(log, "rescuer", clock=clock)
    assert [(d.lost, d.sessions) for d in done] == [("dead", ("s1",))]
    failed = [e for e in log.read(1, "s1") if e.kind == "session.failed"]
    assert len(failed) == 1 and failed[0].event.code == "node_lost"
    assert "node lost" in failed[0].event.message and failed[0].cause == done[0].seq
    assert await take_over(log, "rescuer", clock=clock) == []  # once only
    view = fold_nodes(NodesView(), log.read())
    assert view.taken == {"dead"} and view.owner["s1"] == "rescuer"


async def test_take_over_resumes_what_the_judge_accepts_and_ends_the_rest_saying_why():
    clock = ManualClock()
    log = MemoryEventLog(clock)
    await _lapsed_node(log, clock, "dead", ["s1", "s2"])
    clock.t += 6
    judged: list[str] = []

    async def judge(sid: str) -> str | None:
        judged.append(sid)
        return None if sid == "s1" else "its run asks a human at a terminal"

    [done] = await take_over(log, "rescuer", clock=clock, resumable=judge)
    assert judged == ["s1", "s2"]
    assert done.resumed == ("s1",) and done.failed == {"s2": "its run asks a human at a terminal"}
    [takeover] = [e.event for e in log.read() if e.kind == "node.takeover"]
    assert takeover.resumed and takeover.sessions == ("s1", "s2")
    assert takeover.not_resumed == ("s2",)
    assert [e.kind for e in log.read(1, "s1")] == ["session.owned"]  # left for the resume
    [failed] = [e for e in log.read(1, "s2") if e.kind == "session.failed"]
    assert failed.event.code == "node_lost" and failed.cause == done.seq
    assert failed.event.message.endswith("cannot resume this session: its run asks a human "
                                         "at a terminal")


async def test_a_takeover_reads_the_log_in_windows_through_read_async_never_read():
    """A takeover runs in the node's event loop: the view of the nodes and each judged
    session come from ``read_async`` (a window at a time, a database's rows in a worker
    thread), never from a synchronous ``read`` holding the loop for the whole log."""
    from trio_cap.actors.cli.node_resume import NodeResumer
    from trio_cap.actors.nodes import read_nodes_async

    clock = ManualClock()
    log = MemoryEventLog(clock)
    await _lapsed_node(log, clock, "dead", ["s1"])
    for n in range(10):
        await log.append([NodeHeartbeat(node=f"other{n}", lease_until=clock.now() + 60)],
                         stream=f"node:other{n}")
    clock.t += 6
    reads: list[tuple[int, int | None]] = []
    inner = log.read_async

    async def counting(from_seq=1, stream=None, **kw):
        reads.append((from_seq, kw.get("until")))
        return await inner(from_seq, stream, **kw)

    def refuse(*args, **kw):
        raise AssertionError("a synchronous read of the log inside the event loop")

    log.read_async = counting  # type: ignore[method-assign]
    log.read = refuse  # type: ignore[method-assign]
    view = await read_nodes_async(log, window=4)
    assert reads == [(1, 4), (5, 8), (9, 12)] and view.last_seq == 12
    resumer = NodeResumer(log, "memory")
    [done] = await take_over(log, "rescuer", clock=clock, resumable=resumer.judge)
    assert done.sessions == ("s1",) and "not started by cap run" in done.failed["s1"]


async def test_a_node_refuses_to_resume_a_session_no_cap_run_started(tmp_path):
    from trio_cap.actors.cli.node_resume import NodeResumer

    async with open_orchestrator(MemoryEventLog(), ids=SequentialIds()) as orch:
        session = await orch.start_session(cwd=tmp_path, permissions="allow")
        resumer = NodeResumer(orch.log, "memory")
        why = await resumer.judge(session.id)
        await session.close()
    assert why is not None and "not started by cap run" in why and not resumer.ready


async def test_two_nodes_taking_over_at_once_on_postgres_do_it_once(pg_server):
    url = fresh_url(pg_server)
    clock = ManualClock()
    first = await PostgresEventLog.open(url, clock=clock)
    second = await PostgresEventLog.open(url, clock=clock)
    await _lapsed_node(first, clock, "dead", ["a", "b"])
    clock.t += 10
    results = {}

    async def rescue(log, name):
        results[name] = await take_over(log, name, clock=clock)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(rescue, first, "r1")
        nursery.start_soon(rescue, second, "r2")
    assert sorted(len(r) for r in results.values()) == [0, 1]
    await first.aclose()
    await second.aclose()
    envs = PostgresEventLog(url, readonly=True).read()
    assert sum(e.kind == "node.takeover" for e in envs) == 1
    assert sorted(e.stream for e in envs if e.kind == "session.failed") == ["a", "b"]


async def test_leases_on_postgres_run_on_the_database_servers_clock(pg_url):
    from trio_cap.actors.nodes import Node

    skewed = ManualClock(t=5.0)  # this machine's clock is wildly wrong: the log's own
    log = await PostgresEventLog.open(pg_url, clock=skewed)
    node = Node(log, "n", lease=30)
    before = log.server_time()
    await node.heartbeat()
    after = log.server_time()
    beat = log.read()[-1].event
    assert before + 30 <= beat.lease_until <= after + 30
    assert await take_over(log, "other") == []  # not lapsed by the server's clock
    await log.aclose()
