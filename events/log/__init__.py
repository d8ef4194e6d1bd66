"""Event log backends: memory, the embedded file log and PostgreSQL (``PostgresEventLog``,
imported on first use), and repair of damaged file logs."""

from trio_cap.events.log.base import EventLog, LogClosed, Subscription
from trio_cap.events.log.errors import (
    EventRejected,
    EventTooLarge,
    LogCorrupted,
    LogFormatError,
    LogWriteError,
)
from trio_cap.events.log.file import FSYNC_POLICIES, FileEventLog, FsyncPolicy, LogLocked, Recovery
from trio_cap.events.log.memory import MemoryEventLog
from trio_cap.events.log.repair import RepairError, RepairReport, repair

__all__ = [
    "FSYNC_POLICIES",
    "EventLog",
    "EventRejected",
    "EventTooLarge",
    "FileEventLog",
    "FsyncPolicy",
    "LogClosed",
    "LogCorrupted",
    "LogFormatError",
    "LogLocked",
    "LogWriteError",
    "MemoryEventLog",
    "Recovery",
    "RepairError",
    "RepairReport",
    "Subscription",
    "repair",
]


def __getattr__(name: str):
    """``PostgresEventLog`` on first use: importing the log never imports psycopg."""
    if name == "PostgresEventLog":
        from trio_cap.events.log.postgres import PostgresEventLog

        return PostgresEventLog
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
