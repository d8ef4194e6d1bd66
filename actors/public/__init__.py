"""trio-cap's public face: ``from trio_cap import open_orchestrator``.

The repository keeps its top-level ``actors/`` and ``events/`` folders, but they
install as ``trio_cap.actors`` and ``trio_cap.events`` so that they never collide
with another distribution's ``events`` or ``actors`` module; this package is
``trio_cap`` itself and names what an embedding program needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from trio_cap.actors import __version__

# Names resolve on first use (PEP 562): ``cap-agent`` and every ``cap`` command import
# ``trio_cap.actors.cli…``, which runs this file first, and an eager import of the
# orchestrator (and through it every log backend) cost each agent start ~0.35 s.
_WHERE = {
    "tune_gc": "trio_cap.actors.gc_tuning",
    "RandomIds": "trio_cap.actors.ids",
    "SequentialIds": "trio_cap.actors.ids",
    "Orchestrator": "trio_cap.actors.orchestrator",
    "Session": "trio_cap.actors.orchestrator",
    "TurnResult": "trio_cap.actors.orchestrator",
    "UnknownAgent": "trio_cap.actors.orchestrator",
    "open_orchestrator": "trio_cap.actors.orchestrator",
    "Envelope": "trio_cap.events",
    "Event": "trio_cap.events",
    "EventLog": "trio_cap.events",
    "FileEventLog": "trio_cap.events",
    "MemoryEventLog": "trio_cap.events",
    "State": "trio_cap.events",
    "fold": "trio_cap.events",
    "initial_state": "trio_cap.events",
    "replay": "trio_cap.events",
    "StepClock": "trio_cap.events.clock",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'trio_cap' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
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
