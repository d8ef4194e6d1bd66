"""trio-cap's vocabulary and memory: event types, the log, projections and replay."""

from events.envelope import Envelope
from events.kinds import ALL_EVENTS, KINDS, AnyEvent, Event
from events.log import EventLog, FileEventLog, MemoryEventLog
from events.projections import State, fold, initial_state
from events.replay import replay

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
