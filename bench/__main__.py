"""``python -m bench [NAME ...]``: run the named benchmarks (default: all)."""

from __future__ import annotations

import argparse
import importlib

BENCHES = {"log": "bench.log_bench", "stream-json": "bench.stream_json_bench",
           "frames": "bench.frames_bench", "sessions": "bench.sessions_bench",
           "pty": "bench.pty_bench",
           "a2a": "bench.a2a_serve_bench",
           "acp-agent": "bench.acp_agent_bench", "replay": "bench.replay_bench"}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"benchmarks to run: {', '.join(BENCHES)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--backend", choices=("file", "postgres"), default="file",
                        help="log: the file log (default) or the PostgreSQL log against the "
                        "eventsourcing library on a throwaway server")
    args = parser.parse_args()
    unknown = [name for name in args.names if name not in BENCHES]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(BENCHES)}")
    for name in args.names or list(BENCHES):
        module = "bench.log_pg_bench" if name == "log" and args.backend == "postgres" \
            else BENCHES[name]
        importlib.import_module(module).run(quick=args.quick)


if __name__ == "__main__":
    main()
