"""``cap replay LOG --check`` and ``cap log show LOG --follow``: the recorded run, again.

``--check`` needs no agent and no network: it reads the log and runs each
session's recorded inputs through fresh machines (:mod:`..replay.check`).
``--follow`` tails a log another process writes, through the log's own
``subscribe()`` (any :class:`~trio_cap.events.log.EventLog`); for a file log
it takes in new records as they land and stops once no process holds the
log's writer lock any more.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import sys
from collections.abc import Callable, Iterator, Sequence

import trio

from trio_cap.actors.cli.common import EXIT_FAILED, EXIT_OK, UsageError
from trio_cap.actors.replay.check import Divergence, check_sessions, group_sessions
from trio_cap.events.envelope import Envelope
from trio_cap.events.log import EventLog, FileEventLog

FOLLOW_POLL = 0.2
"""Seconds between looks at a followed file log (records another process appended)."""


def windows(log: EventLog, size: int = 65536) -> Iterator[list[Envelope]]:
    seq, end = 1, log.last_seq
    while seq <= end:
        yield log.read(seq, until=min(end, seq + size - 1))
        seq += size


def check_log(args: argparse.Namespace, log: FileEventLog, report) -> int:
    """Replay every session (or ``--session``) and compare; 0 identical, 1 at a divergence."""
    def seen() -> Iterator[list[Envelope]]:
        for envs in windows(log):
            for env in envs:
                report.envelope(env) if type(env.event).__name__.startswith("Log") else None
            yield envs

    streams = group_sessions(seen(), args.session)
    log.close()
    if args.session is not None and args.session not in streams:
        raise UsageError(f"no session {args.session!r} in {args.log}")
    try:
        result = check_sessions(streams)
    except Divergence as exc:
        print(exc.describe())
        print(f"cap: replay check failed: session {exc.session} diverges at "
              f"{'seq ' + str(exc.seq) if exc.seq is not None else 'its end'}", file=sys.stderr)
        return EXIT_FAILED
    damaged = report.finish()
    for binding in sorted(result.undecoded):
        print(f"note: this build has no replay machine for {binding}: its recorded frames "
              "were taken as recorded, and its sessions checked from their events")
    print(f"checked {result.events} events of {result.sessions} session(s) in {args.log}: "
          "the replay produced every recorded event, identically")
    return damaged or EXIT_OK


# ---- cap log show --follow ----------------------------------------------------------


def writer_active(path: str) -> bool:
    """Whether a process holds the file log's writer lock (it is still being written)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


async def follow(log: EventLog, from_seq: int,
                 show: Callable[[Sequence[Envelope]], None]) -> None:
    """Show every event from ``from_seq`` as it is appended, until the log is done.

    Any backend's ``subscribe()`` gives the live tail (it ends when the log
    closes); a read-only file log is refreshed from its file (what another
    process appends) and is done once its writer has gone and everything it
    wrote was shown.
    """
    shown = from_seq - 1
    progressed = trio.Event()
    async with trio.open_nursery() as nursery:
        async def tail() -> None:
            nonlocal shown, progressed
            async for batch in log.subscribe(from_seq):
                show(batch)
                shown = batch[-1].seq
                progressed.set()
                progressed = trio.Event()
            nursery.cancel_scope.cancel()

        nursery.start_soon(tail)
        if isinstance(log, FileEventLog):
            while True:
                active = writer_active(log.path)
                log.refresh()
                if not active:  # refreshed after the writer let go: nothing more can come
                    while shown < log.last_seq:
                        await progressed.wait()
                    nursery.cancel_scope.cancel()
                    return
                await trio.sleep(FOLLOW_POLL)


def serve_log(args: argparse.Namespace) -> int:
    from trio_cap.actors.cli.serve_replay import serve_command

    return serve_command(args)
