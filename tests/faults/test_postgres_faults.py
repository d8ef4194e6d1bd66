"""The PostgreSQL log under real faults: other processes appending, connections killed by
the server (pg_terminate_backend), a lost reply after commit, and a server restart."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import psycopg
import pytest
import trio

from trio_cap.events.kinds import TextChunk
from trio_cap.events.log import LogWriteError
from trio_cap.events.log.postgres import PostgresEventLog, SchemaError
from trio_cap.events.log.postgres_schema import LATEST

ROOT = Path(__file__).resolve().parents[2]
WRITER = """
import sys, trio
from trio_cap.events.kinds import TextChunk
from trio_cap.events.log.postgres import PostgresEventLog
url, name, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
async def main():
    log = await PostgresEventLog.open(url, listen=False)
    for i in range(rounds):
        last = await log.append([TextChunk(message_id=name, text=f"{name}{i}.{k}")
                                 for k in range(1 + i % 4)], stream=name)
        print(last, flush=True)
    await log.aclose()
trio.run(main)
"""


def terminate_others(server, except_pid: int | None = None) -> int:
    with psycopg.connect(server.url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> "
            "pg_backend_pid() AND backend_type = 'client backend' AND pid <> %s",
            (except_pid or 0,)).fetchall()
    return len(rows)


def texts(envs) -> list[str]:
    return [e.event.text for e in envs]


async def test_two_processes_appending_at_once_give_one_gap_free_history(pg_url):
    seen: list[int] = []
    reader = await PostgresEventLog.open(pg_url)

    async def follow(task_status=trio.TASK_STATUS_IGNORED):
        task_status.started()
        async for batch in reader.subscribe(1):
            seen.extend(e.seq for e in batch)

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    async with trio.open_nursery() as nursery:
        await nursery.start(follow)
        results = {}

        async def writer(name):
            results[name] = await trio.run_process(
                [sys.executable, "-c", WRITER, pg_url, name, "150"], capture_stdout=True,
                env=env)

        async with trio.open_nursery() as writers:
            writers.start_soon(writer, "p1")
            writers.start_soon(writer, "p2")
        total = sum(1 + i % 4 for i in range(150)) * 2
        with trio.fail_after(60):
            while reader.last_seq < total:
                await reader._fill_to(reader.head())
                await trio.lowlevel.checkpoint()
        await reader.aclose()
    envs = PostgresEventLog(pg_url, readonly=True).read()
    assert [e.seq for e in envs] == list(range(1, total + 1))  # no gap, no duplicate
    for name in ("p1", "p2"):
        acked = [int(x) for x in results[name].stdout.split()]
        assert acked == sorted(acked) and len(set(acked)) == 150
        mine = [e for e in envs if e.stream == name]
        # each writer's events in the order it appended them: seq order = commit order
        assert texts(mine) == [f"{name}{i}.{k}" for i in range(150) for k in range(1 + i % 4)]
        assert [e.seq for e in mine if e.event.text.endswith(".0")][1:] == [
            a - (1 + i % 4) + 1 for i, a in enumerate(acked)][1:]
    assert seen == list(range(1, total + 1))  # the live subscriber saw every seq once, in order


async def test_a_subscriber_rides_out_its_connection_being_killed(pg_server, pg_url):
    writer = await PostgresEventLog.open(pg_url, listen=False)
    reader = await PostgresEventLog.open(pg_url)
    got: list[int] = []
    changed = trio.Event()

    async def follow(task_status=trio.TASK_STATUS_IGNORED):
        nonlocal changed
        task_status.started()
        async for batch in reader.subscribe(1):
            got.extend(e.seq for e in batch)
            changed.set()
            changed = trio.Event()

    async def until(n):
        with trio.fail_after(60):
            while len(got) < n:
                await changed.wait()

    async with trio.open_nursery() as nursery:
        await nursery.start(follow)
        for i in range(20):
            await writer.append([TextChunk(message_id="m", text=str(i))])
        await until(20)
        listener = reader._listener
        assert listener is not None
        assert terminate_others(pg_server) >= 1  # every connection, the listener's included
        for i in range(20, 40):
            await writer.append([TextChunk(message_id="m", text=str(i))])  # writer reconnects
        await until(40)
        assert listener.reconnects >= 1
        await writer.aclose()
        await reader.aclose()
    assert got == list(range(1, 41))


async def test_an_append_whose_connection_is_killed_mid_statement_is_retried_once(
        pg_server, pg_url):
    notes: list[str] = []
    log = await PostgresEventLog.open(pg_url, listen=False, notices=notes.append)
    await log.append([TextChunk(message_id="m", text="0")])
    blocker = psycopg.connect(pg_url)  # holds the head row: the next append waits inside
    blocker.execute("SELECT last_seq FROM cap_head FOR UPDATE")
    result: list[int] = []

    async def append():
        result.append(await log.append([TextChunk(message_id="m", text="1")]))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(append)
        with trio.fail_after(30):
            while True:  # the append is waiting on the lock, inside its transaction
                waiting = blocker.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                ).fetchall()
                if waiting:
                    break
                await trio.sleep(0.05)
        with psycopg.connect(pg_server.url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (waiting[0][0],))
        blocker.rollback()
        blocker.close()
    assert result == [2]
    assert any("had not committed, so it was sent again" in n for n in notes)
    assert texts(log.read()) == ["0", "1"]
    await log.aclose()


async def test_a_reply_lost_after_commit_is_not_sent_twice(pg_url, monkeypatch):
    notes: list[str] = []
    log = await PostgresEventLog.open(pg_url, listen=False, notices=notes.append)
    await log.append([TextChunk(message_id="m", text="first")])
    writer = log._writer
    real = writer.append

    async def lose_the_reply(params, answer_within):
        await real(params, answer_within)  # committed, then the connection died before the reply
        writer.close()
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(writer, "append", lose_the_reply)
    assert await log.append([TextChunk(message_id="m", text="only once")]) == 2
    assert any("the batch had committed" in n for n in notes)
    assert texts(PostgresEventLog(pg_url, readonly=True).read()) == ["first", "only once"]
    assert await log.append([TextChunk(message_id="m", text="next")]) == 3  # a new connection
    await log.aclose()


async def test_a_server_restart_during_appends_loses_nothing_acknowledged(pg_server, pg_url):
    log = await PostgresEventLog.open(pg_url, listen=False, notices=lambda _: None)
    acked: list[int] = []
    restarted = threading.Event()

    def restart():
        pg_server.stop("immediate")  # a crash: recovery from the WAL at the next start
        pg_server.start()
        restarted.set()

    for i in range(30):
        acked.append(await log.append([TextChunk(message_id="m", text=str(i))]))
    thread = threading.Thread(target=restart)
    thread.start()
    i = 30
    while not restarted.is_set() or i < 60:
        acked.append(await log.append([TextChunk(message_id="m", text=str(i))]))
        i += 1
    await trio.to_thread.run_sync(thread.join)
    await log.aclose()
    envs = PostgresEventLog(pg_url, readonly=True).read()
    assert [e.seq for e in envs] == list(range(1, len(envs) + 1))
    assert acked == list(range(1, len(acked) + 1)) and len(envs) == len(acked)
    assert texts(envs) == [str(k) for k in range(len(acked))]


async def test_an_unreachable_database_fails_the_append_cleanly(pg_server, pg_url):
    log = await PostgresEventLog.open(pg_url, listen=False, reconnect_timeout=1.0,
                                      connect_timeout=1.0, notices=lambda _: None)
    await log.append([TextChunk(message_id="m", text="kept")])
    await trio.to_thread.run_sync(pg_server.stop)  # and it stays down past the window
    try:
        with pytest.raises(LogWriteError, match="unreachable"):
            await log.append([TextChunk(message_id="m", text="lost")])
        with pytest.raises(LogWriteError, match="no more appends"):
            await log.append([TextChunk(message_id="m", text="after")])
    finally:
        await trio.to_thread.run_sync(pg_server.start)
    await log.aclose()
    assert texts(PostgresEventLog(pg_url, readonly=True).read()) == ["kept"]


def test_the_schema_is_versioned_and_a_newer_one_is_refused(pg_url):
    from trio_cap.events.log.postgres_schema import current_version, migrate

    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert current_version(conn) is None
        assert migrate(conn) == list(range(1, LATEST + 1))
        assert migrate(conn) == []  # idempotent
        with pytest.raises(SchemaError, match="holds no trio-cap log"):
            PostgresEventLog(pg_url.replace("search_path%3D", "search_path%3Dnone_"),
                             readonly=True)
        conn.execute("INSERT INTO cap_schema (version) VALUES (%s)", (LATEST + 1,))
    with pytest.raises(SchemaError, match="newer than this trio-cap"):
        PostgresEventLog(pg_url)


async def test_a_cancelled_append_waits_for_its_outcome_and_the_log_goes_on(pg_url):
    log = await PostgresEventLog.open(pg_url, listen=False)
    await log.append([TextChunk(message_id="m", text="0")])
    blocker = psycopg.connect(pg_url)  # the append will wait inside its transaction
    blocker.execute("SELECT last_seq FROM cap_head FOR UPDATE")
    async def release() -> None:
        await trio.sleep(1.0)
        await trio.to_thread.run_sync(blocker.rollback)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(release)
        with trio.move_on_after(0.3) as scope:  # cancelled while the statement is in flight
            acked = await log.append([TextChunk(message_id="m", text="1")])
    # the cancel came while the database held the statement: the append waited for the
    # answer and reports it (never "cancelled" for a batch that may have committed)
    assert scope.cancel_called and acked == 2
    blocker.close()
    assert texts(PostgresEventLog(pg_url, readonly=True).read()) == ["0", "1"]
    assert await log.append([TextChunk(message_id="m", text="2")]) == 3
    await log.aclose()


async def test_queued_appends_commit_together_and_a_cancelled_one_is_not_stored(
        pg_url, monkeypatch):
    """Group commit: while one append waits on the database, 50 more queue up; they go in
    one call and one commit, each batch gets its own contiguous seqs.  One queued
    appender cancelled before its turn stores nothing and hears Cancelled."""
    from trio.testing import wait_all_tasks_blocked

    groups: list[int] = []
    send_many = PostgresEventLog._send_many

    async def spy(self, batches):
        groups.append(len(batches))
        return await send_many(self, batches)

    monkeypatch.setattr(PostgresEventLog, "_send_many", spy)
    log = await PostgresEventLog.open(pg_url, listen=False)
    await log.append([TextChunk(message_id="m", text="first")])  # the append connection is up
    blocker = psycopg.connect(pg_url)  # the next append waits inside the database
    blocker.execute("SELECT last_seq FROM cap_head FOR UPDATE")
    acked: dict[str, int] = {}
    cancelled = trio.CancelScope()
    heard: list[str] = []

    async def append(name: str, n: int) -> None:
        acked[name] = await log.append([TextChunk(message_id=name, text=f"{name}.{k}")
                                        for k in range(n)], stream=name)

    async def doomed() -> None:
        with cancelled:
            try:
                await append("doomed", 1)
            except trio.Cancelled:
                heard.append("cancelled")
                raise

    async with trio.open_nursery() as nursery:
        nursery.start_soon(append, "in-flight", 1)
        await wait_all_tasks_blocked()  # it waits on the database's answer
        for i in range(50):
            nursery.start_soon(append, f"q{i}", 1 + i % 3)
        nursery.start_soon(doomed)
        await wait_all_tasks_blocked()  # every other appender is queued behind it
        cancelled.cancel()
        await wait_all_tasks_blocked()
        await trio.to_thread.run_sync(blocker.rollback)
    blocker.close()
    assert heard == ["cancelled"] and "doomed" not in acked
    assert groups == [50]  # the 50 queued appends: one call, one commit
    stored = PostgresEventLog(pg_url, readonly=True).read()
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
    assert "doomed" not in {e.stream for e in stored}
    order = [e.stream for e in stored[2:]]
    runs = list(dict.fromkeys(order))  # each batch's events contiguous, every batch once
    assert sorted(runs) == sorted(f"q{i}" for i in range(50))
    assert len(order) == sum(1 + i % 3 for i in range(50))
    for name, last in acked.items():
        mine = [e for e in stored if e.stream == name]
        assert mine[-1].seq == last and [e.event.text for e in mine] == [
            f"{name}.{k}" for k in range(len(mine))]
    assert log.read() == stored  # this process sees exactly what was stored
    await log.aclose()


@pytest.mark.parametrize("committed", [True, False])
async def test_a_group_whose_reply_is_lost_is_resolved_batch_by_batch(pg_url, monkeypatch,
                                                                      committed):
    """The connection dies during a group's call, before or after its commit: each batch is
    looked up by its own token and sent again only if it is not there — stored once, each."""
    from trio.testing import wait_all_tasks_blocked

    from trio_cap.events.log.postgres_writer import MANY

    notes: list[str] = []
    log = await PostgresEventLog.open(pg_url, listen=False, notices=notes.append)
    await log.append([TextChunk(message_id="m", text="first")])
    writer = log._writer
    real = writer.append

    async def lose_the_group(params, answer_within, name=b"cap_append"):
        if name != MANY:
            return await real(params, answer_within, name)
        if committed:
            await real(params, answer_within, name)
        writer.close()
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(writer, "append", lose_the_group)
    blocker = psycopg.connect(pg_url)
    blocker.execute("SELECT last_seq FROM cap_head FOR UPDATE")
    acked: dict[str, int] = {}

    async def append(name: str) -> None:
        acked[name] = await log.append([TextChunk(message_id=name, text=name)], stream=name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(append, "in-flight")
        await wait_all_tasks_blocked()
        for i in range(10):
            nursery.start_soon(append, f"q{i}")
        await wait_all_tasks_blocked()
        await trio.to_thread.run_sync(blocker.rollback)
    blocker.close()
    stored = PostgresEventLog(pg_url, readonly=True).read()
    assert [e.seq for e in stored] == list(range(1, 13))
    assert sorted(texts(stored)) == sorted(["first", "in-flight", *(f"q{i}" for i in range(10))])
    assert all(stored[last - 1].stream == name for name, last in acked.items())
    said = "the batch had committed" if committed else "had not committed, so it was sent again"
    assert sum(said in n for n in notes) == 10
    await log.aclose()
