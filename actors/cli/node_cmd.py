"""``cap node``: run as a node of a shared PostgreSQL log and take over dead nodes' sessions."""

from __future__ import annotations

import argparse
import math
import signal
import sys

import trio

from trio_cap.actors.cli.common import EXIT_FAILED, EXIT_OK, UsageError
from trio_cap.actors.cli.node_resume import NodeResumer, Resumed
from trio_cap.actors.cli.run_cmd import DEFAULT_IDLE_TIMEOUT
from trio_cap.actors.nodes import DEFAULT_LEASE, Takeover, open_node, take_over
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.actors.session.timers import Timeouts
from trio_cap.events.log.opener import describe, is_url

_DESCRIPTION = """\
Join the shared log at URL as a node: heartbeat (node.heartbeat) and, with
--take-over, take over the sessions of every node whose lease lapsed without a
node.stopped (it was killed or lost its machine).  The taken sessions are
resumed here under the rules of cap run --resume: each run's log is replayed,
its agent resumed (Claude Code --resume) or restarted with the transcript so
far, and the prompts it had not run are run.  A session that cannot be resumed
(not started by cap run, a run that asks a human at a terminal, a script or
agent that is gone, a log that does not replay) ends with session.failed
node_lost saying why.  Every taken session is printed, and how it ended.  Two
nodes taking over at once cannot both do it (a database lock), and the lost
node, should it wake up, can no longer write.

Runs until Ctrl+C / SIGTERM (then the sessions it runs are cancelled and it
writes node.stopped), or with --once makes one pass, runs the sessions it took
to their end, and exits.

exit codes: 0 done; 1 the database cannot be reached or the log not written,
or (--once) a session it resumed did not complete; 2 bad usage or a schema
this build cannot use.
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
                      help="one heartbeat and one takeover pass; run the sessions taken to "
                      "their end, then exit")
    node.set_defaults(func=node_command)


def node_command(args: argparse.Namespace) -> int:
    from trio_cap.actors.cli.run_cmd import open_shared_log

    if not is_url(args.log):
        raise UsageError(f"--log {args.log}: cap node needs a shared postgresql:// log (a file "
                         "log has one writer, so there is no other node to take over from)")
    if not (args.lease > 0 and math.isfinite(args.lease)):
        raise UsageError(f"--lease {args.lease}: give seconds as a number > 0")
    log = open_shared_log(args.log)
    return trio.run(_run, args, log)


async def _run(args: argparse.Namespace, log) -> int:  # type: ignore[no-untyped-def]
    where = describe(args.log)
    resumer = NodeResumer(log, args.log)
    results: list[Resumed] = []
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with log, open_node(log, args.node, lease=args.lease) as node, \
                open_orchestrator(log) as orch:
            orch.node = node
            orch.default_timeouts = Timeouts(idle=DEFAULT_IDLE_TIMEOUT)
            print(f"cap: node {node.id} joined {where} (lease {args.lease:g} s)",
                  file=sys.stderr)
            async with trio.open_nursery() as nursery:
                async def stop_on_signal() -> None:
                    async for _ in signals:
                        nursery.cancel_scope.cancel()
                        return

                async def resume(sid: str) -> None:
                    result = await resumer.run(orch, sid)
                    results.append(result)
                    _say_ended(result)

                nursery.start_soon(stop_on_signal)
                async with trio.open_nursery() as sessions:
                    while True:
                        if args.take_over:
                            for done in await take_over(log, node.id,
                                                        resumable=resumer.judge):
                                _say_took(done)
                                for sid in done.resumed:
                                    sessions.start_soon(resume, sid)
                        if args.once:
                            break
                        await trio.sleep(args.lease / 3)
                nursery.cancel_scope.cancel()  # --once: every session taken has ended
    return EXIT_OK if all(r.completed for r in results) else EXIT_FAILED


def _say_took(done: Takeover) -> None:
    n = len(done.sessions)
    print(f"cap: took over node {done.lost} (lease lapsed at {done.lapsed_at:.3f}): {n} live "
          f"session{'s' if n != 1 else ''}", flush=True)
    for sid in done.sessions:
        why = done.failed.get(sid)
        if why is None:
            print(f"cap: session {sid}: resuming", flush=True)
        else:
            print(f"cap: session {sid}: marked failed: node lost: {why}", flush=True)


def _say_ended(result: Resumed) -> None:
    sid = result.session_id
    if result.problem is not None:
        print(f"cap: session {sid}: could not be resumed: {result.problem}", flush=True)
    else:
        print(f"cap: session {sid}: {result.how}, then ended {result.status or 'unknown'}",
              flush=True)
