"""``cap node``: run as a node of a shared PostgreSQL log and take over dead nodes' sessions."""

from __future__ import annotations

import argparse
import math
import signal
import sys

import trio

from trio_cap.actors.cli.common import EXIT_OK, UsageError
from trio_cap.actors.nodes import DEFAULT_LEASE, open_node, take_over
from trio_cap.events.log.opener import describe, is_url

_DESCRIPTION = """\
Join the shared log at URL as a node: heartbeat (node.heartbeat) and, with
--take-over, take over the sessions of every node whose lease lapsed without a
node.stopped (it was killed or lost its machine).  Resuming a session on the
new node needs the resume rules, which are not in this build: each such
session is ended with session.failed node_lost, after one node.takeover event
naming them, and each is printed.  Two nodes taking over at once cannot both
do it (a database lock).

Runs until Ctrl+C / SIGTERM (then writes node.stopped), or with --once makes
one pass and exits.

exit codes: 0 done; 1 the database cannot be reached or the log not written;
2 bad usage or a schema this build cannot use.
"""


def register(sub: argparse._SubParsersAction) -> None:
    node = sub.add_parser("node", help="run as a node of a shared log; take over dead nodes",
                          description=_DESCRIPTION,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    node.add_argument("--log", metavar="URL", required=True,
                      help="the shared log: postgresql://USER@HOST/DB")
    node.add_argument("--node", metavar="ID", help="this node's id (default: HOSTNAME-PID)")
    node.add_argument("--lease", type=float, metavar="S", default=DEFAULT_LEASE,
                      help=f"seconds each heartbeat holds this node (default {DEFAULT_LEASE:g})")
    node.add_argument("--take-over", action="store_true",
                      help="take over the live sessions of nodes whose lease lapsed")
    node.add_argument("--once", action="store_true",
                      help="one heartbeat and one takeover pass, then exit")
    node.set_defaults(func=node_command)


def node_command(args: argparse.Namespace) -> int:
    from trio_cap.actors.cli.run_cmd import open_shared_log

    if not is_url(args.log):
        raise UsageError(f"--log {args.log}: cap node needs a shared postgresql:// log (a file "
                         "log has one writer, so there is no other node to take over from)")
    if not (args.lease > 0 and math.isfinite(args.lease)):
        raise UsageError(f"--lease {args.lease}: give seconds as a number > 0")
    log = open_shared_log(args.log)
    trio.run(_run, args, log)
    return EXIT_OK


async def _run(args: argparse.Namespace, log) -> None:
    where = describe(args.log)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with log, open_node(log, args.node, lease=args.lease) as node:
            print(f"cap: node {node.id} joined {where} (lease {args.lease:g} s)",
                  file=sys.stderr)
            async with trio.open_nursery() as nursery:
                async def stop_on_signal() -> None:
                    async for _ in signals:
                        nursery.cancel_scope.cancel()
                        return

                nursery.start_soon(stop_on_signal)
                while True:
                    if args.take_over:
                        for done in await take_over(log, node.id):
                            print(f"cap: took over node {done.lost} (lease lapsed at "
                                  f"{done.lapsed_at:.3f}): {len(done.sessions)} live "
                                  f"session{'s' if len(done.sessions) != 1 else ''}", flush=True)
                            for sid in done.sessions:
                                print(f"cap: session {sid}: marked failed: node lost (resume "
                                      "is not in this build)", flush=True)
                    if args.once:
                        nursery.cancel_scope.cancel()
                        break
                    await trio.sleep(args.lease / 3)
