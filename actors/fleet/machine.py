"""The fleet's routing and budget rules as a sans-io machine: session events in, decisions out.

The shell (:mod:`runner`) feeds it what the members' sessions log and does what it
answers; the machine does no I/O, reads no clock and imports no Trio, so every
decision is a pure function of the events it saw — and is itself an event on the
fleet's stream, so the log explains every turn any member took.

Rules (one line each; the code below keeps them in this order):

* START   entry members (no route into them, no plan entry for them) get the task; a
          master plan (``[[plan]]``) is published as ``cap.plan`` on the fleet's stream
          and its ready entries (dependencies completed) are queued.
* QUEUE   every input for a member is a message: ``fleet.message.queued`` first.
* WAKE    a member whose session queues input mid-turn (manifest ``queued_input``) takes
          its next message during a turn that nothing was asked of (a cancel, a
          correction, a rate limit), injected at once; its turns end in order, each
          consuming its own.  Any other busy member's messages wait for its turn end.
* GATE    a member that is idle takes its next message — unless its own or the fleet's
          budget is already spent: then ``fleet.budget_refused`` (cap_budget_exceeded,
          -32004) and the turn never starts.
* SPEND   ``cap.usage`` adds to the member's and the fleet's spend; crossing a budget
          mid-turn cancels the turns concerned (``fleet.cancel`` ``budget``).
* END     a turn end consumes its message (``fleet.message.consumed``); ``end_turn``
          fires the member's routes with its whole final text and routes its
          ``@cap://<id> text`` lines; any other stop is a failure, except a cancel the
          fleet asked for.
* HANDOFF a turn that ended well hands on (ROUTES, MEDIATE, REPLY) once its artifacts are
          in: the agent's own ``cap.artifact`` events of the turn, and for a member with a
          git worktree its diff (``Collect``, then ``fleet.diff``); turn ends hand on in
          the order they ended, and the member takes no next input before.
* ROUTES  pipeline: next stage; fan_out: every target; join: the target, once every
          source has a result; race: the first source done wins, the others are
          cancelled (``race_lost``); by_subtask: the source's own plan becomes master
          plan entries, each assigned by ``_meta`` ``cap.assigned_to`` or an ``id:``
          prefix.  Each route fires at most ``rounds`` times per source.
* TOUCH   a member's write that succeeded (a write tool's call end; at the end its diff)
          is ``fleet.touched`` the first time per file, and ``fleet.conflict`` when another
          member had changed that file already (see :mod:`touches`).
* LIMIT   a turn that ended on the agent's ``cap.error`` ``rate_limit`` pauses its member
          (``fleet.paused`` until T; the shell is told to wake it) and its message goes
          back to the front of its queue; at T ``fleet.resumed`` and it is delivered
          again.  The wait is the error's retry-after, at least doubling on each repeat
          in a row (``rate_limit``); past ``retries`` in a row: ``fleet.gave_up``, a
          failure.  A turn that ends well resets the count.
* INTERRUPT a person's correction to a working member (CAP §10.6): ``fleet.interrupt``,
          its turn cancelled (``fleet.cancel`` ``interrupt``); however that turn ends,
          nothing of it is routed or counted as a failure, and its message's text plus
          the correction goes to the front of its queue (``via`` ``interrupt``,
          ``replaces`` the old message, same plan entry and hops).  A member not in a
          turn, or one whose turn the fleet is cancelling already, is refused.
* MEDIATE a turn that ended well delivers its ``@cap://<id> text`` lines and its assistant
          text whose ``_meta`` ``cap.message_to`` names members (an id, a ``cap://``
          URN, or a list; consecutive chunks of one message id and target list are
          one message), alike; one to an unknown member, to itself, to an ended member,
          past the hop limit or empty is refused (``fleet.message.refused``).
* REPLY   the turn that took a mediated message, ended well, sends its whole final text
          back to the sender (``via`` ``reply``, ``reply_to`` that message, one hop
          more) unless its own lines or routes addressed the sender already (a line
          back is then marked ``reply_to``); a reply is never answered in turn, and one
          refused (the sender ended, the hop limit) is ``fleet.message.refused`` with
          ``reply_to``.
* FINISH  nothing working and nothing queued: ``fleet.completed`` when no turn failed, no
          budget refused and every plan entry ran, else ``fleet.failed``.

QUEUE, GATE, WAKE, MEDIATE and REPLY (a member's messages) are in :mod:`.machine_messages`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping
from typing import Any

import attrs

from trio_cap.actors.fleet.machine_messages import Messages, _Member, _Message
from trio_cap.actors.fleet.model import BySubtask, FanOut, Fleet, Join, Pipeline, Race
from trio_cap.actors.fleet.outputs import (
    CancelTurn,
    Collect,
    Deliver,  # noqa: F401 - re-exported: the shell and tests take outputs from here
    Emit,
    Finished,
    Output,
    Wake,
)
from trio_cap.actors.fleet.ratelimit import next_delay, retry_after
from trio_cap.actors.fleet.touches import Touches, diff_files, written
from trio_cap.events.kinds import (
    Artifact,
    CapError,
    Event,
    FleetCancel,
    FleetCompleted,
    FleetDiff,
    FleetFailed,
    FleetGaveUp,
    FleetInterrupt,
    FleetMessageConsumed,
    FleetMessageRefused,
    FleetPaused,
    FleetResumed,
    FleetRoute,
    Plan,
    PlanEntry,
    PlanStatus,
    SessionCancelled,
    SessionCompleted,
    SessionFailed,
    SessionTurnEnded,
    StopReason,
    TextChunk,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

ASSIGNED_TO = "cap.assigned_to"
DEPENDS_ON = "cap.depends_on"
HANDOFF_DIFF_LIMIT = 16_000
"""Characters of a worktree diff a hand-off carries: a result plus a change of a few hundred
lines stays an input the next agent reads whole (about 4k tokens) instead of crowding out
its task; the artifact names the branch, which holds the whole diff."""
MESSAGE_TO = "cap.message_to"


@attrs.define
class _HandOff:
    """A turn that ended well, its routes and messages waiting for its artifacts."""

    member: str
    text: str
    msg: _Message | None
    seq: int
    section: str
    addressed: list[tuple[tuple[str, tuple[Any, ...]], list[str]]]
    plan: tuple[PlanEntry, ...]
    diff: str | None = ""
    """None until :meth:`FleetMachine.collected` (members with a git worktree)."""


@attrs.define
class _Entry:
    id: str
    content: str
    assigned_to: str
    depends_on: tuple[str, ...]
    status: PlanStatus = "pending"


class FleetMachine(Messages):
    def __init__(self, fleet: Fleet, session_ids: Mapping[str, str],
                 workdirs: Mapping[str, str] | None = None,
                 diffs: Collection[str] = (), queued_input: Collection[str] = ()) -> None:
        """``diffs``: members whose worktree gives a diff (git) to hand on with results;
        ``queued_input``: members whose sessions take input mid-turn (their manifests')."""
        self.fleet = fleet
        self.queued_input = set(queued_input)
        self.diffs = set(diffs) & _handing_on(fleet)
        self.handoffs: deque[_HandOff] = deque()
        self.touches = Touches(workdirs)
        self.members = {m.id: _Member(m.id, session_ids[m.id], m.budget_usd)
                        for m in fleet.sessions}
        self.by_stream = {sid: mid for mid, sid in session_ids.items()}
        self.messages: dict[str, _Message] = {}
        self.entries: dict[str, _Entry] = {}
        self.spent = 0.0
        self.failures: list[str] = []
        self.fired: dict[tuple[int, str], int] = {}
        self.joined: dict[int, dict[str, str]] = {}
        self.joined_hops: dict[int, int] = {}
        self.budget_cancelled = False
        self.finished = False
        self._count = 0

    # ---- inputs -----------------------------------------------------------------------
    def start(self) -> list[Output]:
        out: list[Output] = []
        for sub in self.fleet.plan:
            self.entries[sub.id] = _Entry(sub.id, sub.content, sub.assigned_to, sub.depends_on)
        for member in self.fleet.entry_members():
            self._queue(out, "fleet", member, self.fleet.task, "task", None)
        if self.entries:
            self._publish_plan(out, None)
            self._ready_entries(out, None)
        self._pump(out)
        return out

    def observe(self, stream: str, seq: int, event: Event,
                at: float | None = None) -> list[Output]:
        """One event of a member's session (others are ignored); ``at``: its log time."""
        mid = self.by_stream.get(stream)
        if mid is None or self.finished:
            return []
        member = self.members[mid]
        out: list[Output] = []
        kind = type(event)
        if kind is TextChunk and event.channel == "assistant" and member.status == "working":
            member.text.append(event.text)
            if event.meta and MESSAGE_TO in event.meta:
                to = event.meta[MESSAGE_TO]
                targets = tuple(to) if isinstance(to, list | tuple) else (to,)
                key = (event.message_id, targets)
                if member.addressed and member.addressed[-1][0] == key:
                    member.addressed[-1][1].append(event.text)
                else:
                    member.addressed.append((key, [event.text]))
        elif kind is Artifact and member.status == "working":
            member.artifacts.append(event)
        elif kind is Plan and member.status == "working":
            member.plan = event.entries
        elif kind is ToolCallStart:
            if paths := written(event.name, event.input):
                member.writes[event.call_id] = paths
        elif kind is ToolCallEnd:
            paths = member.writes.pop(event.call_id, [])
            if not event.is_error:
                for path in paths:
                    out += [Emit(e, seq) for e in self.touches.touch(mid, path, "tool",
                                                                     event.call_id)]
        elif kind is CapError and event.code == "rate_limit" and member.status == "working":
            member.limited = True
            member.said = retry_after(event.details, at)
        elif kind is Usage:
            self._spend(out, member, event.cost_usd_estimate, seq)
        elif kind is SessionTurnEnded and member.status == "working":
            self._turn_ended(out, member, event.stop_reason, seq, at)
        elif kind in (SessionCompleted, SessionCancelled, SessionFailed):
            self._member_ended(out, member, kind, seq)
        self._pump(out)
        return out

    def resume(self, member_id: str) -> list[Output]:
        """A paused member's wait is over (the shell's :class:`Wake`)."""
        member = self.members[member_id]
        if self.finished or member.status != "paused":
            return []  # it ended meanwhile: its queue was refused then
        member.status = "idle"
        out: list[Output] = [Emit(FleetResumed(member=member_id, attempt=member.limits))]
        self._pump(out)
        return out

    def interrupt(self, member_id: str, correction: str) -> list[Output]:
        """INTERRUPT: the first output is the ``fleet.interrupt`` (``refused`` set when
        nothing is done)."""
        member = self.members.get(member_id)
        refused = None
        if self.finished:
            refused = "fleet_finished"
        elif member is None:
            refused = "unknown_member"
        elif member.status != "working" or member.current is None:
            refused = "not_working"
        elif member.cancel_asked not in (None, "interrupt"):
            refused = f"cancelling: {member.cancel_asked}"
        if refused is not None or member is None:
            return [Emit(FleetInterrupt(member=member_id, correction=correction,
                                        refused=refused))]
        out: list[Output] = [Emit(FleetInterrupt(member=member_id, correction=correction,
                                                 message_id=member.current))]
        if member.correction is not None:  # a second word before the turn stopped: both
            member.correction += "\n" + correction
            return out
        member.correction = correction
        member.cancel_asked = "interrupt"
        out += [CancelTurn(member_id), Emit(FleetCancel(members=(member_id,),
                                                        reason="interrupt"))]
        return out

    def diffed(self, member: str, diff: str) -> list[Output]:
        """A member's final diff: the files it changed that no tool call said (a shell
        command's edits), touched now."""
        return [Emit(e) for path in diff_files(diff)
                for e in self.touches.touch(member, path, "diff")]

    def _handed(self, member: _Member, text: str) -> str:
        """A worker's whole final text, as the next session receives it, with that turn's
        artifacts: its worktree's diff (bounded) and the agent's own."""
        if not member.section:
            return f"Result from {member.id}:\n{text}"
        return f"Result from {member.id}:\n{text}\n\nArtifacts of that turn:{member.section}"

    # ---- rules ------------------------------------------------------------------------
    def _over_budget(self, member: _Member) -> tuple[Any, float, float] | None:
        if member.budget is not None and member.spent >= member.budget:
            return "session", member.spent, member.budget
        budget = self.fleet.budget_usd
        if budget is not None and self.spent >= budget:
            return "fleet", self.spent, budget
        return None

    def _spend(self, out: list[Output], member: _Member, cost: float, seq: int) -> None:
        member.spent += cost
        self.spent += cost
        concerned: list[_Member] = []
        budget = self.fleet.budget_usd
        if budget is not None and self.spent >= budget and not self.budget_cancelled:
            self.budget_cancelled = True
            concerned = [m for m in self.members.values() if m.status == "working"]
        elif member.budget is not None and member.spent >= member.budget \
                and member.status == "working":
            concerned = [member]
        concerned = [m for m in concerned if m.cancel_asked is None]
        if concerned:
            for m in concerned:
                m.cancel_asked = "budget"
                out.append(CancelTurn(m.id))
            out.append(Emit(FleetCancel(members=tuple(m.id for m in concerned), reason="budget",
                                        spent_usd=round(self.spent, 10)), seq))

    def _turn_ended(self, out: list[Output], member: _Member, stop: StopReason,
                    seq: int, at: float | None) -> None:
        """END, then the next message injected mid-turn is the turn in flight (turns end in
        the order they were sent)."""
        following = member.inflight.popleft() if member.inflight else None
        self._end_turn(out, member, stop, seq, at)
        if following is not None:
            self._begin(member, following)

    def _end_turn(self, out: list[Output], member: _Member, stop: StopReason,
                  seq: int, at: float | None) -> None:
        msg = self.messages[member.current] if member.current else None
        member.status = "idle"
        member.current = None
        text = "".join(member.text)
        if msg is not None:
            out.append(Emit(FleetMessageConsumed(message_id=msg.id, target=member.id,
                                                 stop_reason=stop), seq))
            if member.correction is not None:
                correction, member.correction = member.correction, None
                self._queue(out, "human", member.id, _corrected(msg.text, correction),
                            "interrupt", seq, hops=msg.hops, entry=msg.entry, front=True,
                            replaces=msg.id, owes=msg.owes)
                return
            if stop != "end_turn" and member.limited and member.cancel_asked is None:
                self._pause(out, member, msg, seq, at)
                return
        if stop == "end_turn":
            member.limits, member.last_delay = 0, None
            if msg is not None:
                self._entry_status(out, msg, "completed", seq)
            job = _HandOff(member.id, text, msg, seq, _agent_artifacts(member.artifacts),
                           member.addressed, member.plan)
            if member.id in self.diffs:
                job.diff = None
                out.append(Collect(member.id))
            member.collecting = True
            self.handoffs.append(job)
            self._drain(out)
            return
        if msg is not None:
            self._entry_status(out, msg, "cancelled", seq)
        if stop == "cancelled" and member.cancel_asked == "race_lost":
            return
        why = "cancelled: budget exceeded" if member.cancel_asked == "budget" else stop
        self.failures.append(f"{member.id}: turn ended with {why}")

    def _drain(self, out: list[Output]) -> None:
        """HANDOFF: the turn ends whose artifacts are in, in the order the turns ended (a
        race's first done stays first while a diff is taken)."""
        while self.handoffs and self.handoffs[0].diff is not None:
            job = self.handoffs.popleft()
            member = self.members[job.member]
            member.collecting = False
            member.section = job.section + job.diff  # type: ignore[operator]
            mark = len(out)
            msg, text, seq = job.msg, job.text, job.seq
            self._route(out, member, text, seq, msg.hops if msg is not None else 0, job.plan)
            self._mediate(out, member, text, msg, seq, job.addressed)
            if msg is not None and msg.owes is not None:
                self._reply(out, member, text, msg, seq, mark)
            self._ready_entries(out, seq)

    def collected(self, member_id: str, content: str, size: int, uri: str | None,
                  branch: str | None) -> list[Output]:
        """The member's worktree diff for its oldest turn end waiting for one (``content``:
        at most :data:`HANDOFF_DIFF_LIMIT` characters of ``size`` bytes); the first output
        is its ``fleet.diff``."""
        job = next(j for j in self.handoffs if j.member == member_id and j.diff is None)
        truncated = len(content.encode()) < size
        out: list[Output] = [Emit(FleetDiff(
            member=member_id, turn_end=job.seq, name=f"{member_id}.diff", size=size,
            content=content, truncated=truncated, uri=uri, branch=branch), job.seq)]
        job.diff = _diff_section(f"{member_id}.diff", content, size, uri, branch, truncated)
        self._drain(out)
        self._pump(out)
        return out

    def _pause(self, out: list[Output], member: _Member, msg: _Message, seq: int,
               at: float | None) -> None:
        """LIMIT: wait, then the same message again — or give up past the retries."""
        member.limits += 1
        policy = self.fleet.rate_limit
        if member.limits > policy.retries:
            reason = (f"{member.id}: rate-limited {member.limits} times in a row "
                      f"(rate_limit.retries = {policy.retries}): gave up")
            out.append(Emit(FleetGaveUp(member=member.id, attempts=member.limits,
                                        reason=reason), seq))
            self.failures.append(reason)
            self._entry_status(out, msg, "cancelled", seq)
            return
        delay = next_delay(policy, member.limits, member.said, member.last_delay)
        member.last_delay = delay
        member.status = "paused"
        member.queue.appendleft(msg.id)
        out.append(Emit(FleetPaused(member=member.id, until=(at or 0.0) + delay, delay_s=delay,
                                    attempt=member.limits, retry_after=member.said,
                                    message_id=msg.id), seq))
        out.append(Wake(member.id, delay))

    def _member_ended(self, out: list[Output], member: _Member, kind: type, seq: int) -> None:
        was = member.status
        member.status = "ended"
        if (was == "working" or kind is not SessionCompleted) \
                and (member.cancel_asked != "race_lost" or kind is SessionFailed):
            self.failures.append(f"{member.id}: session {kind.__name__[7:].lower()}")
        for mid in [member.current, *member.inflight, *member.queue]:
            if mid is not None:
                msg = self.messages[mid]
                out.append(Emit(FleetMessageRefused(source=msg.source, target=msg.target,
                                                    text=msg.text, reason="target_ended",
                                                    message_id=mid, hops=msg.hops,
                                                    reply_to=msg.reply_to), seq))
                self._entry_status(out, msg, "cancelled", seq)
        member.queue.clear()
        member.inflight.clear()
        member.current = None
        member.correction = None

    def _fire(self, index: int, key: str, rounds: int | None) -> bool:
        count = self.fired.get((index, key), 0)
        if rounds is not None and count >= rounds:
            return False
        self.fired[(index, key)] = count + 1
        return True

    def _route(self, out: list[Output], member: _Member, text: str, seq: int,
               hops: int, plan: tuple[PlanEntry, ...]) -> None:
        """ROUTE: the turn's text handed on by the routes; each hand-off carries the hops of
        the input that started the turn, so a mediated message whose reply turn fires a route
        back (A messages B, B's route hands to A, A messages B …) still counts toward
        ``hop_limit`` instead of starting again at zero."""
        mid = member.id
        for index, route in enumerate(self.fleet.routes):
            if isinstance(route, Pipeline):
                for a, b in route.edges:
                    if a == mid and self._fire(index, a, route.rounds):
                        out.append(Emit(FleetRoute(pattern="pipeline", sources=(a,),
                                                   targets=(b,)), seq))
                        self._queue(out, a, b, self._handed(member, text), "pipeline", seq,
                                    hops=hops)
            elif isinstance(route, FanOut):
                if route.source == mid and self._fire(index, mid, route.rounds):
                    out.append(Emit(FleetRoute(pattern="fan_out", sources=(mid,),
                                               targets=route.targets), seq))
                    for target in route.targets:
                        self._queue(out, mid, target, self._handed(member, text), "fan_out", seq,
                                    hops=hops)
            elif isinstance(route, Join):
                if mid in route.sources:
                    got = self.joined.setdefault(index, {})
                    got.setdefault(mid, self._handed(member, text))
                    self.joined_hops[index] = max(self.joined_hops.get(index, 0), hops)
                    if len(got) == len(route.sources) and self._fire(index, "", route.rounds):
                        del self.joined[index]
                        joined_hops = self.joined_hops.pop(index, 0)
                        out.append(Emit(FleetRoute(pattern="join", sources=route.sources,
                                                   targets=(route.target,)), seq))
                        combined = "\n\n".join(got[s] for s in route.sources)
                        self._queue(out, ",".join(route.sources), route.target, combined,
                                    "join", seq, hops=joined_hops)
            elif isinstance(route, Race):
                if mid in route.sources and self._fire(index, "", route.rounds):
                    losers = [self.members[s] for s in route.sources if s != mid]
                    cancelled = []
                    for loser in losers:
                        for qid in list(loser.queue):
                            if self.messages[qid].via == "task":
                                loser.queue.remove(qid)
                        if loser.status == "working":
                            loser.cancel_asked = "race_lost"
                            cancelled.append(loser.id)
                            out.append(CancelTurn(loser.id))
                        elif loser.status == "paused" and not loser.queue:
                            loser.status = "idle"  # nothing left to wait a rate limit out for
                    targets = (route.target,) if route.target else ()
                    out.append(Emit(FleetRoute(pattern="race", sources=(mid,), targets=targets,
                                               cancelled=tuple(cancelled)), seq))
                    if cancelled:
                        out.append(Emit(FleetCancel(members=tuple(cancelled),
                                                    reason="race_lost"), seq))
                    if route.target:
                        self._queue(out, mid, route.target, self._handed(member, text), "race", seq,
                                    hops=hops)
            elif isinstance(route, BySubtask) and route.source == mid \
                    and self._fire(index, mid, route.rounds):
                added = self._adopt_plan(member, plan)
                if added:
                    out.append(Emit(FleetRoute(pattern="by_subtask", sources=(mid,),
                                               targets=tuple(dict.fromkeys(
                                                   e.assigned_to for e in added))), seq))
                    self._publish_plan(out, seq)

    def _adopt_plan(self, member: _Member, plan: tuple[PlanEntry, ...]) -> list[_Entry]:
        """The source's own plan as master plan entries (those assigned to a member)."""
        added = []
        for i, entry in enumerate(plan):
            meta = entry.meta or {}
            who = meta.get(ASSIGNED_TO)
            content = entry.content
            if isinstance(who, str):
                who = who.removeprefix("cap://")
                who = self.by_stream.get(who, who)
            elif ":" in content:
                prefix, rest = content.split(":", 1)
                if prefix.strip() in self.members:
                    who, content = prefix.strip(), rest.strip()
            if who not in self.members or who == member.id:
                continue
            deps = meta.get(DEPENDS_ON) or ()
            eid = f"{member.id}.{entry.id or i + 1}"
            deps = tuple(d if d in self.entries else f"{member.id}.{d}" for d in deps
                         if isinstance(d, str))
            self.entries[eid] = _Entry(eid, content, who, deps)
            added.append(self.entries[eid])
        return added

    def _ready_entries(self, out: list[Output], cause: int | None) -> None:
        changed = False
        for entry in self.entries.values():
            if entry.status != "pending":
                continue
            deps = [self.entries.get(d) for d in entry.depends_on]
            if all(d is not None and d.status == "completed" for d in deps) \
                    and self.members[entry.assigned_to].status != "ended":
                entry.status = "in_progress"
                changed = True
                self._queue(out, "fleet", entry.assigned_to,
                            f"Subtask {entry.id}:\n{entry.content}", "subtask", cause,
                            entry=entry.id)
        if changed:
            self._publish_plan(out, cause)

    def _entry_status(self, out: list[Output], msg: _Message, status: PlanStatus,
                      cause: int | None) -> None:
        entry = self.entries.get(msg.entry) if msg.entry else None
        if entry is not None and entry.status == "in_progress":
            entry.status = status
            self._publish_plan(out, cause)

    def _publish_plan(self, out: list[Output], cause: int | None) -> None:
        entries = tuple(
            PlanEntry(id=e.id, content=e.content, status=e.status, meta={
                ASSIGNED_TO: f"cap://{self.members[e.assigned_to].session_id}",
                DEPENDS_ON: list(e.depends_on)})
            for e in self.entries.values())
        out.append(Emit(Plan(entries=entries), cause))

    def _maybe_finish(self, out: list[Output]) -> None:
        if self.finished or self.handoffs:
            return
        if any(m.status in ("working", "paused") or (m.status == "idle" and m.queue)
               for m in self.members.values()):
            return
        self.finished = True
        never = [e.id for e in self.entries.values() if e.status != "completed"]
        problems = list(self.failures)
        if never:
            problems.append(f"plan entries not completed: {', '.join(never)}")
        spent = round(self.spent, 10)
        if problems:
            reason = "; ".join(problems)
            out.append(Emit(FleetFailed(fleet=self.fleet.name, reason=reason, spent_usd=spent)))
            out.append(Finished(False, reason))
        else:
            out.append(Emit(FleetCompleted(fleet=self.fleet.name, spent_usd=spent)))
            out.append(Finished(True))


def _corrected(original: str, correction: str) -> str:
    """The interrupted input again, with the person's correction after it: the agent
    redoes the work as corrected, not the correction alone out of context."""
    return (f"{original}\n\nCorrection (your previous turn on this was interrupted; what "
            f"you had done so far stands): {correction}")


def _handing_on(fleet: Fleet) -> set[str]:
    """Members whose results a route hands to another session (their diffs go with them)."""
    out: set[str] = set()
    for route in fleet.routes:
        if isinstance(route, Pipeline):
            out.update(a for a, _b in route.edges)
        elif isinstance(route, FanOut):
            out.add(route.source)
        elif isinstance(route, Join) or (isinstance(route, Race) and route.target):
            out.update(route.sources)
    return out


def _agent_artifacts(artifacts: list[Artifact]) -> str:
    """The turn's own ``cap.artifact`` events, named (their content is the agent's)."""
    return "".join(f"\n- {a.name} ({a.uri or a.mime_type}, {a.size} bytes)" for a in artifacts)


def _diff_section(name: str, content: str, size: int, uri: str | None, branch: str | None,
                  truncated: bool) -> str:
    where = ", ".join(x for x in (f"branch {branch}" if branch else "", uri or "") if x)
    if not size:
        return ""  # nothing changed: nothing to review, no line to read past
    cut = (f"; its first {len(content)} characters, the branch holds the rest"
           if truncated else "")
    return f"\n- {name}: its worktree's diff ({where}, {size} bytes{cut}):\n{content}"
