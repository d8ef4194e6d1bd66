"""Per fleet: each member's state, the spend against the budgets, the master plan, and the
audit trail of every routed message — all folded from the log, so ``cap fleet status`` and a
replay show exactly what the live run showed.

A member's state comes from its session's protocol events, never from guessing: working
(a turn runs), needs input (an ask or a permission request is pending, with which),
idle, done (its session completed) or failed.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    AskAnswered,
    AskUser,
    FleetArchive,
    FleetBudgetRefused,
    FleetCancel,
    FleetCompleted,
    FleetConflict,
    FleetFailed,
    FleetGaveUp,
    FleetInterrupt,
    FleetMember,
    FleetMessageConsumed,
    FleetMessageDelivered,
    FleetMessageQueued,
    FleetMessageRefused,
    FleetPaused,
    FleetResumed,
    FleetRoute,
    FleetStarted,
    FleetTouched,
    FleetWorktree,
    Plan,
    PlanEntry,
    SessionCancelled,
    SessionCompleted,
    SessionFailed,
    SessionIdle,
    SessionInputRequired,
    SessionReady,
    SessionWorking,
    Usage,
)
from trio_cap.events.projections.base import Projection


class MemberView(msgspec.Struct, kw_only=True):
    session_id: str = ""
    status: str = "starting"
    """starting | working | needs input | idle | done | failed"""
    needs: str | None = None
    """What the member waits for (``ask ask_1``, ``permission perm_2``)."""
    spent_usd: float = 0.0
    budget_usd: float | None = None
    turns: int = 0
    cwd: str = ""
    branch: str | None = None
    paused_until: float | None = None
    """Rate-limited: the fleet resumes it at this time (the log clock's seconds); shown as
    ``rate-limited until T`` while the member has not ended."""


class MessageView(msgspec.Struct, kw_only=True):
    source: str
    target: str
    via: str
    text: str
    state: str = "queued"
    """queued | delivered | consumed"""
    hops: int = 0
    cause: int | None = None
    queued_seq: int = 0
    input_seq: int | None = None
    stop_reason: str | None = None
    reply_to: str | None = None
    """The message this one answers (a reply routed back to its sender)."""


class AuditRow(msgspec.Struct, kw_only=True):
    seq: int
    cause: int | None
    kind: str
    source: str = ""
    target: str = ""
    text: str = ""
    detail: str = ""


class AskView(msgspec.Struct, kw_only=True):
    """A member's ask, and who answered it: the auto-answerer (with the passages it used),
    a person, or nobody (declined headless), and why the auto-answerer passed it on."""

    member: str
    ask_id: str
    prompt: str = ""
    seq: int = 0
    state: str = "pending"
    """pending | answered | declined"""
    value: Any = None
    by: str = ""
    provenance: list[dict[str, Any]] = msgspec.field(default_factory=list)
    escalated: str = ""


class FleetView(msgspec.Struct, kw_only=True):
    name: str
    stream: str
    status: str = "running"
    """running | completed | failed"""
    reason: str = ""
    budget_usd: float | None = None
    spent_usd: float = 0.0
    members: dict[str, MemberView] = msgspec.field(default_factory=dict)
    plan: tuple[PlanEntry, ...] = ()
    messages: dict[str, MessageView] = msgspec.field(default_factory=dict)
    audit: list[AuditRow] = msgspec.field(default_factory=list)
    worktrees: list[FleetWorktree] = msgspec.field(default_factory=list)
    touched: dict[str, list[str]] = msgspec.field(default_factory=dict)
    """File → the members that changed it, in order (``fleet.touched``)."""
    conflicts: list[FleetConflict] = msgspec.field(default_factory=list)
    archive: FleetArchive | None = None
    asks: list[AskView] = msgspec.field(default_factory=list)
    forgotten: bool = False
    """The run has ended and its detail left memory (:func:`forget_fleet`): only the
    summary above the plan is kept; :func:`fold_fleet` folds the rest from the log."""


class FleetsState(msgspec.Struct):
    fleets: dict[str, FleetView] = msgspec.field(default_factory=dict)
    by_stream: dict[str, str] = msgspec.field(default_factory=dict)
    """Fleet stream → fleet name."""
    members: dict[str, tuple[str, str]] = msgspec.field(default_factory=dict)
    """Session stream → (fleet name, member id)."""


def _fleet(state: FleetsState, env: Envelope) -> FleetView | None:
    """The running fleet whose stream ``env`` is on (a forgotten one gathers no detail)."""
    name = state.by_stream.get(env.stream)
    view = state.fleets.get(name) if name is not None else None
    return view if view is not None and not view.forgotten else None


def _member(state: FleetsState, env: Envelope) -> MemberView | None:
    where = state.members.get(env.stream)
    if where is None:
        return None
    fleet = state.fleets.get(where[0])
    return fleet.members.get(where[1]) if fleet is not None else None


def _audit(view: FleetView, env: Envelope, **fields: Any) -> None:
    view.audit.append(AuditRow(seq=env.seq, cause=env.cause, kind=env.kind, **fields))


# ---- the fleet's own events ------------------------------------------------------------------
def _started(state: FleetsState, env: Envelope) -> None:
    ev: FleetStarted = env.event  # type: ignore[assignment]
    state.by_stream[env.stream] = ev.fleet
    state.fleets[ev.fleet] = FleetView(
        name=ev.fleet, stream=env.stream, budget_usd=ev.budget_usd,
        members={m: MemberView() for m in ev.members})


def _worktree(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    if view is not None:
        ev: FleetWorktree = env.event  # type: ignore[assignment]
        view.worktrees.append(ev)
        member = view.members.setdefault(ev.member, MemberView())
        member.cwd, member.branch = ev.path, ev.branch


def _joined(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    if view is not None:
        ev: FleetMember = env.event  # type: ignore[assignment]
        member = view.members.setdefault(ev.member, MemberView())
        member.session_id, member.cwd, member.budget_usd = ev.session_id, ev.cwd, ev.budget_usd
        state.members[ev.session_id] = (view.name, ev.member)


def _plan(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    if view is not None:
        view.plan = env.event.entries  # type: ignore[attr-defined]


def _queued(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    if view is None:
        return
    ev: FleetMessageQueued = env.event  # type: ignore[assignment]
    view.messages[ev.message_id] = MessageView(source=ev.source, target=ev.target, via=ev.via,
                                               text=ev.text, hops=ev.hops, cause=env.cause,
                                               queued_seq=env.seq, reply_to=ev.reply_to)
    _audit(view, env, source=ev.source, target=ev.target, text=ev.text, detail=ev.via)


def _delivered(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    ev: FleetMessageDelivered = env.event  # type: ignore[assignment]
    if view is not None and (msg := view.messages.get(ev.message_id)) is not None:
        msg.state, msg.input_seq = "delivered", ev.input_seq
        _audit(view, env, source=msg.source, target=msg.target, detail=ev.message_id)


def _consumed(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    ev: FleetMessageConsumed = env.event  # type: ignore[assignment]
    if view is not None and (msg := view.messages.get(ev.message_id)) is not None:
        msg.state, msg.stop_reason = "consumed", ev.stop_reason
        _audit(view, env, source=msg.source, target=msg.target,
               detail=f"{ev.message_id} {ev.stop_reason}")


def _refused(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    if view is not None:
        ev: FleetMessageRefused = env.event  # type: ignore[assignment]
        _audit(view, env, source=ev.source, target=ev.target, text=ev.text, detail=ev.reason)


def _budget_refused(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    if view is not None:
        ev: FleetBudgetRefused = env.event  # type: ignore[assignment]
        _audit(view, env, target=ev.member,
               detail=f"{ev.scope} budget ${ev.budget_usd:g} spent (${ev.spent_usd:g})")


def _cancel(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    if view is not None:
        ev: FleetCancel = env.event  # type: ignore[assignment]
        _audit(view, env, target=",".join(ev.members), detail=ev.reason)


def _interrupt(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    if view is not None:
        ev: FleetInterrupt = env.event  # type: ignore[assignment]
        _audit(view, env, source="human", target=ev.member, text=ev.correction,
               detail=f"refused: {ev.refused}" if ev.refused else f"interrupt {ev.message_id}")


def _route(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    if view is not None:
        ev: FleetRoute = env.event  # type: ignore[assignment]
        _audit(view, env, source=",".join(ev.sources), target=",".join(ev.targets),
               detail=ev.pattern + (f" cancelled {','.join(ev.cancelled)}" if ev.cancelled
                                    else ""))


def _touched(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    if view is not None:
        ev: FleetTouched = env.event  # type: ignore[assignment]
        who = view.touched.setdefault(ev.path, [])
        if ev.member not in who:
            who.append(ev.member)


def _conflict(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    if view is not None:
        ev: FleetConflict = env.event  # type: ignore[assignment]
        view.conflicts.append(ev)
        _audit(view, env, source=",".join(ev.members[:-1]), target=ev.members[-1],
               text=ev.path, detail=f"conflict ({ev.via})")


def _paused(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    if view is not None:
        ev: FleetPaused = env.event  # type: ignore[assignment]
        view.members.setdefault(ev.member, MemberView()).paused_until = ev.until
        _audit(view, env, target=ev.member, detail=f"paused {ev.delay_s:g} s ({ev.reason}, "
                                                    f"attempt {ev.attempt})")


def _resumed(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    if view is not None:
        ev: FleetResumed = env.event  # type: ignore[assignment]
        view.members.setdefault(ev.member, MemberView()).paused_until = None
        _audit(view, env, target=ev.member, detail=f"resumed (attempt {ev.attempt})")


def _gave_up(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    if view is not None:
        ev: FleetGaveUp = env.event  # type: ignore[assignment]
        _audit(view, env, target=ev.member, detail=ev.reason)


def _completed(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    if view is not None:
        view.status = "completed"


def _failed(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    if view is not None:
        ev: FleetFailed = env.event  # type: ignore[assignment]
        view.status, view.reason = "failed", ev.reason


# ---- the members' session events -------------------------------------------------------------
def _status(status: str):
    def handler(state: FleetsState, env: Envelope) -> None:
        member = _member(state, env)
        if member is not None:
            member.status, member.needs = status, None
            if type(env.event) is SessionIdle:
                member.turns += 1
    return handler


def _needs(state: FleetsState, env: Envelope) -> None:
    member = _member(state, env)
    if member is not None:
        ev: SessionInputRequired = env.event  # type: ignore[assignment]
        member.status, member.needs = "needs input", f"{ev.reason} {ev.ref}"
        if ev.reason == "ask":
            _escalated(state, env, ev.ref, ev.meta, "to a person")


def _archive(state: FleetsState, env: Envelope) -> None:
    view = _fleet(state, env)
    if view is not None:
        view.archive = env.event  # type: ignore[assignment]


def _asked(state: FleetsState, env: Envelope) -> None:
    where = state.members.get(env.stream)
    if where is not None and not state.fleets[where[0]].forgotten:
        ev: AskUser = env.event  # type: ignore[assignment]
        state.fleets[where[0]].asks.append(AskView(member=where[1], ask_id=ev.ask_id,
                                                   prompt=ev.prompt, seq=env.seq))


def _ask(state: FleetsState, env: Envelope, ask_id: str) -> tuple[FleetView, AskView] | None:
    where = state.members.get(env.stream)
    if where is None:
        return None
    view = state.fleets[where[0]]
    found = next((a for a in reversed(view.asks)
                  if a.member == where[1] and a.ask_id == ask_id), None)
    return (view, found) if found is not None else None


def _escalated(state: FleetsState, env: Envelope, ask_id: str, meta: dict[str, Any] | None,
               to: str) -> None:
    why = (meta or {}).get("cap.auto_answer")
    got = _ask(state, env, ask_id)
    if got is None or not isinstance(why, dict):
        return
    view, ask = got
    ask.escalated = str(why.get("reason", ""))
    _audit(view, env, source="auto_answer", target=ask.member, text=ask.prompt,
           detail=f"escalated {to}: {ask.escalated}")


def _answered(state: FleetsState, env: Envelope) -> None:
    ev: AskAnswered = env.event  # type: ignore[assignment]
    got = _ask(state, env, ev.ask_id)
    if got is None:
        return
    view, ask = got
    ask.state = "declined" if ev.value is None else "answered"
    ask.value, ask.by = ev.value, ev.by
    if ev.by == "policy:headless":
        _escalated(state, env, ev.ask_id, ev.meta, "and declined (nobody can be asked)")
    provenance = (ev.meta or {}).get("cap.provenance")
    if isinstance(provenance, list):
        ask.provenance = provenance
        _audit(view, env, source="auto_answer", target=ask.member, text=str(ev.value),
               detail="; ".join(f"{p.get('file')} #{p.get('passage')} score {p.get('score')}"
                                for p in provenance if isinstance(p, dict)))


def _usage(state: FleetsState, env: Envelope) -> None:
    where = state.members.get(env.stream)
    if where is None:
        return
    view = state.fleets[where[0]]
    cost = env.event.cost_usd_estimate  # type: ignore[attr-defined]
    view.spent_usd += cost
    view.members[where[1]].spent_usd += cost


def _plan_or_member(state: FleetsState, env: Envelope) -> None:
    if env.stream in state.by_stream:
        _plan(state, env)


def forget_fleet(state: FleetsState, stream: str) -> None:
    """Drop an ended fleet run's detail — plan, routed messages and their texts, audit
    trail, asks, worktrees, touched files, conflicts — keeping its summary: status, reason,
    spend against the budget and each member's state, all ``cap fleet status`` prints in
    its first lines.

    A long-lived fleet face runs one fleet per prompt; without this its live state grew
    with every message of every run it ever served.  The detail is still in the log
    (:func:`fold_fleet`)."""
    name = state.by_stream.get(stream)
    view = state.fleets.get(name) if name is not None else None
    if view is None:
        return
    view.plan, view.messages, view.audit, view.worktrees = (), {}, [], []
    view.touched, view.conflicts, view.archive, view.asks = {}, [], None, []
    view.forgotten = True


def fold_fleet(read: Callable[[str], Sequence[Envelope]], stream: str) -> FleetsState:
    """The fleets projection of one fleet stream, folded from the log on demand: that
    stream and its members' session streams (``read(stream)`` gives one stream's events in
    seq order), merged in seq order — the same events a replay of the whole log folds
    into that fleet, without reading any other stream."""
    own = read(stream)
    members = dict.fromkeys(env.event.session_id for env in own  # type: ignore[attr-defined]
                            if type(env.event) is FleetMember)
    state = FleetsState()
    handlers = FleetsProjection.handlers
    for env in heapq.merge(own, *(read(sid) for sid in members), key=_seq):
        handler = handlers.get(type(env.event))
        if handler is not None:
            handler(state, env)
    return state


def _seq(env: Envelope) -> int:
    return env.seq


class FleetsProjection(Projection[FleetsState]):
    name = "fleets"
    handlers = {
        FleetStarted: _started,
        FleetWorktree: _worktree,
        FleetMember: _joined,
        FleetArchive: _archive,
        AskUser: _asked,
        AskAnswered: _answered,
        Plan: _plan_or_member,
        FleetMessageQueued: _queued,
        FleetMessageDelivered: _delivered,
        FleetMessageConsumed: _consumed,
        FleetMessageRefused: _refused,
        FleetBudgetRefused: _budget_refused,
        FleetCancel: _cancel,
        FleetInterrupt: _interrupt,
        FleetRoute: _route,
        FleetTouched: _touched,
        FleetConflict: _conflict,
        FleetPaused: _paused,
        FleetResumed: _resumed,
        FleetGaveUp: _gave_up,
        FleetCompleted: _completed,
        FleetFailed: _failed,
        SessionReady: _status("idle"),
        SessionWorking: _status("working"),
        SessionIdle: _status("idle"),
        SessionInputRequired: _needs,
        SessionCompleted: _status("done"),
        SessionFailed: _status("failed"),
        SessionCancelled: _status("failed"),
        Usage: _usage,
    }

    def initial(self) -> FleetsState:
        return FleetsState()
