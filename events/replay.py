"""Rebuild state from a log, up to any seq."""

from __future__ import annotations

from trio_cap.events.log.base import EventLog
from trio_cap.events.projections import State, fold, initial_state


def replay(log: EventLog, until: int | None = None, *, batch: int = 65536) -> State:
    """Fold every acknowledged event with seq <= ``until`` (all when None)."""
    state = initial_state()
    end = log.last_seq if until is None else min(until, log.last_seq)
    seq = 1
    while seq <= end:
        envs = log.read(seq, until=min(end, seq + batch - 1))
        fold(state, envs)
        seq += batch
    return state
