"""What ``cap fleet run``'s live view draws, from the orchestrator's state alone.

Everything on screen is folded from the log — the fleets projection ``cap fleet status``
prints (each member's state, spend, plan, conflicts), the sessions, usage, plan and
pending projections — plus the :class:`~.fleet_desk.Desk` (the questions waiting for the
person and what they are typing), so the view shows what a replay of the log would.
No I/O: :mod:`.fleet_live` draws what :func:`render` returns.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from trio_cap.actors.cli.fleet_desk import Desk, Question
from trio_cap.actors.cli.follow import describe_intent
from trio_cap.events.kinds import SessionInputRequired
from trio_cap.events.projections.fleets import FleetView, MemberView
from trio_cap.events.projections.state import State

STATE_STYLE = {"working": "cyan", "needs input": "bold yellow", "idle": "white",
               "done": "green", "failed": "bold red", "starting": "dim"}


def member_state(member: MemberView) -> str:
    """A member's state in the words of the issue: working, needs input (with what), idle,
    rate-limited until T, done, failed."""
    if member.paused_until is not None and member.status not in ("done", "failed"):
        return "rate-limited until " + time.strftime("%H:%M:%S",
                                                     time.localtime(member.paused_until))
    if member.status == "needs input" and member.needs:
        return f"needs input ({member.needs})"
    return member.status


def question(state: State, member: str, session_id: str,
             ev: SessionInputRequired) -> Question | None:
    """The question a member's session waits on, from the pending projection; None when it
    has been answered already (the log is read after the fact)."""
    if ev.reason == "permission":
        request = state.pending.permissions.get(session_id, {}).get(ev.ref)
        if request is None:
            return None
        return Question(member, session_id, "permission", ev.ref,
                        f"{request.tool} {describe_intent(request.intent)}",
                        high_risk=(ev.risk or request.risk_level) == "high")
    ask = state.pending.asks.get(session_id, {}).get(ev.ref)
    if ask is None:
        return None
    choices = tuple(c.get("const") for c in (ask.form or {}).get("oneOf", [])
                    if isinstance(c, dict))
    why = (ev.meta or {}).get("cap.auto_answer")
    passed = f" (the auto-answerer passed it on: {why.get('reason')})" \
        if isinstance(why, dict) else ""
    return Question(member, session_id, "ask", ev.ref, ask.prompt + passed, choices)


def current_step(state: State, view: FleetView, member: str, session_id: str) -> str:
    """What the member works on: its master-plan entry in progress, else its own plan's
    step in progress, else the message it was last given."""
    for entry in view.plan:
        if entry.status == "in_progress" and \
                (entry.meta or {}).get("cap.assigned_to") == f"cap://{session_id}":
            return f"{entry.id}: {entry.content}"
    for entry in state.plan.plans.get(session_id, ()):
        if entry.status == "in_progress":
            return entry.content
    for mid, msg in reversed(view.messages.items()):
        if msg.target == member and msg.state == "delivered":
            return f"{mid} from {msg.source}: {msg.text}"
    return ""


def render(state: State, fleet: str, members: Sequence[str], desk: Desk | None,
           tail: Sequence[str], budget_usd: float | None, height: int = 0) -> RenderableType:
    """The whole view; ``height`` (the terminal's rows, 0: no limit) drops the oldest
    event lines that would not fit, and puts the person's panel above the table when even
    the table does not, so a question is never cut off the bottom of the screen."""
    view = state.fleets.fleets.get(fleet)
    top: list[RenderableType] = [_head(view, fleet, budget_usd)]
    if view is not None and budget_usd:
        top.append(ProgressBar(total=budget_usd, completed=min(view.spent_usd, budget_usd),
                               width=40))
    body: list[RenderableType] = [_table(state, view, members)]
    for conflict in _conflicts(view):
        body.append(Text(f"⚠ conflict: {conflict}", style="bold red"))
    panel = _desk(desk) if desk is not None else None
    used = len(top) + len(members) + 3 + (len(body) - 1) \
        + (_panel_rows(desk) if desk is not None else 0)
    room = len(tail) if not height else max(0, height - used - 1)
    if tail and room:
        body.append(Text("\n".join(tail[-room:]), style="dim", no_wrap=True,
                         overflow="ellipsis"))
    if panel is None:
        return Group(*top, *body)
    if height and used > height:
        return Group(*top, panel, *body)
    return Group(*top, *body, panel)


def _panel_rows(desk: Desk) -> int:
    """The rows :func:`_desk` draws: its border, its lines."""
    return 3 + (desk.front is not None) + (len(desk.questions) > 1) + bool(desk.typing) \
        + bool(desk.note)


def _head(view: FleetView | None, fleet: str, budget_usd: float | None) -> Text:
    if view is None:
        return Text(f"fleet {fleet}: starting", style="bold")
    budget = f" of ${budget_usd:.4f}" if budget_usd is not None else ""
    reason = f": {view.reason}" if view.reason else ""
    head = Text(f"fleet {fleet}: ", style="bold")
    head.append(f"{view.status}{reason}",
                style={"completed": "green", "failed": "bold red"}.get(view.status, "cyan"))
    head.append(f"; spent ${view.spent_usd:.4f}{budget}")
    return head


def _table(state: State, view: FleetView | None, members: Sequence[str]) -> Table:
    table = Table(expand=True, show_edge=False, pad_edge=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("member", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("binding", no_wrap=True)
    table.add_column("step", overflow="ellipsis", no_wrap=True, ratio=1)
    table.add_column("tokens in/out", justify="right", no_wrap=True)
    table.add_column("cost", justify="right", no_wrap=True)
    for i, mid in enumerate(members, 1):
        member = view.members.get(mid) if view is not None else None
        if member is None:
            table.add_row(str(i), mid, Text("starting", style="dim"), "", "", "", "")
            continue
        sid = member.session_id
        session = state.sessions.sessions.get(sid)
        usage = state.usage.sessions.get(sid)
        said = member_state(member)
        tokens = f"{usage.input_tokens}/{usage.output_tokens}" if usage is not None else ""
        budget = f" of ${member.budget_usd:.2f}" if member.budget_usd is not None else ""
        step = " ".join(current_step(state, view, mid, sid).split()) if view else ""
        table.add_row(str(i), mid,
                      Text(said, style=STATE_STYLE.get(member.status, "yellow")),
                      session.binding if session is not None else "", step, tokens,
                      f"${member.spent_usd:.4f}{budget}")
    return table


def _conflicts(view: FleetView | None) -> list[str]:
    if view is None:
        return []
    latest: dict[str, Any] = {c.path: c for c in view.conflicts}  # each names all so far
    return [f"{path} changed by {', '.join(c.members)}: their branches will collide at merge"
            for path, c in latest.items()]


def _desk(desk: Desk) -> RenderableType:
    lines: list[Text] = []
    front = desk.front
    if front is not None:
        lines.append(_question(front, desk))
        if len(desk.questions) > 1:
            lines.append(Text(f"  ({len(desk.questions) - 1} more waiting: "
                              + ", ".join(q.member for q in desk.questions[1:]) + ")",
                              style="dim"))
    if desk.typing == "member":
        lines.append(Text("interrupt which member (number or id, Enter; Esc: never mind): "
                          + desk.line, style="bold"))
    elif desk.typing == "correction":
        lines.append(Text(f"correction for {desk.target} (Enter sends; Esc: never mind): "
                          + desk.line, style="bold"))
    elif desk.typing == "answer":
        lines.append(Text("your answer (Enter sends; empty or Esc declines): " + desk.line,
                          style="bold"))
    if desk.note:
        lines.append(Text(desk.note, style="yellow"))
    lines.append(Text("keys: i interrupt a member with a correction · Ctrl-C stop the fleet",
                      style="dim"))
    return Panel(Group(*lines), title="you", title_align="left",
                 border_style="yellow" if front is not None else "dim")


def _question(q: Question, desk: Desk) -> Text:
    if q.kind == "permission":
        risk = " [HIGH risk by trio-cap's rating]" if q.high_risk else ""
        text = Text(f"{q.member} asks: allow {q.text}?{risk} ", style="bold yellow")
        text.append("y allow once · a allow always · n deny", style="bold")
        return text
    text = Text(f"{q.member} asks: {q.text} ", style="bold yellow")
    if q.choices:
        text.append(" ".join(f"{i} {c}" for i, c in enumerate(q.choices, 1)) + " · ",
                    style="bold")
    if desk.typing != "answer":
        text.append("r type an answer · d decline", style="bold")
    return text
