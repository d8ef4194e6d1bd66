"""``python -m bench replay``: ``cap replay --check`` speed on a 1M-event log, and --record's cost.

The log is built from real recorded sessions (inproc and stream-json-shaped:
a scripted multi-turn session with frames recorded), cloned under new
session ids until it holds 1,000,000 events, and written as a file log.
Figures (CPU time, medians of interleaved runs):

* ``--check`` (read + group + replay every session through fresh machines
  + compare every event) against the projection fold ``cap replay`` does
  (``events/replay.py``) over the same log: target ≥ 300k events/s; its two
  phases (open + read + group, then the machines and the comparing) timed
  inside the same runs; both with the collector as ``cap`` sets it
  (``tune_gc``);
* the cost of recording: N in-process sessions with ``--record off`` and
  ``frames``, same work, events/s and run time;
* the cost of recording a PTY: the settle machine fed the shared corpus's TUI
  redraw stream in 4 KiB reads, its events appended to a log, without and with
  the ``frame.in`` each step logs (``--record frames`` on a PTY).
"""

from __future__ import annotations

import gc
import os
import tempfile
import time
from statistics import median

import msgspec
import trio

from bench.common import interleaved_rates, row
from trio_cap import tune_gc
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.actors.replay.check import check_sessions, group_sessions
from trio_cap.events.clock import StepClock
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import SessionCreated
from trio_cap.events.log import FileEventLog, MemoryEventLog
from trio_cap.events.log.records import MAGIC, encode_into
from trio_cap.events.replay import replay

TASK = "plan: a; b\nthink: first\nwrite f.txt: hello\nask: pick [x|y]\nsome words here"
TURNS = (TASK, "write g.txt: more text", "run: ls", "fail: rate_limit", "plain words")


async def _one_session(cwd: str, record: str, log: MemoryEventLog | None = None) -> list:
    log = log or MemoryEventLog(StepClock())
    async with open_orchestrator(log, clock=StepClock(), ids=SequentialIds()) as orch:
        orch.record = record  # type: ignore[assignment]
        session = await orch.start_session(cwd=cwd, permissions="allow")
        for text in TURNS:
            await session.run_turn(text)
        await session.close()
    return log.read()


def _runs(template: list[Envelope]) -> list[tuple[int | None, list]]:
    """The template's appends: (cause, events) for each run of one cause, as the actor
    appends them (one stream: the session's)."""
    runs: list[tuple[int | None, list]] = []
    for env in template:
        if runs and runs[-1][0] == env.cause and len(runs[-1][1]) <= 4000:
            runs[-1][1].append(env.event)
        else:
            runs.append((env.cause, [env.event]))
    return runs


