"""Rebuild state from a log, up to any seq, a window at a time.

The log is read and folded in windows of seqs, so reading costs the same
memory for a 10 KB log and a 10 GB one; what stays is the state itself.
A caller that will not show some projection can ``skip`` it (``cap replay``
never prints the transcript, the one projection that grows with every text
chunk).  Placeholders a damaged log reads as (``log.lost``,
``log.undecodable``) fold into nothing: no projection has a handler for them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from trio_cap.events.envelope import Envelope
from trio_cap.events.log.base import EventLog
from trio_cap.events.projections import State, initial_state
from trio_cap.events.projections.state import fold


def replay(
    log: EventLog,
    until: int | None = None,
    *,
    batch: int = 65536,
    skip: Sequence[str] = (),
    seen: Callable[[Sequence[Envelope]], None] | None = None,
) -> State:
    """Fold every acknowledged event with seq <= ``until`` (all when None).

    ``skip`` names projections left at their initial state; ``seen`` is
    called with each window before it is folded (``cap replay`` reports
    damage from it).
    """
    state = initial_state()
    end = log.last_seq if until is None else min(until, log.last_seq)
    seq = 1
    while seq <= end:
        envs = log.read(seq, until=min(end, seq + batch - 1))
        if seen is not None:
            seen(envs)
        fold(state, envs, skip)
        seq += batch
    return state
