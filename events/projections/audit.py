"""Who decided what: every command, decision, warning and terminal transition."""

from __future__ import annotations

import heapq

import msgspec

from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    AskAnswered,
    BindingFallback,
    CancelRequested,
    InputInjected,
    LogRecovered,
    PermissionDecided,
    PermissionRequest,
    SessionCancelled,
    SessionCompleted,
    SessionCreated,
    SessionFailed,
    SessionWarning,
)
from trio_cap.events.projections.base import Projection


class AuditEntry(msgspec.Struct, kw_only=True):
    seq: int
    at: float
    stream: str
    kind: str
    summary: str


class AuditState(msgspec.Struct):
    by_stream: dict[str, list[AuditEntry]] = msgspec.field(default_factory=dict)
    """Kept per stream, so a finished session's trail can leave the live state at once
    (:func:`~trio_cap.events.projections.state.forget`)."""

    def entries(self) -> list[AuditEntry]:
        """Every stream's entries, in seq order."""
        return list(heapq.merge(*self.by_stream.values(), key=lambda e: e.seq))


def _summary(ev) -> str:
    match ev:
        case SessionCreated():
            return f"session {ev.session_id} created: agent {ev.agent} via {ev.binding} in {ev.cwd}"
        case InputInjected():
            return f"input from {ev.source}: {ev.text[:120]}"
        case CancelRequested():
            return f"cancel {ev.scope} ({ev.reason})"
        case PermissionRequest():
            return f"permission asked: {ev.tool} {ev.scope} risk {ev.risk_level} [{ev.req_id}]"
        case PermissionDecided():
            why = f": {ev.reason}" if ev.reason else ""
            return f"permission {ev.req_id} {ev.decision} by {ev.by}{why}"
        case AskAnswered():
            return f"ask {ev.ask_id} answered by {ev.by}: {ev.value!r}"
        case SessionWarning():
            return f"warning {ev.code}: {ev.message}"
        case BindingFallback():
            return f"binding {ev.failed} failed ({ev.reason}); trying {ev.next}"
        case LogRecovered():
            return f"log tail of {ev.dropped_bytes} bytes dropped at offset {ev.at_offset}"
        case SessionCompleted():
            return f"completed after {ev.turns} turns"
        case SessionCancelled():
            return f"cancelled: {ev.reason}"
        case SessionFailed():
            return f"failed {ev.code}: {ev.message}"
    return ev.__struct_config__.tag


def _record(state: AuditState, env: Envelope) -> None:
    state.by_stream.setdefault(env.stream, []).append(
        AuditEntry(
            seq=env.seq, at=env.at, stream=env.stream, kind=env.kind, summary=_summary(env.event)
        )
    )


AUDITED = (
    SessionCreated,
    InputInjected,
    CancelRequested,
    PermissionRequest,
    PermissionDecided,
    AskAnswered,
    SessionWarning,
    BindingFallback,
    LogRecovered,
    SessionCompleted,
    SessionCancelled,
    SessionFailed,
)


class AuditProjection(Projection[AuditState]):
    name = "audit"
    handlers = dict.fromkeys(AUDITED, _record)

    def initial(self) -> AuditState:
        return AuditState()
