"""Permission requests and asks that still wait for a decision or an answer."""

from __future__ import annotations

from typing import Any

import msgspec

from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    AskAnswered,
    AskUser,
    PermissionDecided,
    PermissionRequest,
    SessionCancelled,
    SessionCompleted,
    SessionFailed,
    SessionIdle,
    SessionInputRequired,
)
from trio_cap.events.projections.base import Projection


class PendingPermission(msgspec.Struct, kw_only=True):
    req_id: str
    tool: str
    scope: str
    risk_level: str
    intent: dict[str, Any]
    seq: int


class PendingAsk(msgspec.Struct, kw_only=True):
    ask_id: str
    prompt: str
    form: dict[str, Any] | None
    seq: int


class PendingState(msgspec.Struct):
    permissions: dict[str, dict[str, PendingPermission]] = msgspec.field(default_factory=dict)
    asks: dict[str, dict[str, PendingAsk]] = msgspec.field(default_factory=dict)

    def count(self) -> int:
        return sum(map(len, self.permissions.values())) + sum(map(len, self.asks.values()))


def _request(state: PendingState, env: Envelope) -> None:
    ev: PermissionRequest = env.event  # type: ignore[assignment]
    state.permissions.setdefault(env.stream, {})[ev.req_id] = PendingPermission(
        req_id=ev.req_id,
        tool=ev.tool,
        scope=ev.scope,
        risk_level=ev.risk_level,
        intent=dict(ev.intent),
        seq=env.seq,
    )


def _rated(state: PendingState, env: Envelope) -> None:
    """Show the session's own rating, not the agent's claim, to whoever decides."""
    ev: SessionInputRequired = env.event  # type: ignore[assignment]
    if ev.reason != "permission" or ev.risk is None:
        return
    pending = state.permissions.get(env.stream, {}).get(ev.ref)
    if pending is not None:
        pending.risk_level = ev.risk


def _decided(state: PendingState, env: Envelope) -> None:
    ev: PermissionDecided = env.event  # type: ignore[assignment]
    _drop(state.permissions, env.stream, ev.req_id)


def _ask(state: PendingState, env: Envelope) -> None:
    ev: AskUser = env.event  # type: ignore[assignment]
    state.asks.setdefault(env.stream, {})[ev.ask_id] = PendingAsk(
        ask_id=ev.ask_id, prompt=ev.prompt, form=ev.form, seq=env.seq
    )


def _answered(state: PendingState, env: Envelope) -> None:
    ev: AskAnswered = env.event  # type: ignore[assignment]
    _drop(state.asks, env.stream, ev.ask_id)


def _ended(state: PendingState, env: Envelope) -> None:
    state.permissions.pop(env.stream, None)
    state.asks.pop(env.stream, None)


def _drop(table: dict[str, dict[str, Any]], stream: str, key: str) -> None:
    per_session = table.get(stream)
    if per_session is not None:
        per_session.pop(key, None)
        if not per_session:
            del table[stream]


class PendingProjection(Projection[PendingState]):
    name = "pending"
    handlers = {
        PermissionRequest: _request,
        PermissionDecided: _decided,
        SessionInputRequired: _rated,
        AskUser: _ask,
        AskAnswered: _answered,
        SessionCompleted: _ended,
        SessionCancelled: _ended,
        SessionFailed: _ended,
        SessionIdle: _ended,
    }

    def initial(self) -> PendingState:
        return PendingState()