def _write(path: str, template: list[Envelope], total: int) -> int:
    """The template session again and again under new session ids (seqs and causes
    shifted) until ``total`` events, as a file log: one record per append, as
    FileEventLog writes it, encoded straight into the file (250,000 awaited appends took
    17–23 s of the bench; the bytes are the same but for ``at``).  The check opens it as
    any log: a record it could not read would show."""
    runs = _runs(template)
    base = template[0].seq - 1
    at = time.time()
    seq = 0
    buf = bytearray(MAGIC)
    with open(path, "wb") as out:
        for k in range(total // len(template)):
            sid = f"sess-b{k}"
            shift = seq - base
            for cause, events in runs:
                if type(events[0]) is SessionCreated:
                    events = [msgspec.structs.replace(events[0], session_id=sid), *events[1:]]
                cause = cause + shift if cause is not None else None
                encode_into([Envelope(seq + 1 + i, at, sid, cause, ev)
                             for i, ev in enumerate(events)], buf)
                seq += len(events)
            if len(buf) >= 1 << 22:
                out.write(buf)
                buf.clear()
        out.write(buf)
    return seq


def _windows(log: FileEventLog, size: int = 65536):
    seq, end = 1, log.last_seq
    while seq <= end:
        yield log.read(seq, until=min(end, seq + size - 1))
        seq += size


def run(quick: bool = False) -> None:
    total = 100_000 if quick else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        template = [e for e in trio.run(_one_session, tmp, "frames") if e.stream]
        path = os.path.join(tmp, "big.caplog")
        started = time.perf_counter()
        events = _write(path, template, total)
        print(f"replay: a log of {events:,} events ({events // len(template):,} sessions of "
              f"{len(template)} recorded events) written in {time.perf_counter() - started:.1f} s")

        phases: dict[str, list[float]] = {"read": [], "machines": []}

        def check() -> int:
            """End to end, as ``cap replay --check`` runs it; its two phases timed on the way
            (the "of which" rows: they add up to this run, and cost no runs of their own)."""
            started = time.process_time()
            log = FileEventLog(path, readonly=True)
            try:
                streams = group_sessions(_windows(log))
            finally:
                log.close()
            grouped = time.process_time()
            result = check_sessions(streams)
            phases["machines"].append(time.process_time() - grouped)
            phases["read"].append(grouped - started)
            assert result.events == events, (result.events, events)
            return result.events

        def fold() -> int:
            log = FileEventLog(path, readonly=True)
            try:
                return replay(log).last_seq
            finally:
                log.close()

        # as every cap command runs (cap replay and cap replay --check included): the
        # collector tuned by trio_cap.tune_gc(), put back for the rows that follow
        before = tune_gc()
        try:
            rates = interleaved_rates({"check": check, "fold": fold}, repeat=2 if quick else 3)
        finally:
            gc.set_threshold(*before)
        print("  cap replay --check (open, read, group, re-run every session, compare every "
              "event)")
        row("replay --check, end to end", rates["check"], rates["fold"],
            "× the projection fold; target ≥ 300,000/s")
        row("projection fold (cap replay, all projections)", rates["fold"])
        row("  of which: the file log's open + read + grouping", events / median(phases["read"]))
        row("  of which: re-running the machines, comparing", events / median(phases["machines"]))

        sessions = 20 if quick else 40

        def sessions_with(record: str):
            async def many() -> int:
                log = MemoryEventLog(StepClock())
                for _ in range(sessions):
                    await _one_session(tmp, record, log)
                return sessions
            return lambda: trio.run(many)

        cost = interleaved_rates({"off": sessions_with("off"), "frames": sessions_with("frames")},
                                 repeat=3)
        print(f"  recording cost: {sessions} in-process sessions of {len(TURNS)} turns each "
              "(sessions/s)")
        row("--record off", cost["off"])
        row("--record frames", cost["frames"], cost["off"])
    _pty_recording(quick)


def _pty_recording(quick: bool) -> None:
    from bench.corpus import CorpusMissing
    from bench.pty_bench import chunks, corpus
    from trio_cap.actors.bindings.pty.machine import PtyMachine
    from trio_cap.actors.bindings.pty.machine_rules import PtySettings
    from trio_cap.actors.recording import Recorder
    from trio_cap.events.kinds import Event

    try:
        reads = chunks(corpus(300 if quick else 2000)[0])
    except CorpusMissing as exc:
        print(f"  PTY recording cost: skipped ({exc})")
        return

    def steps(record: bool):
        async def feed() -> int:
            log = MemoryEventLog(StepClock())
            machine = PtyMachine(PtySettings(cols=120, rows=40), new_id=str, now=0.0)
            recorder = Recorder("pty", now=lambda: 0.0)
            now = 0.0
            for data in reads:
                now += 0.01
                events = [o for o in machine.receive_data(data, now) if isinstance(o, Event)]
                if record:
                    events.insert(0, recorder.step_in(now, data))
                if events:
                    await log.append(events, stream="s")
            return len(reads)
        return lambda: trio.run(feed)

    cost = interleaved_rates({"off": steps(False), "frames": steps(True)}, repeat=3)
    print(f"  PTY recording cost: the settle machine on {len(reads)} reads of a TUI redraw "
          "stream, events logged (reads/s)")
    row("--record off", cost["off"])
    row("--record frames (a frame.in per read)", cost["frames"], cost["off"])
