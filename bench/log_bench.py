"""Event log figures: append per fsync policy, replay, and events through one session actor.

Peers measured in the same run, on the same events: ``sqlite3`` (the stdlib,
WAL, one transaction per batch — what an embedded store usually is), the
``eventsourcing`` library's SQLite recorder (what a Python team would pick for
an event store), JSON lines (``json.dumps`` + ``write``), and a raw
length + CRC32 + msgpack write of the same envelopes with nothing else — the
practical limit of any Python file log.  Ratios are trio-cap ÷ peer.
Subscriber fan-out: N subscribers tail the log from seq 1 while it is
appended; events/s delivered to all of them together.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from pathlib import Path

import msgspec
import trio

from bench.common import median_rate, row
from trio_cap.events.kinds import AnyEvent, TextChunk, ToolCallStart, Usage
from trio_cap.events.log import FileEventLog, MemoryEventLog
from trio_cap.events.projections import fold, initial_state

BATCH = 256


def sample_events(n: int) -> list:
    """A realistic mix: mostly text chunks, some tool calls and usage reports."""
    out = []
    for i in range(n):
        if i % 50 == 49:
            out.append(Usage(input_tokens=120, output_tokens=40, cost_usd_estimate=0.0012))
        elif i % 10 == 9:
            out.append(ToolCallStart(call_id=f"call_{i}", name="Bash", input={"command": "ls"}))
        else:
            out.append(TextChunk(message_id=f"msg_{i // 100}", text="streamed words of a reply "))
    return out


async def _append_all(log, events) -> None:
    for i in range(0, len(events), BATCH):
        await log.append(events[i : i + BATCH], stream="sess-bench", cause=1)
    await log.aclose()


def bench_append(tmp: Path, events: list) -> dict[str, float]:
    figures = {}
    figures["memory"] = median_rate(lambda: (trio.run(_append_all, MemoryEventLog(), events),
                                             len(events))[1])
    for policy in ("always", "batch", "never"):
        def once(policy=policy) -> int:
            path = tmp / f"append-{policy}.caplog"
            path.unlink(missing_ok=True)
            trio.run(_append_all, FileEventLog(path, fsync=policy), events)
            return len(events)

        figures[policy] = median_rate(once)
    return figures


def bench_sqlite(tmp: Path, events: list, synchronous: str = "NORMAL") -> float:
    """sqlite3 in WAL mode; NORMAL syncs at checkpoints (like our batch), FULL on every commit."""
    encode = msgspec.json.encode

    def once() -> int:
        path = tmp / "peer.sqlite"
        path.unlink(missing_ok=True)
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        db = sqlite3.connect(path)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={synchronous}")
        db.execute("CREATE TABLE ev (seq INTEGER PRIMARY KEY, at REAL, stream TEXT, body BLOB)")
        seq = 0
        for i in range(0, len(events), BATCH):
            rows = []
            for ev in events[i : i + BATCH]:
                seq += 1
                rows.append((seq, 1.0, "sess-bench", encode(ev)))
            with db:
                db.executemany("INSERT INTO ev VALUES (?, ?, ?, ?)", rows)
        db.close()
        return len(events)

    return median_rate(once)


def bench_eventsourcing_sqlite(tmp: Path, events: list) -> float:
    """eventsourcing's SQLiteApplicationRecorder (global order, like our seq), the same
    msgpack bytes as each stored event's state, one insert_events call per batch."""
    import uuid

    from eventsourcing.persistence import StoredEvent
    from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

    bodies = [msgspec.msgpack.encode(ev) for ev in events]
    originator = uuid.uuid4()

    def once() -> int:
        path = tmp / "es.sqlite"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        recorder = SQLiteApplicationRecorder(SQLiteDatastore(str(path)))
        recorder.create_table()
        version = 0
        for i in range(0, len(bodies), BATCH):
            batch = []
            for body in bodies[i : i + BATCH]:
                version += 1
                batch.append(StoredEvent(originator_id=originator, originator_version=version,
                                         topic="cap", state=body))
            recorder.insert_events(batch)
        return len(bodies)

    return median_rate(once)


def bench_raw_write(tmp: Path, events: list) -> float:
    """The floor of any file log: len + CRC32 + msgpack per batch, one write, fsync per MiB
    (what fsync=batch does), no index, no seqs handed out, no reader."""
    import zlib

    encode = msgspec.msgpack.Encoder().encode
    envs = [[i + 1, 1.0, "sess-bench", 1, ev] for i, ev in enumerate(events)]

    def once() -> int:
        with open(tmp / "raw.bin", "wb") as f:
            since = 0
            for i in range(0, len(envs), BATCH):
                body = encode(envs[i : i + BATCH])
                f.write(len(body).to_bytes(4, "little") + zlib.crc32(body).to_bytes(4, "little")
                        + body)
                since += len(body)
                if since >= 1 << 20:
                    f.flush()
                    os.fsync(f.fileno())
                    since = 0
            f.flush()
            os.fsync(f.fileno())
        return len(envs)

    return median_rate(once)


async def _fan_out(log, events: list, subscribers: int) -> None:
    async def tail() -> None:
        async for batch in log.subscribe(1):
            if batch[-1].seq >= len(events):
                return

    async with trio.open_nursery() as nursery:
        for _ in range(subscribers):
            nursery.start_soon(tail)
        for i in range(0, len(events), BATCH):
            await log.append(events[i : i + BATCH], stream=f"sess-{i % 7}", cause=1)
            await trio.lowlevel.checkpoint()
    await log.aclose()


