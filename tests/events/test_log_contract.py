"""The EventLog contract, one suite over every backend: memory, file and PostgreSQL.

Each test gets a factory for an empty log of the parametrized kind (PostgreSQL:
a real throwaway server, a fresh schema per log) and, where the backend has
storage, a way to open the same log again.
"""

from __future__ import annotations

import itertools
import random

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.pg_fixture import fresh_url
from tests.strategies import events
from trio_cap.events.clock import StepClock
from trio_cap.events.kinds import TextChunk
from trio_cap.events.log import FileEventLog, LogClosed, MemoryEventLog
from trio_cap.events.log.errors import EventRejected, EventTooLarge
from trio_cap.events.log.postgres import PostgresEventLog
from trio_cap.events.log.records import MAX_RECORD

BACKENDS = ["memory", "file", "postgres"]


class Backend:
    """Opens empty logs of one kind, and the same log again."""

    def __init__(self, kind: str, tmp_path_factory, request) -> None:
        self.kind = kind
        self._tmp = tmp_path_factory
        self._request = request
        self._n = itertools.count()

    def new_target(self):
        if self.kind == "file":
            return self._tmp.mktemp("log") / "c.caplog"
        if self.kind == "postgres":
            return fresh_url(self._request.getfixturevalue("pg_server"))
        return None

    async def open(self, target=None, clock=None):
        if self.kind == "memory":
            return MemoryEventLog(clock)
        if self.kind == "file":
            return FileEventLog(target, fsync="never", clock=clock)
        return await PostgresEventLog.open(target, clock=clock)

    def reopen(self, target, live):
        """A read-only view of the stored log (memory: the same object)."""
        if self.kind == "memory":
            return live
        if self.kind == "file":
            return FileEventLog(target, readonly=True)
        return PostgresEventLog(target, readonly=True)


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path_factory) -> Backend:
    return Backend(request.param, tmp_path_factory, request)


@pytest.fixture(params=["file", "postgres"])
def encoding_backend(request, tmp_path_factory) -> Backend:
    """The backends that encode what they store (the memory log keeps the objects)."""
    return Backend(request.param, tmp_path_factory, request)


class Seen(list):
    """Seqs a subscriber received; ``until`` waits (bounded) for a condition on them."""

    def __init__(self) -> None:
        super().__init__()
        self._changed = trio.Event()

    def add(self, batch) -> None:
        self.extend(e.seq for e in batch)
        self._changed.set()
        self._changed = trio.Event()

    async def until(self, predicate) -> None:
        with trio.fail_after(30):
            while not predicate(self):
                await self._changed.wait()


def chunk(stream: str, n: int, i: int = 0) -> TextChunk:
    return TextChunk(message_id=f"m{n}", text=f"{stream}{n}.{i}")


async def test_append_returns_the_last_seq_and_reads_give_back_every_event(backend):
    target = backend.new_target()
    log = await backend.open(target)
    assert log.last_seq == 0 and log.read() == []
    assert await log.append([chunk("a", 0), chunk("a", 1)], stream="a", cause=None) == 2
    assert await log.append([chunk("b", 2)], stream="b", cause=2) == 3
    assert await log.append([]) == 3
    envs = log.read()
    assert [(e.seq, e.stream, e.cause) for e in envs] == [(1, "a", None), (2, "a", None),
                                                          (3, "b", 2)]
    assert [e.event for e in envs] == [chunk("a", 0), chunk("a", 1), chunk("b", 2)]
    assert [e.seq for e in log.read(2)] == [2, 3]
    assert [e.seq for e in log.read(1, "a")] == [1, 2]
    assert [e.seq for e in log.read(1, until=2)] == [1, 2]
    assert [e.seq for e in log.read(2, limit=1)] == [2]
    await log.aclose()
    with pytest.raises(LogClosed):
        await log.append([chunk("a", 9)])
    again = backend.reopen(target, log)
    assert again.last_seq == 3 and again.read() == envs
    assert again.read(1, "b") == envs[2:]


async def test_a_refused_batch_stores_nothing_and_spends_no_seq(encoding_backend):
    backend = encoding_backend
    log = await backend.open(backend.new_target())
    await log.append([chunk("a", 0)])
    with pytest.raises(EventTooLarge):
        await log.append([chunk("a", 1), TextChunk(message_id="m", text="x" * (MAX_RECORD + 1))])
    with pytest.raises(EventRejected):
        await log.append([TextChunk(message_id="m", text="t", meta={"x": object()})])
    assert await log.append([chunk("a", 2)]) == 2
    assert [e.event for e in log.read()] == [chunk("a", 0), chunk("a", 2)]
    await log.aclose()


