"""``python -m bench [all | NAME ...] [--quick] [--json FILE] [--plot DIR]``.

Runs the named benchmarks (default, or ``all``: every one, in the order below), each
printing its figures and its ratios against the peers it measures in the same run.
``--json FILE`` also writes every figure (the machine, each bench's rows, how long it
took); ``--plot DIR`` draws sessions vs latency and decode ratios per binding as PNGs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
from pathlib import Path

from bench import common

BENCHES = {"frames": "bench.frames_bench", "stream-json": "bench.stream_json_bench",
           "log": "bench.log_bench", "sessions": "bench.sessions_bench",
           "agents": "bench.agents_bench", "pty": "bench.pty_bench",
           "replay": "bench.replay_bench", "faults": "bench.faults_bench",
           "a2a": "bench.a2a_serve_bench", "acp-agent": "bench.acp_agent_bench"}


def machine() -> dict[str, object]:
    return {"cores": os.cpu_count(), "python": platform.python_version(),
            "implementation": platform.python_implementation(), "platform": platform.platform()}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"all, or benchmarks to run: {', '.join(BENCHES)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--backend", choices=("file", "postgres"), default="file",
                        help="log: the file log (default) or the PostgreSQL log against the "
                        "eventsourcing library on a throwaway server")
    parser.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    parser.add_argument("--plot", metavar="DIR",
                        help="draw sessions-latency.png and decode-ratios.png into DIR")
    args = parser.parse_args()
    names = [n for n in args.names if n != "all"] or list(BENCHES)
    unknown = [name for name in names if name not in BENCHES]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; choose from all, {', '.join(BENCHES)}")
    m = machine()
    print(f"trio-cap benches — {m['cores']} cores, {m['implementation']} {m['python']}, "
          f"{m['platform']}")
    results: dict[str, object] = {}
    for name in names:
        module = "bench.log_pg_bench" if name == "log" and args.backend == "postgres" \
            else BENCHES[name]
        common.RECORDED.clear()
        start = time.perf_counter()
        returned = importlib.import_module(module).run(quick=args.quick)
        took = time.perf_counter() - start
        print(f"  ({name}: {took:.0f} s)")
        sys.stdout.flush()
        results[name] = {"seconds": round(took, 2), "rows": list(common.RECORDED),
                         "returned": returned}
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": m, "quick": args.quick,
                                               "benches": results}, indent=1, default=str))
        print(f"figures written to {args.json}")
    if args.plot:
        from bench.plot import plot

        for path in plot(results, Path(args.plot)):
            print(f"chart: {path}")


if __name__ == "__main__":
    main()
