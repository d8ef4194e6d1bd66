"""Event log backends: memory and the embedded file log."""

from trio_cap.events.log.base import EventLog, LogClosed, LogWriteError, Subscription
from trio_cap.events.log.file import FSYNC_POLICIES, FileEventLog, FsyncPolicy, LogLocked, Recovery
from trio_cap.events.log.memory import MemoryEventLog
from trio_cap.events.log.records import LogCorrupted, LogFormatError

__all__ = [
    "FSYNC_POLICIES",
    "EventLog",
    "FileEventLog",
    "FsyncPolicy",
    "LogClosed",
    "LogCorrupted",
    "LogFormatError",
    "LogLocked",
    "LogWriteError",
    "MemoryEventLog",
    "Recovery",
    "Subscription",
]
