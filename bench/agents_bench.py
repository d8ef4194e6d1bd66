"""``python -m bench agents``: N concurrent subprocess sessions — ``cap-agent`` over stream-json.

Each session is a real ``cap agent --cap-speak stream-json`` process on its own pipes,
driven through the embedding API on the file log (the default of ``cap run``), then on
the PostgreSQL log (a throwaway server), one turn each, all at once on this machine's
cores.  Reported, never asserted:

* lost events — every session must end completed with its turn's full reply and the same
  number of events as every other (the script is the same);
* leaked processes — any process whose working directory is the bench's workspace after
  the orchestrator has closed;
* the orchestrator's share of the CPU (its own user+system time against its reaped
  children's), which should be small: agents should dominate;
* agent start: session.created → cap.session.ready (spawn, interpreter start, imports,
  the stream-json ``initialize`` answered), p50/p99 — under the N-wide start (queueing
  behind the orchestrator's admission of 16 at a time included), and cold for one agent
  started alone (median of five starts, one after another): what a single ``cap run``
  waits for.
"""

from __future__ import annotations

import collections
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

from trio_cap import open_orchestrator, tune_gc
from trio_cap.actors.orchestrator import resolve
from trio_cap.events.kinds import CapSessionReady, SessionCreated


def _leaked(workspace: Path) -> list[int]:
    """Pids of live processes whose cwd is the workspace (an agent or anything it started)."""
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.readlink(f"/proc/{entry.name}/cwd") == str(workspace):
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


async def measure(n: int, workspace: Path, log_path: Path | str) -> dict[str, float]:
    """``log_path``: a file log's path or a ``postgresql://`` URL."""
    agent = await resolve("cap-agent")
    errors = 0
    texts: list[str] = []
    before = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    async with open_orchestrator(log_path) as orch:
        async def one() -> None:
            nonlocal errors
            try:
                s = await orch.start_session(agent, "stream-json", cwd=workspace,
                                             permissions="allow")
                result = await s.run_turn("hello")
                view = await s.close()
                texts.append(result.text)
                if view.status != "completed" or result.stop_reason != "end_turn":
                    errors += 1
            except Exception:
                errors += 1

        async with trio.open_nursery() as nursery:
            for _ in range(n):
                nursery.start_soon(one)
        await orch.caught_up()
        envs = orch.log.read()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    mine = (after[0].ru_utime + after[0].ru_stime) - (before[0].ru_utime + before[0].ru_stime)
    kids = (after[1].ru_utime + after[1].ru_stime) - (before[1].ru_utime + before[1].ru_stime)
    per_stream = collections.Counter(e.stream for e in envs if not e.stream.startswith("node"))
    starting: dict[str, float] = {}
    starts: list[float] = []
    for e in envs:
        if type(e.event) is SessionCreated:
            starting[e.stream] = e.at
        elif type(e.event) is CapSessionReady and e.stream in starting:
            starts.append((e.at - starting[e.stream]) * 1000)
    starts.sort()
    counts = set(per_stream.values())
    return {"n": n, "wall_s": wall, "errors": errors,
            "lost": 0 if len(counts) == 1 and len(texts) == n
            and len(set(texts)) == 1 and texts[0] else n - len(texts) or 1,
            "events": len(envs), "leaked": len(_leaked(workspace)),
            "orch_cpu_share": mine / (mine + kids) if mine + kids else 0.0,
            "start_p50_ms": statistics.median(starts) if starts else 0.0,
            "start_p99_ms": starts[min(len(starts) - 1, int(0.99 * len(starts)))] if starts
            else 0.0}


def run(quick: bool = False) -> list[dict[str, float]]:
    tune_gc()
    bin_dir = str(Path(sys.executable).parent)  # where this interpreter's `cap` lives
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    n = 20 if quick else 200
    print(f"agents — {os.cpu_count()} cores, Python {platform.python_version()}: {n} concurrent "
          "cap-agent processes over stream-json, one turn each")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "work"
        workspace.mkdir()
        alone = [trio.run(measure, 1, workspace.resolve(), Path(tmp) / f"alone{k}.caplog")
                 for k in range(5)]
        cold = statistics.median(r["start_p50_ms"] for r in alone)
        print(f"  one agent started alone (file log): start p50 {cold:.0f} ms over 5 starts "
              f"(errors {sum(r['errors'] for r in alone)})")
        rows.append({"log": "alone", "n": 1, "start_p50_ms": cold,  # type: ignore[dict-item]
                     "errors": sum(r["errors"] for r in alone)})
        rows.append(_row("file log", trio.run(measure, n, workspace.resolve(),
                                             Path(tmp) / "agents.caplog")))
        from bench.pg_server import PgServer

        with PgServer() as server:  # the shared log: a throwaway server, fsync on
            rows.append(_row("PostgreSQL log", trio.run(measure, n, workspace.resolve(),
                                                        server.url)))
    return rows


def _row(label: str, r: dict[str, float]) -> dict[str, float]:
    n = int(r["n"])
    print(f"  {label}: N={n}  wall {r['wall_s']:.2f} s  errors {r['errors']}  lost events "
          f"{r['lost']} (target 0)  leaked processes {r['leaked']} (target 0)  events "
          f"{r['events']:,}")
    print(f"    orchestrator CPU share {r['orch_cpu_share'] * 100:.1f} % (agents "
          f"{(1 - r['orch_cpu_share']) * 100:.1f} %)  agent start (created → cap.session.ready) "
          f"p50 {r['start_p50_ms']:.0f} ms  p99 {r['start_p99_ms']:.0f} ms")
    r["log"] = label  # type: ignore[assignment]
    return r