async def test_stream_reads_match_a_filtered_scan_before_and_after_reopen(backend):
    target = backend.new_target()
    rng = random.Random(3)
    log = await backend.open(target)
    for n in range(40):
        stream = rng.choice("abc")
        await log.append([chunk(stream, n, i) for i in range(rng.randint(1, 4))], stream=stream)
    await log.aclose()
    if backend.kind != "memory":
        log = await backend.open(target)  # older events unindexed, new ones indexed
        for n in range(40, 60):
            stream = rng.choice("abc")
            await log.append([chunk(stream, n)], stream=stream)
    everything = log.read()
    assert [e.seq for e in everything] == list(range(1, log.last_seq + 1))
    for stream in "abc":
        for from_seq in (1, 7, log.last_seq // 2, log.last_seq):
            want = [e for e in everything if e.seq >= from_seq and e.stream == stream]
            assert log.read(from_seq, stream) == want
        half = log.last_seq // 2
        assert log.read(1, stream, until=half) == [e for e in everything
                                                   if e.seq <= half and e.stream == stream]
    await log.aclose()


async def test_subscriptions_from_before_a_reopen_match_a_filtered_scan(backend, monkeypatch):
    """A subscriber that starts far back, on a log this process did not write: the same
    events as a filtered scan, and on PostgreSQL every older row is read in a worker
    thread (a catch-up from far back must not stall the event loop)."""
    import threading

    target = backend.new_target()
    log = await backend.open(target)
    for n in range(30):
        await log.append([chunk("ab"[n % 2], n, i) for i in range(1 + n % 3)],
                         stream="ab"[n % 2])
    threads: list[bool] = []
    if backend.kind != "memory":  # the memory log is its own stored form: read it as it is
        await log.aclose()
        if backend.kind == "postgres":
            query = PostgresEventLog._query

            def spy(self, sql, params):
                threads.append(threading.current_thread() is threading.main_thread())
                return query(self, sql, params)

            monkeypatch.setattr(PostgresEventLog, "_query", spy)
        log = await backend.open(target)
    everything = log.read()
    threads.clear()
    for stream, from_seq in ((None, 1), ("a", 1), ("b", 5), ("b", everything[-1].seq - 3)):
        want = [e for e in everything
                if e.seq >= from_seq and (stream is None or e.stream == stream)]
        got: list = []
        with trio.fail_after(30):
            async for batch in log.subscribe(from_seq, stream, batch=7):
                got.extend(batch)
                if len(got) >= len(want):
                    break
        assert want and got == want
    if backend.kind == "postgres":
        assert threads and not any(threads)  # every database read was off the loop's thread
    await log.aclose()


async def test_a_subscription_catches_up_then_follows_live_filtered_by_stream(backend):
    log = await backend.open(backend.new_target())
    await log.append([chunk("a", 1)], stream="a")
    await log.append([chunk("b", 2)], stream="b")
    received, everything = Seen(), Seen()

    async def follow(stream, into, task_status=trio.TASK_STATUS_IGNORED):
        task_status.started()
        async for batch in log.subscribe(1, stream):
            into.add(batch)

    async with trio.open_nursery() as nursery:
        await nursery.start(follow, "b", received)
        await nursery.start(follow, None, everything)
        await received.until(lambda got: got == [2])
        await log.append([chunk("b", 3)], stream="b")
        await log.append([chunk("a", 4)], stream="a")
        await everything.until(lambda got: len(got) >= 4)
        await received.until(lambda got: len(got) >= 2)
        await log.aclose()  # ends both subscriptions once drained
    assert received == [2, 3] and everything == [1, 2, 3, 4]


async def test_subscribers_joining_while_appends_race_see_every_event_once(backend):
    log = await backend.open(backend.new_target())
    rng = random.Random(7)
    rounds = 30 if backend.kind == "postgres" else 100
    seen: dict[int, list[int]] = {}

    async def writer(k: int) -> None:
        for i in range(rounds):
            await log.append([chunk(f"w{k}", i)] * rng.randint(5, 15), stream=f"w{k}")
            if rng.random() < 0.5:
                await trio.lowlevel.checkpoint()

    async def subscriber(n: int, start: int) -> None:
        got = seen.setdefault(n, [])
        async for batch in log.subscribe(start, batch=rng.randint(1, 64)):
            got.extend(env.seq for env in batch)

    async with trio.open_nursery() as nursery:
        async with trio.open_nursery() as writers:
            for k in range(3):
                writers.start_soon(writer, k)
            for n in range(12):
                await trio.lowlevel.checkpoint()
                nursery.start_soon(subscriber, n, rng.randint(1, max(1, log.last_seq)))
        await log.aclose()
    last = log.last_seq
    assert last > 0
    for got in seen.values():
        assert got == list(range(got[0], last + 1)), "gap or duplicate"


async def test_a_log_shared_by_two_writers_is_gap_free_for_both(backend):
    """Two log objects on one store (PostgreSQL: two connections, as two nodes would
    have); the file and memory logs are single-writer, so they get one object."""
    target = backend.new_target()
    first = await backend.open(target)
    second = await backend.open(target) if backend.kind == "postgres" else first
    got = Seen()

    async def follow(task_status=trio.TASK_STATUS_IGNORED):
        task_status.started()
        async for batch in first.subscribe(1):
            got.add(batch)

    async with trio.open_nursery() as nursery:
        await nursery.start(follow)
        async with trio.open_nursery() as writers:
            for log, name in ((first, "x"), (second, "y")):
                async def write(log=log, name=name):
                    for i in range(40):
                        await log.append([chunk(name, i)] * 3, stream=name)
                writers.start_soon(write)
        await got.until(lambda seqs: len(seqs) >= 240)
        await first.aclose()
        await second.aclose()
    assert got == list(range(1, 241))
    streams = [e.stream for e in backend.reopen(target, first).read()] if \
        backend.kind != "memory" else [e.stream for e in first.read()]
    assert streams.count("x") == streams.count("y") == 120


batches = st.lists(st.lists(events(), min_size=1, max_size=5), min_size=1, max_size=6)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(event_batches=batches)
def test_any_events_round_trip_unchanged(backend, event_batches):
    async def main():
        target = backend.new_target()
        log = await backend.open(target, StepClock())
        for i, batch in enumerate(event_batches):
            await log.append(batch, stream=f"s{i % 2}", cause=i or None)
        await log.aclose()
        stored = backend.reopen(target, log).read()
        expected = [ev for batch in event_batches for ev in batch]
        assert [env.event for env in stored] == expected
        assert [env.seq for env in stored] == list(range(1, len(expected) + 1))
        assert all(a.at <= b.at for a, b in itertools.pairwise(stored))

    trio.run(main)
