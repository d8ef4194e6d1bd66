"""All projections folded together: the state any view shows."""

from __future__ import annotations

from collections.abc import Collection, Iterable

import msgspec

from trio_cap.events.envelope import Envelope
from trio_cap.events.projections.audit import AuditProjection, AuditState
from trio_cap.events.projections.base import Projection
from trio_cap.events.projections.fleets import FleetsProjection, FleetsState, forget_fleet
from trio_cap.events.projections.pending import PendingProjection, PendingState
from trio_cap.events.projections.plan import PlanProjection, PlanState
from trio_cap.events.projections.sessions import (
    TERMINAL_STATUSES,
    SessionsProjection,
    SessionsState,
)
from trio_cap.events.projections.transcript import TranscriptProjection, TranscriptState
from trio_cap.events.projections.usage import UsageProjection, UsageState

PROJECTIONS: tuple[Projection, ...] = (
    SessionsProjection(),
    TranscriptProjection(),
    PlanProjection(),
    UsageProjection(),
    PendingProjection(),
    AuditProjection(),
    FleetsProjection(),
)


class State(msgspec.Struct):
    sessions: SessionsState
    transcript: TranscriptState
    plan: PlanState
    usage: UsageState
    pending: PendingState
    audit: AuditState
    fleets: FleetsState
    last_seq: int = 0


def initial_state() -> State:
    return State(*(p.initial() for p in PROJECTIONS))


_FIELDS = tuple(p.name for p in PROJECTIONS)


def fold(state: State, envelopes: Iterable[Envelope], skip: Collection[str] = ()) -> State:
    """Apply each envelope to every projection not named in ``skip``, in seq order."""
    parts = [(p.handlers, getattr(state, p.name)) for p in PROJECTIONS if p.name not in skip]
    last = state.last_seq
    for env in envelopes:
        kind = type(env.event)
        for handlers, part in parts:
            handler = handlers.get(kind)
            if handler is not None:
                handler(part, env)
        last = env.seq
    state.last_seq = last
    return state


def forget(state: State, stream: str) -> State:
    """Drop a finished session's detail — transcript, plan, pending requests, audit trail —
    from ``state``, keeping its summary (status, turns, last error) and its usage.

    The live state of a long-running orchestrator then grows with its live sessions, not
    with its history; the detail is still in the log, one stream read away
    (``Orchestrator.session_state``)."""
    state.transcript.messages.pop(stream, None)
    state.transcript.index.pop(stream, None)
    state.plan.plans.pop(stream, None)
    state.pending.permissions.pop(stream, None)
    state.pending.asks.pop(stream, None)
    state.audit.by_stream.pop(stream, None)
    return state


def forget_finished(state: State) -> State:
    """:func:`forget` every session that has ended, and :func:`forget_fleet` every fleet
    run that has: what a live orchestrator keeps."""
    for sid, view in state.sessions.sessions.items():
        if view.status in TERMINAL_STATUSES:
            forget(state, sid)
    for fleet in state.fleets.fleets.values():
        if fleet.status != "running":
            forget_fleet(state.fleets, fleet.stream)
    return state


assert tuple(State.__struct_fields__[: len(_FIELDS)]) == _FIELDS
