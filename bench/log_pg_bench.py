"""``python -m bench log --backend postgres``: the PostgreSQL log against ``eventsourcing``.

One throwaway server (fsync on, synchronous commit: an append is durable when
acknowledged) holds both: trio-cap's ``PostgresEventLog`` and the
``eventsourcing`` library's ``PostgresApplicationRecorder`` (its global-order
recorder, the peer of our global seq), storing the same events — the same
msgpack bytes as payload — in batches of 1, 100 and 1,000, one transaction
per batch, each acknowledged before the next, runs interleaved, medians.  Beside
each size, in the same rounds: the commit floor — the same rows as one bare INSERT
per commit into a table of the log's shape (prebuilt binary arrays, no numbering,
token or NOTIFY) — what the server can store at this durability; a ratio whose
target lies above it cannot be reached by the append path, only by storing less.

Also: subscriber latency (append called → a subscriber in another process,
as a dashboard or ``cap log show --follow`` would be, has the event through
LISTEN/NOTIFY), p50/p99; and replay (all
events read back and folded into the projections) against the peer's
``select_notifications`` reading the same rows.
"""

from __future__ import annotations

import statistics
import time
import uuid

import msgspec
import trio

from bench.log_bench import sample_events
from bench.pg_server import PgServer
from trio_cap.events.kinds import TextChunk
from trio_cap.events.log.postgres import PostgresEventLog
from trio_cap.events.replay import replay

BATCHES = (1, 100, 1000)
ROUNDS = 3
TARGET_RATIO = 5.0
TARGET_P99_MS = 20.0


def _sizes(quick: bool) -> dict[int, int]:
    return {1: 300, 100: 5000, 1000: 20000} if quick else {1: 1500, 100: 30000, 1000: 100000}


def _ours(url: str, events: list, batch: int) -> float:
    async def main() -> float:
        log = await PostgresEventLog.open(url, listen=False)
        start = time.perf_counter()
        for i in range(0, len(events), batch):
            await log.append(events[i : i + batch], stream="sess-bench", cause=1)
        took = time.perf_counter() - start
        await log.aclose()
        return len(events) / took

    return trio.run(main)


def _peer_recorder(server: PgServer, schema: str):
    from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore

    datastore = PostgresDatastore("postgres", "127.0.0.1", server.port, "postgres", "",
                                  schema=schema)
    recorder = PostgresApplicationRecorder(datastore, events_table_name="stored_events")
    recorder.create_table()
    return datastore, recorder


def _peer(server: PgServer, schema: str, events: list, batch: int) -> float:
    from eventsourcing.persistence import StoredEvent

    datastore, recorder = _peer_recorder(server, schema)
    encode = msgspec.msgpack.encode
    stored = [StoredEvent(originator_id=uuid.uuid4(), originator_version=1,
                          topic=type(ev).__name__, state=encode(ev)) for ev in events]
    start = time.perf_counter()
    for i in range(0, len(stored), batch):
        recorder.insert_events(stored[i : i + batch])
    took = time.perf_counter() - start
    datastore.close()
    return len(events) / took


_READER = """
import sys, time, trio
from trio_cap.events.log.postgres import PostgresEventLog
url, n = sys.argv[1], int(sys.argv[2])
async def main():
    log = await PostgresEventLog.open(url, listen=True)
    got = []
    print("ready", flush=True)
    async for batch in log.subscribe(log.last_seq + 1):
        now = time.monotonic()
        got.extend((env.seq, now) for env in batch)
        if len(got) >= n:
            break
    await log.aclose()
    print(" ".join(f"{seq}:{at:.6f}" for seq, at in got), flush=True)
trio.run(main)
"""


_FLOOR_TABLE = ("CREATE TABLE floor (seq bigint PRIMARY KEY, stream text NOT NULL, kind text NOT "
                "NULL, at double precision NOT NULL, cause bigint, payload bytea NOT NULL); "
                "CREATE INDEX ON floor (stream, seq)")
_FLOOR_INSERT = (b"INSERT INTO floor SELECT $1 + u.i, 'sess-bench', u.k, 0, 1, u.p "
                 b"FROM unnest($2::text[], $3::bytea[]) WITH ORDINALITY AS u(k, p, i)")


def _floor(url: str, events: list, batch: int) -> float:
    """Events/s of the cheapest durable write of the same rows: each batch one INSERT from
    prebuilt binary arrays into a table of the log's shape (seq key, (stream, seq) index),
    autocommit — no numbering, no token, no NOTIFY, no Python per batch.  No log that stores
    a row per event and acknowledges each batch before the next can beat it on this server
    at this durability."""
    import psycopg
    from psycopg import pq

    from trio_cap.events.log.postgres_rows import encode_batch
    from trio_cap.events.log.postgres_writer import _BYTEA_OID, _TEXT_OID, _framed, _int8

    params = []
    for i in range(0, len(events), batch):
        part = events[i : i + batch]
        kinds, payloads = encode_batch(part)
        params.append([_int8.pack(i), _framed(_TEXT_OID, len(part), kinds),
                       _framed(_BYTEA_OID, len(part), payloads)])
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(_FLOOR_TABLE)
        pg = conn.pgconn
        start = time.perf_counter()
        for p in params:
            if pg.exec_params(_FLOOR_INSERT, p, [20, 1009, 1001], [1, 1, 1]).status != \
                    pq.ExecStatus.COMMAND_OK:
                raise RuntimeError(pg.error_message.decode(errors="replace"))
        return len(events) / (time.perf_counter() - start)


