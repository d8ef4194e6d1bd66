"""One way to open a log from what a user typed: a file path or a ``postgresql://`` URL.

Every place that takes a log (``cap run --log``, ``cap log show``, ``cap replay``,
``open_orchestrator(log=...)``) goes through here, so both forms work everywhere
and fail with the same words.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import trio

from trio_cap.events.clock import Clock
from trio_cap.events.log.base import EventLog
from trio_cap.events.log.file import FileEventLog
from trio_cap.events.log.urls import is_url, redact

__all__ = ["describe", "is_url", "open_log", "open_log_sync"]


def describe(target: str | os.PathLike[str]) -> str:
    """The target as messages name it (a URL without its password)."""
    return redact(target) if is_url(target) else os.fspath(target)


def open_log_sync(
    target: str | os.PathLike[str],
    *,
    readonly: bool = False,
    fsync: str = "batch",
    clock: Clock | None = None,
    notices: Callable[[str], None] | None = None,
) -> EventLog:
    """Open without an event loop (command-line readers; a writer opened before ``trio.run``)."""
    if is_url(target):
        from trio_cap.events.log.postgres import PostgresEventLog

        return PostgresEventLog(str(target), readonly=readonly, clock=clock, notices=notices)
    if readonly:
        return FileEventLog(target, readonly=True)
    return FileEventLog(target, fsync=fsync, clock=clock)  # type: ignore[arg-type]


async def open_log(
    target: str | os.PathLike[str],
    *,
    readonly: bool = False,
    fsync: str = "batch",
    clock: Clock | None = None,
    listen: bool = False,
    notices: Callable[[str], None] | None = None,
) -> EventLog:
    """Open in a worker thread (a file's open-time scan, a database's connect).

    ``listen``: a PostgreSQL log follows other writers' appends live (its
    subscriptions then see every node's events as they commit).
    """
    if is_url(target):
        from trio_cap.events.log.postgres import PostgresEventLog

        return await PostgresEventLog.open(str(target), listen=listen, readonly=readonly,
                                           clock=clock, notices=notices)
    return await trio.to_thread.run_sync(
        lambda: open_log_sync(target, readonly=readonly, fsync=fsync, clock=clock))
