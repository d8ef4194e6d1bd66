"""trio-cap's public face: ``from trio_cap import open_orchestrator``.

The repository keeps its top-level ``actors/`` and ``events/`` folders, but they
install as ``trio_cap.actors`` and ``trio_cap.events`` so that they never collide
with another distribution's ``events`` or ``actors`` module; this package is
``trio_cap`` itself and names what an embedding program needs.
"""

from trio_cap.actors import __version__
from trio_cap.actors.gc_tuning import tune_gc
from trio_cap.actors.ids import RandomIds, SequentialIds
from trio_cap.actors.orchestrator import (
    Orchestrator,
    Session,
    TurnResult,
    UnknownAgent,
    open_orchestrator,
)
from trio_cap.events import (
    Envelope,
    Event,
    EventLog,
    FileEventLog,
    MemoryEventLog,
    State,
    fold,
    initial_state,
    replay,
)
from trio_cap.events.clock import StepClock

__all__ = [
    "Envelope",
    "Event",
    "EventLog",
    "FileEventLog",
    "MemoryEventLog",
    "Orchestrator",
    "RandomIds",
    "SequentialIds",
    "Session",
    "State",
    "StepClock",
    "TurnResult",
    "UnknownAgent",
    "__version__",
    "fold",
    "initial_state",
    "open_orchestrator",
    "replay",
    "tune_gc",
]