def _percentiles(values: list[float]) -> tuple[float, float]:
    values = sorted(values)
    return (values[len(values) // 2] * 1000,
            values[min(len(values) - 1, int(len(values) * 0.99))] * 1000)


def _latency(url: str, n: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """A subscriber in another process has the event: (p50, p99) ms counted from the
    ``append`` call, and from the moment the append returned (committed).

    Both processes read CLOCK_MONOTONIC (``time.monotonic``), one clock per machine."""
    import subprocess
    import sys

    PostgresEventLog(url).close_sync()  # the schema exists before the reader opens it
    reader = subprocess.Popen([sys.executable, "-c", _READER, url, str(n)],
                              stdout=subprocess.PIPE, text=True)
    assert reader.stdout is not None and reader.stdout.readline().strip() == "ready"
    called: dict[int, float] = {}
    acked: dict[int, float] = {}

    async def main() -> None:
        writer = await PostgresEventLog.open(url, listen=False)
        for _ in range(n):
            start = time.monotonic()
            seq = await writer.append([TextChunk(message_id="lat", text="x")],
                                      stream="sess-lat")
            acked[seq] = time.monotonic()
            called[seq] = start
            await trio.sleep(0.002)  # a live session's pace, not a flood
        await writer.aclose()

    trio.run(main)
    out, _ = reader.communicate(timeout=120)
    seen = {int(seq): float(at) for seq, at in (pair.split(":") for pair in out.split())}
    from_call = [seen[seq] - called[seq] for seq in seen]
    from_ack = [max(0.0, seen[seq] - acked[seq]) for seq in seen]
    return _percentiles(from_call), _percentiles(from_ack)


def _replay_ours(url: str) -> float:
    log = PostgresEventLog(url, readonly=True)
    start = time.perf_counter()
    state = replay(log)
    took = time.perf_counter() - start
    log.close()
    return state.last_seq / took


def _replay_peer(server: PgServer, schema: str) -> float:
    datastore, recorder = _peer_recorder(server, schema)
    start = time.perf_counter()
    count, nxt = 0, 1
    while True:
        page = recorder.select_notifications(nxt, 4096)
        if not page:
            break
        count += len(page)
        nxt = page[-1].id + 1
    took = time.perf_counter() - start
    datastore.close()
    return count / took


def run(quick: bool = False) -> None:
    events_all = sample_events(max(_sizes(quick).values()))
    with PgServer() as server:
        schemas = iter(f"b{i}" for i in range(10_000))

        def fresh() -> str:
            name = next(schemas)
            server.psql(f"CREATE SCHEMA {name}")
            return name

        print("PostgreSQL log (throwaway server on 127.0.0.1, fsync on; events/s, median of "
              f"{ROUNDS} interleaved runs; peer: eventsourcing PostgresApplicationRecorder)")
        print(f"{'batch':>6} {'events':>8} {'trio-cap':>12} {'eventsourcing':>14} {'ratio':>7}")
        last_url = None
        for batch, n in _sizes(quick).items():
            events = events_all[:n]
            ours, peer, floors = [], [], []
            for _ in range(ROUNDS):
                last_url = server.url_for(fresh())
                ours.append(_ours(last_url, events, batch))
                peer.append(_peer(server, fresh(), events, batch))
                floors.append(_floor(server.url_for(fresh()), events, batch))
            o, p, floor = (statistics.median(x) for x in (ours, peer, floors))
            verdict = "ok" if o / p >= TARGET_RATIO else f"below the {TARGET_RATIO:g}x target"
            print(f"{batch:>6} {n:>8} {o:>12,.0f} {p:>14,.0f} {o / p:>6.1f}x  {verdict}")
            above = ": above the floor" if TARGET_RATIO * p > floor else ""
            print(f"{'':>6} {'':>8} commit floor (the same rows, one bare INSERT per commit): "
                  f"{floor:,.0f}/s, trio-cap at {o / floor:.0%} of it ({TARGET_RATIO:g}x the "
                  f"peer would be {TARGET_RATIO * p:,.0f}/s{above})")
        (p50, p99), (a50, a99) = _latency(server.url_for(fresh()), 200 if quick else 1000)
        verdict = "ok" if p99 < TARGET_P99_MS else f"above the {TARGET_P99_MS:g} ms target"
        print(f"subscriber latency (a subscriber in another process has the event): from the "
              f"append call p50 {p50:.2f} ms, p99 {p99:.2f} ms  {verdict}; from the commit "
              f"acknowledged p50 {a50:.2f} ms, p99 {a99:.2f} ms")
        # replay what the last batch-1000 run stored, and the peer's read of the same count
        peer_schema = fresh()
        _peer(server, peer_schema, events_all[: _sizes(quick)[1000]], 1000)
        r_ours = statistics.median(_replay_ours(last_url) for _ in range(ROUNDS))
        r_peer = statistics.median(_replay_peer(server, peer_schema) for _ in range(ROUNDS))
        print(f"replay: trio-cap read + fold into projections {r_ours:,.0f} events/s; "
              f"eventsourcing select_notifications (read only, no decode) {r_peer:,.0f} "
              f"events/s; ratio {r_ours / r_peer:.1f}x")