def bench_fan_out(tmp: Path, events: list, subscribers: int) -> tuple[float, float]:
    """Events/s delivered to every subscriber together (appended once, read N times)."""
    def memory() -> int:
        trio.run(_fan_out, MemoryEventLog(), events, subscribers)
        return len(events) * subscribers

    def file() -> int:
        path = tmp / "fan.caplog"
        path.unlink(missing_ok=True)
        trio.run(_fan_out, FileEventLog(path, fsync="batch"), events, subscribers)
        return len(events) * subscribers

    return median_rate(memory), median_rate(file)


def bench_jsonl(tmp: Path, events: list) -> float:
    dicts = [msgspec.to_builtins(ev) for ev in events]

    def once() -> int:
        with open(tmp / "peer.jsonl", "w") as f:
            for i in range(0, len(dicts), BATCH):
                f.write("".join(json.dumps({"seq": i, "event": d}) + "\n"
                                for d in dicts[i : i + BATCH]))
        return len(dicts)

    return median_rate(once)


def bench_replay(tmp: Path, events: list) -> tuple[float, float, float]:
    path = tmp / "replay.caplog"
    path.unlink(missing_ok=True)
    trio.run(_append_all, FileEventLog(path, fsync="never"), events)

    def decode_only() -> int:
        return len(FileEventLog(path, readonly=True).read())

    def decode_and_fold() -> int:
        log = FileEventLog(path, readonly=True)
        state = initial_state()
        fold(state, log.read())
        return state.last_seq

    sqlite_path = tmp / "peer.sqlite"

    def sqlite_read() -> int:
        db = sqlite3.connect(sqlite_path)
        decoder = msgspec.json.Decoder(AnyEvent)  # typed, like the file log's decode
        n = sum(1 for (body,) in db.execute("SELECT body FROM ev ORDER BY seq")
                if decoder.decode(body))
        db.close()
        return n

    return median_rate(decode_only), median_rate(decode_and_fold), median_rate(sqlite_read)


async def _through_session(n: int, log_factory) -> int:
    from trio_cap.actors.agent.script import parse_script
    from trio_cap.actors.orchestrator import open_orchestrator

    script = parse_script({"turn": [{"steps": [{"burst": n, "batch": 500}]}]})
    log = log_factory()
    async with log, open_orchestrator(log) as orch:
        session = await orch.start_session(cwd=tempfile.gettempdir(), script=script)
        await session.run_turn("flood")
        await orch.wait_until(lambda s: s.last_seq == log.last_seq)
        await session.close()
    return n


def bench_session(tmp: Path, n: int) -> tuple[float, float]:
    memory = median_rate(lambda: trio.run(_through_session, n, MemoryEventLog))

    def with_file() -> int:
        path = tmp / "session.caplog"
        path.unlink(missing_ok=True)
        return trio.run(_through_session, n, lambda: FileEventLog(path, fsync="batch"))

    return memory, median_rate(with_file)


def run(quick: bool = False) -> None:
    n = 50_000 if quick else 300_000
    events = sample_events(n)
    print(f"log: {n:,} events, appended in batches of {BATCH}; medians of 3 runs; "
          f"ratio = trio-cap ÷ peer")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmpdir:
        tmp = Path(tmpdir)
        trio.run(_append_all, FileEventLog(tmp / "size.caplog", fsync="never"), events)
        print(f"  file size: {(tmp / 'size.caplog').stat().st_size / n:.1f} bytes per event")
        sqlite_full = bench_sqlite(tmp, events[: len(events) // 10], "FULL")
        sqlite_rate = bench_sqlite(tmp, events)
        jsonl_rate = bench_jsonl(tmp, events)
        es_rate = bench_eventsourcing_sqlite(tmp, events)
        raw_rate = bench_raw_write(tmp, events)
        appends = bench_append(tmp, events)
        print("append")
        row("peer: sqlite3 WAL synchronous=FULL, a commit per batch", sqlite_full)
        row("peer: sqlite3 WAL synchronous=NORMAL, a commit per batch", sqlite_rate)
        row("peer: json.dumps lines + write", jsonl_rate)
        row("peer: eventsourcing SQLite recorder, call per batch", es_rate)
        row("limit: raw len+crc32+msgpack, fsync per MiB", raw_rate)
        row("memory log", appends["memory"], sqlite_rate, "vs sqlite NORMAL")
        row("file log, fsync=always", appends["always"], sqlite_full, "vs sqlite FULL")
        row("file log, fsync=batch", appends["batch"], sqlite_rate,
            "vs sqlite NORMAL  (target ≥ 300,000)")
        row("file log, fsync=never", appends["never"], jsonl_rate, "vs json lines")
        row("file log, fsync=batch", appends["batch"], es_rate, "vs eventsourcing SQLite")
        row("file log, fsync=batch", appends["batch"], raw_rate, "of the raw-write limit")
        fan = events[: len(events) // 5]
        print(f"subscriber fan-out ({len(fan):,} events appended, every subscriber reads all)")
        for subscribers in (1, 10, 100):
            memory, file = bench_fan_out(tmp, fan, subscribers)
            row(f"{subscribers:>3} subscribers, memory log, delivered/s", memory)
            row(f"{subscribers:>3} subscribers, file log fsync=batch", file)
        decode, folded, sqlite_read = bench_replay(tmp, events)
        print("replay (read + CRC + decode into typed events)")
        row("peer: sqlite3 SELECT + json decode", sqlite_read)
        row("file log read", decode, sqlite_read, "vs sqlite  (target ≥ 300,000)")
        row("file log read + fold every projection", folded, sqlite_read, "vs sqlite")
        burst = n // 2
        memory, file = bench_session(tmp, burst)
        print(f"end to end: inproc brain → session actor → log → live projections ({burst:,})")
        row("session actor, memory log", memory)
        row("session actor, file log (batch)", file, None, "(target ≥ 50,000)")
