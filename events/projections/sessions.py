"""Status per session, as the lifecycle events describe it."""

from __future__ import annotations

import msgspec

from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    CapError,
    SessionCancelled,
    SessionCompleted,
    SessionCreated,
    SessionFailed,
    SessionIdle,
    SessionInputRequired,
    SessionReady,
    SessionStarting,
    SessionTurnEnded,
    SessionWorking,
)
from trio_cap.events.projections.base import Projection

TERMINAL_STATUSES = frozenset({"completed", "cancelled", "failed"})


class SessionView(msgspec.Struct, kw_only=True):
    session_id: str
    agent: str
    binding: str
    cwd: str
    model: str | None = None
    permissions: str = "deny"
    status: str = "created"
    created_at: float = 0.0
    ended_at: float | None = None
    turns: int = 0
    last_stop_reason: str | None = None
    ended_turn: int = 0
    """The highest turn that has ended."""
    last_error: str | None = None
    waiting_on: str | None = None


class SessionsState(msgspec.Struct):
    sessions: dict[str, SessionView] = msgspec.field(default_factory=dict)


def _created(state: SessionsState, env: Envelope) -> None:
    ev: SessionCreated = env.event  # type: ignore[assignment]
    state.sessions[ev.session_id] = SessionView(
        session_id=ev.session_id,
        agent=ev.agent,
        binding=ev.binding,
        cwd=ev.cwd,
        model=ev.model,
        permissions=ev.permissions,
        created_at=env.at,
    )


def _move(state: SessionsState, env: Envelope, status: str) -> SessionView | None:
    """Set a live session's status; a terminal session never moves again."""
    view = state.sessions.get(env.stream)
    if view is None or view.status in TERMINAL_STATUSES:
        return None
    view.status = status
    view.waiting_on = None
    if status in TERMINAL_STATUSES:
        view.ended_at = env.at
    return view


def _status(status: str):
    def handler(state: SessionsState, env: Envelope) -> None:
        _move(state, env, status)

    return handler


def _starting(state: SessionsState, env: Envelope) -> None:
    binding = env.event.binding  # type: ignore[attr-defined]
    if (view := _move(state, env, "starting")) and binding:
        view.binding = binding


def _working(state: SessionsState, env: Envelope) -> None:
    if view := _move(state, env, "working"):
        view.turns = max(view.turns, env.event.turn)  # type: ignore[attr-defined]


def _input_required(state: SessionsState, env: Envelope) -> None:
    ev: SessionInputRequired = env.event  # type: ignore[assignment]
    if view := _move(state, env, "input_required"):
        view.waiting_on = f"{ev.reason}:{ev.ref}"


def _turn_ended(state: SessionsState, env: Envelope) -> None:
    ev: SessionTurnEnded = env.event  # type: ignore[assignment]
    view = state.sessions.get(env.stream)
    if view is not None and view.status not in TERMINAL_STATUSES:
        view.last_stop_reason = ev.stop_reason
        view.ended_turn = max(view.ended_turn, ev.turn)


def _idle(state: SessionsState, env: Envelope) -> None:
    _move(state, env, "ready")


def _failed(state: SessionsState, env: Envelope) -> None:
    ev: SessionFailed = env.event  # type: ignore[assignment]
    if view := _move(state, env, "failed"):
        view.last_error = f"{ev.code}: {ev.message}"


def _error(state: SessionsState, env: Envelope) -> None:
    view = state.sessions.get(env.stream)
    if view is not None:
        ev: CapError = env.event  # type: ignore[assignment]
        view.last_error = f"{ev.code}: {ev.message}"


class SessionsProjection(Projection[SessionsState]):
    name = "sessions"
    handlers = {
        SessionCreated: _created,
        SessionStarting: _starting,
        SessionReady: _status("ready"),
        SessionWorking: _working,
        SessionInputRequired: _input_required,
        SessionTurnEnded: _turn_ended,
        SessionIdle: _idle,
        SessionCompleted: _status("completed"),
        SessionCancelled: _status("cancelled"),
        SessionFailed: _failed,
        CapError: _error,
    }

    def initial(self) -> SessionsState:
        return SessionsState()
