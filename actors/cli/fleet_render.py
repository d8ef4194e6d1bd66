"""One line per fleet event, for ``cap fleet run`` and ``cap log show``."""

from __future__ import annotations

from trio_cap.events.kinds import (
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
    FleetRunResumed,
    FleetSetup,
    FleetStarted,
    FleetTouched,
    FleetWorktree,
)


def _cut(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _clock(at: float) -> str:
    import time

    return time.strftime("%H:%M:%S", time.localtime(at))


def describe_fleet(ev: object) -> str | None:
    """What a fleet event means, or None for any other event."""
    match ev:
        case FleetStarted():
            budget = f", budget ${ev.budget_usd:g}" if ev.budget_usd is not None else ""
            return (f"fleet {ev.fleet}: {len(ev.members)} sessions ({', '.join(ev.members)}), "
                    f"worktrees {ev.worktrees}, permissions {ev.permissions}{budget}")
        case FleetWorktree():
            where = f"branch {ev.branch}" if ev.branch else "a plain directory"
            return f"{ev.member}: works in {ev.path} ({where})"
        case FleetSetup():
            code = f" (exit {ev.exit_code})" if ev.exit_code not in (None, 0) else ""
            said = "ok" if ev.ok else f"failed{code}: {_cut(ev.detail, 160)}"
            return f"{ev.member}: step {ev.step} {ev.action} {_cut(ev.what)}: {said}"
        case FleetMember():
            return f"{ev.member}: session {ev.session_id} ({ev.agent})"
        case FleetArchive():
            return (f"auto-answerer: {ev.files} files, {ev.passages} passages in {ev.path} "
                    f"(threshold {ev.threshold:g}, at most {ev.max_passages} passages)")
        case FleetRoute():
            cut = f", cancelled {', '.join(ev.cancelled)}" if ev.cancelled else ""
            return f"{ev.pattern}: {', '.join(ev.sources)} → {', '.join(ev.targets) or '-'}{cut}"
        case FleetMessageQueued():
            hops = f", hop {ev.hops}" if ev.hops else ""
            return (f"{ev.message_id} queued ({ev.via}{hops}) {ev.source} → {ev.target}: "
                    f"{_cut(ev.text)}")
        case FleetMessageDelivered():
            return f"{ev.message_id} delivered to {ev.target} (input seq {ev.input_seq})"
        case FleetMessageConsumed():
            return f"{ev.message_id} consumed by {ev.target} ({ev.stop_reason})"
        case FleetMessageRefused():
            return f"refused ({ev.reason}) {ev.source} → {ev.target}: {_cut(ev.text)}"
        case FleetBudgetRefused():
            return (f"{ev.member}: turn refused, {ev.scope} budget ${ev.budget_usd:g} spent "
                    f"(${ev.spent_usd:.4f}; cap_budget_exceeded {ev.code})")
        case FleetCancel():
            return f"cancelled the turns of {', '.join(ev.members)} ({ev.reason})"
        case FleetInterrupt():
            if ev.refused:
                return f"{ev.member}: not interrupted ({ev.refused}): {_cut(ev.correction)}"
            return f"{ev.member}: interrupted ({ev.message_id}), correction: {_cut(ev.correction)}"
        case FleetTouched():
            how = f" (call {ev.call_id})" if ev.call_id else f" ({ev.via})"
            return f"{ev.member}: changed {ev.path}{how}"
        case FleetConflict():
            earlier = ", ".join(ev.members[:-1])
            return (f"WARNING conflict: {ev.members[-1]} changed {ev.path}, which {earlier} "
                    f"changed too: their branches will collide at merge")
        case FleetPaused():
            said = f", the agent said {ev.retry_after:g} s" if ev.retry_after is not None else ""
            return (f"{ev.member}: rate-limited (attempt {ev.attempt}): paused {ev.delay_s:g} s"
                    f"{said}, until {_clock(ev.until)}")
        case FleetResumed():
            return f"{ev.member}: resumed after its rate limit (attempt {ev.attempt})"
        case FleetGaveUp():
            return f"{ev.member}: gave up: {ev.reason}"
        case FleetRunResumed():
            parts = [f"{len(ev.sessions)} session(s) picked up"]
            parts += [f"{name} {', '.join(ids)}" for name, ids in (
                ("re-run", ev.redelivered), ("to deliver", ev.delivering),
                ("paused", ev.paused)) if ids]
            if ev.unlogged:
                parts.append(f"{ev.unlogged} lost decision(s) written")
            return f"fleet {ev.fleet} resumed after seq {ev.after_seq}: {'; '.join(parts)}"
        case FleetCompleted():
            return f"fleet {ev.fleet} completed, spent ${ev.spent_usd:.4f}"
        case FleetFailed():
            return f"fleet {ev.fleet} failed: {ev.reason}"
    return None
