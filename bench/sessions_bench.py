"""Sessions at scale (issue 16): N concurrent in-process sessions, one short turn each.

Measured through the embedding API with the built-in agent over ``inproc``,
resolved once (no probe per session), so the figures are the orchestrator's
and the log's own cost.  Latency is append → subscriber delivery: the
envelope's ``at`` comes from the system clock at append, and a subscriber on
the whole log from seq 1 reads the same clock on delivery.  Figures are
printed next to the issue's targets, never asserted.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import trio

from trio_cap import open_orchestrator
from trio_cap.actors.orchestrator import resolve

ROOT = Path(__file__).resolve().parent.parent


def rss_kb() -> int:
    """Resident set size of this process, from /proc (0 where there is none)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pct(sorted_ms: list[float], q: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))] if sorted_ms else 0.0


async def measure(n: int, log: str | None = None) -> dict[str, float]:
    """Start ``n`` sessions, run one turn in each, close them; the figures.  ``log``: a
    ``postgresql://`` URL (default: the memory log)."""
    agent = await resolve("cap-agent")
    lat: list[float] = []
    errors = 0
    async with open_orchestrator(log) as orch:
        first = orch.log.last_seq + 1  # this run's events only (a shared database may hold
        # an earlier run's, whose age is not this run's latency)

        async def follow() -> None:
            async for batch in orch.log.subscribe(first):
                now = time.time()
                lat.extend((now - env.at) * 1000 for env in batch)

        async with trio.open_nursery() as outer:
            outer.start_soon(follow)
            rss0 = rss_kb()
            t0 = time.perf_counter()
            sessions = []

            async def start() -> None:
                sessions.append(await orch.start_session(
                    agent, "inproc", cwd=os.getcwd(), permissions="allow"))

            async with trio.open_nursery() as nursery:
                for _ in range(n):
                    nursery.start_soon(start)
            started = time.perf_counter() - t0
            rss1 = rss_kb()  # every session alive, none has run yet

            async def turn(s) -> None:  # type: ignore[no-untyped-def]
                nonlocal errors
                result = await s.run_turn("hello")
                if result.stop_reason is None:
                    errors += 1

            async with trio.open_nursery() as nursery:
                for s in sessions:
                    nursery.start_soon(turn, s)
            async with trio.open_nursery() as nursery:
                for s in sessions:
                    nursery.start_soon(s.close)
            wall = time.perf_counter() - t0
            await orch.caught_up()
            outer.cancel_scope.cancel()
    lat.sort()
    return {"n": n, "wall_s": wall, "start_ms": started / n * 1000,
            "p50_ms": _pct(lat, 0.5), "p99_ms": _pct(lat, 0.99),
            "rss_kb": (rss1 - rss0) / n, "events": len(lat), "errors": errors}


def _mark(ok: bool) -> str:
    return "pass" if ok else "MISS"


def measure_in_fresh_process(n: int, gc_mode: str, log: str | None = None) -> dict[str, float]:
    """One size in its own interpreter, so neither variant inherits the other's heap or
    collector settings; ``tuned`` is what every ``cap`` command sets (``tune_gc``)."""
    code = ("import json, trio; from bench.sessions_bench import measure; "
            + ("from trio_cap import tune_gc; tune_gc(); " if gc_mode == "tuned" else "")
            + f"print(json.dumps(trio.run(measure, {n}, {log!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> list[dict[str, float]]:
    """Print the figures for N = 100, 1,000 (and 10,000 unless ``quick``) with the
    collector as ``cap`` sets it, on the memory log and on the PostgreSQL log, and for
    N = 100 and 1,000 as CPython sets it (its
    10,000 run alone took longer than the 2 minutes a bench has: the comparison it
    gives is already there at 1,000)."""
    print(f"sessions — {os.cpu_count()} cores, Python {platform.python_version()}"
          f" ({platform.python_implementation()})")
    sizes = [100, 1000] if quick else [100, 1000, 10_000]
    targets = {1000: 20.0, 10_000: 100.0}
    rows: list[dict[str, float]] = []
    for gc_mode in ("tuned", "default"):
        print(f" gc {gc_mode}" + (" (as every cap command sets it: trio_cap.tune_gc())"
                                  if gc_mode == "tuned" else " (CPython's thresholds)"))
        mode_rows = [measure_in_fresh_process(n, gc_mode) for n in sizes
                     if gc_mode == "tuned" or n <= 1000]
        for r in mode_rows:
            r["gc"] = gc_mode  # type: ignore[assignment]
            n = int(r["n"])
            p99 = f"p99 {r['p99_ms']:8.2f} ms"
            if n in targets:
                p99 += f" (target < {targets[n]:.0f}: {_mark(r['p99_ms'] < targets[n])})"
            print(f"  N={n:>6,}  wall {r['wall_s']:7.2f} s  start {r['start_ms']:6.3f} ms/session"
                  f"  p50 {r['p50_ms']:8.2f} ms  {p99}  RSS {r['rss_kb']:5.1f} KB/session"
                  f" (target < 40: {_mark(r['rss_kb'] < 40)})  events {int(r['events']):,}"
                  f"  errors {int(r['errors'])}")
        first, last = mode_rows[0]["start_ms"], mode_rows[-1]["start_ms"]
        flat = (last - first) / first * 100 if first else 0.0
        print(f"  start cost {int(mode_rows[0]['n']):,} → {int(mode_rows[-1]['n']):,}:"
              f" {flat:+.0f} % (target within 20 %: {_mark(abs(flat) <= 20)})")
        rows.extend(mode_rows)
    rows.extend(_on_postgres([100] if quick else sizes, targets))
    return rows


def _on_postgres(sizes: list[int], targets: dict[int, float]) -> list[dict[str, float]]:
    """The same sessions and targets on the PostgreSQL log (a throwaway server, fsync on);
    each size in a fresh schema, so N = 10,000 does not start on N = 1,000's rows."""
    from bench.pg_server import PgServer

    print(" PostgreSQL log (throwaway server on loopback, fsync on; gc tuned)")
    rows = []
    with PgServer() as server:
        for n in sizes:
            server.psql(f"CREATE SCHEMA sessions_{n}")
            r = measure_in_fresh_process(n, "tuned", server.url_for(f"sessions_{n}"))
            r["gc"] = "tuned-postgres"  # type: ignore[assignment]
            rows.append(r)
            p99 = f"p99 {r['p99_ms']:8.2f} ms"
            if n in targets:
                p99 += f" (target < {targets[n]:.0f}: {_mark(r['p99_ms'] < targets[n])})"
            print(f"  N={n:>6,}  wall {r['wall_s']:7.2f} s  start {r['start_ms']:6.3f} ms/session"
                  f"  p50 {r['p50_ms']:8.2f} ms  {p99}  RSS {r['rss_kb']:5.1f} KB/session"
                  f" (target < 40: {_mark(r['rss_kb'] < 40)})  events {int(r['events']):,}"
                  f"  errors {int(r['errors'])}")
    first, last = rows[0]["start_ms"], rows[-1]["start_ms"]
    flat = (last - first) / first * 100 if first else 0.0
    print(f"  start cost {sizes[0]:,} → {sizes[-1]:,}: {flat:+.0f} %"
          f" (target within 20 %: {_mark(abs(flat) <= 20)})")
    return rows
