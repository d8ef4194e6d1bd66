"""Event log backends: memory and the embedded file log."""

from events.log.base import EventLog, LogClosed, LogWriteError, Subscription
from events.log.file import FSYNC_POLICIES, FileEventLog, FsyncPolicy, LogLocked, Recovery
from events.log.memory import MemoryEventLog
from events.log.records import LogCorrupted, LogFormatError

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
