"""trio-cap's vocabulary and memory: event types, the log, projections and replay."""

from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import ALL_EVENTS, KINDS, AnyEvent, Event
from trio_cap.events.log import EventLog, FileEventLog, MemoryEventLog
from trio_cap.events.projections import State, fold, initial_state
from trio_cap.events.replay import replay

__all__ = [
    "ALL_EVENTS",
    "KINDS",
    "AnyEvent",
    "Envelope",
    "Event",
    "EventLog",
    "FileEventLog",
    "MemoryEventLog",
    "State",
    "fold",
    "initial_state",
    "replay",
]
