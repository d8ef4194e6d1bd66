"""From a fleet's log to the state a resumed run goes on from (``cap fleet resume``).

Why a replay of the machine and not a projection of its events: the fleet's rules
(:class:`~.machine.FleetMachine`) are a pure function of what the members' sessions
logged plus a few outside calls (a delivery's answer, a wake-up, a person's
correction), each of which left an event on the fleet's stream.  Feeding the log back
through a fresh machine rebuilds every part of its state — queues, budgets, route
rounds, joins, plans, rate-limit counts, message ids — with the code that made it, and
every decision the replay makes is checked against the event the dead run logged for
it.  A log whose fleet events the rules do not reproduce is refused (refusing beats
guessing what the dead run was doing), as a session's log that does not replay is.

What the replay ends with (:class:`FleetPoint`):

* ``unlogged``: decisions the dead run had made and not yet written (the crash came
  between the member's event and the fleet's answer): written by the resume.
* messages the machine handed to a member and the log has no answer for: when the
  member's stream holds the fleet's inject (the delivery happened, its
  ``fleet.message.delivered`` was lost) the delivery is logged now (``claimed``) and the
  member's session runs it; else it is delivered now (``deliver``).  A message delivered
  whose turn did not end is not sent again: the member's session re-runs that turn with
  the same input (``redelivered``).  A consumed message is never sent again.
* ``paused``: members waiting out a rate limit, until their ``fleet.paused``'s ``until``.
* ``cancel``: members whose turn the fleet was cancelling: the re-run turn is cancelled.

Pure: no I/O, no clock; the envelopes come in as a sequence.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from trio_cap.actors.fleet.machine import FleetMachine
from trio_cap.actors.fleet.model import Fleet
from trio_cap.actors.fleet.outputs import Collect, Deliver, Emit, Finished, Output, Wake
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    Artifact,
    FleetArchive,
    FleetCompleted,
    FleetConflict,
    FleetDiff,
    FleetFailed,
    FleetInterrupt,
    FleetMember,
    FleetMessageDelivered,
    FleetMessageRefused,
    FleetPaused,
    FleetResumed,
    FleetRunResumed,
    FleetStarted,
    FleetTouched,
    FleetWorktree,
    InputInjected,
    SessionCancelled,
    SessionCompleted,
    SessionCreated,
    SessionFailed,
    SessionOwned,
    SessionWorking,
)

_SESSION_END = (SessionCompleted, SessionCancelled, SessionFailed)
_BEFORE_MACHINE = ("fleet.started", "fleet.worktree", "fleet.setup", "fleet.member",
                   "fleet.archive", "fleet.run_resumed")


class CannotResumeFleet(Exception):
    """The log holds no fleet to resume, or one whose state cannot be rebuilt safely."""


@attrs.frozen
class MemberLog:
    """A member's session as the log left it."""

    member: str
    session_id: str
    cwd: str
    recorded: tuple[Envelope, ...]
    ended: bool
    listed: bool = True
    """Whether its ``fleet.member`` is in the log (the run may have died between the
    session's creation and that record: the resume writes it)."""


@attrs.define
class FleetPoint:
    started: FleetStarted
    after_seq: int
    worktrees: dict[str, FleetWorktree]
    members: dict[str, MemberLog]
    """Every member whose session was started (``fleet.member``), by id."""
    machine: FleetMachine | None = None
    """None: the run died before every member's session started (then nothing was
    delivered: the missing sessions are started and the machine begins)."""
    setup_done: bool = False
    """Whether the setup steps had finished (a member's session started after them)."""
    unlogged: list[Emit] = attrs.field(factory=list)
    claimed: list[Emit] = attrs.field(factory=list)
    deliver: list[Deliver] = attrs.field(factory=list)
    redelivered: list[str] = attrs.field(factory=list)
    paused: dict[str, float] = attrs.field(factory=dict)
    """member → ``until`` (log clock seconds)."""
    cancel: list[str] = attrs.field(factory=list)
    """Members whose turn the fleet was cancelling (budget, race lost, interrupt): their
    sessions re-run that turn, which is cancelled again once it starts."""
    finish: Finished | None = None
    """The machine had decided the fleet's end, which the log does not hold yet."""
    ended: str | None = None
    """``completed`` / ``failed`` when the fleet's stream already ended."""
    diffed: set[str] = attrs.field(factory=set)
    """Members whose final diff is already attached (``cap.artifact``)."""
    collect: list[Collect] = attrs.field(factory=list)
    """Turn ends whose hand-off waited for a worktree diff the log does not hold: taken
    now (the routes fire once it is in)."""

    @property
    def missing(self) -> list[str]:
        """Members with no session yet (the run died while it started them), file order."""
        return [m for m in self.started.members if m not in self.members]

    @property
    def live_sessions(self) -> list[MemberLog]:
        return [m for m in self.members.values() if not m.ended]

    def resumed_event(self) -> FleetRunResumed:
        return FleetRunResumed(
            fleet=self.started.fleet, after_seq=self.after_seq,
            sessions=tuple(m.member for m in self.live_sessions),
            redelivered=tuple(self.redelivered),
            delivering=tuple(d.message_id for d in self.deliver),
            paused=tuple(self.paused), unlogged=len(self.unlogged) + len(self.claimed))


def fleet_names(envs: Sequence[Envelope]) -> list[str]:
    return list(dict.fromkeys(e.event.fleet for e in envs  # type: ignore[attr-defined]
                              if type(e.event) is FleetStarted))


def pick_fleet(envs: Sequence[Envelope], name: str | None) -> str:
    """Which fleet of the log to resume: the only one, or ``name``."""
    names = fleet_names(envs)
    if not names:
        raise CannotResumeFleet("has no fleet in it (no fleet.started event)")
    if name is None:
        if len(names) > 1:
            raise CannotResumeFleet(f"holds fleets {', '.join(names)}: say which with "
                                    "--fleet NAME")
        return names[0]
    if name not in names:
        raise CannotResumeFleet(f"has no fleet {name} (it has {', '.join(names)})")
    return name


def started_of(envs: Sequence[Envelope], name: str) -> tuple[int, FleetStarted]:
    """The index in ``envs`` and event of the fleet's last run."""
    index = max(i for i, e in enumerate(envs) if type(e.event) is FleetStarted
                and e.event.fleet == name)  # type: ignore[attr-defined]
    return index, envs[index].event  # type: ignore[return-value]


def rebuild_fleet(fleet: Fleet, envs: Sequence[Envelope]) -> FleetPoint:
    """The fleet's state once every event of its last run in ``envs`` is replayed."""
    return _Replay(fleet, envs).run()


class _Replay:
    def __init__(self, fleet: Fleet, envs: Sequence[Envelope]) -> None:
        self.fleet = fleet
        self.stream = f"fleet:{fleet.name}"
        start, started = started_of(envs, fleet.name)
        self.envs = envs[start:]
        self.point = FleetPoint(started=started, after_seq=envs[-1].seq, worktrees={},
                                members={})
        self.expected: list[Emit] = []
        self.pending: dict[str, tuple[Deliver, int]] = {}
        self.collects: list[Collect] = []
        """Message id → (the delivery asked for, the seq the machine had reached then)."""
        self.until: dict[str, float] = {}
        self.claimed_seqs: set[int] = set()
        self.cwds: dict[str, str] = {}
        self.finished = False
        self.at = start

    def run(self) -> FleetPoint:
        point = self.point
        member_events: dict[str, list[Envelope]] = {}
        sessions: dict[str, str] = {}
        for env in self.envs:
            self.at = env.seq
            ev = env.event
            if env.stream == self.stream:
                if type(ev) is FleetWorktree:
                    point.worktrees[ev.member] = ev
                elif type(ev) is FleetMember:
                    point.setup_done = True
                    sessions[ev.member] = ev.session_id
                    self.cwds[ev.member] = ev.cwd
                    if len(sessions) == len(self.fleet.sessions):
                        self._start(sessions, member_events)
                elif point.machine is not None:
                    self._fleet_event(env)
                elif type(ev) in (FleetCompleted, FleetFailed):
                    point.ended = "completed" if type(ev) is FleetCompleted else "failed"
                elif env.kind not in _BEFORE_MACHINE:
                    raise CannotResumeFleet(f"seq {env.seq}: {env.kind} before every member's "
                                            "session started")
                continue
            if type(ev) is not SessionOwned:
                member_events.setdefault(env.stream, []).append(env)
            if point.machine is not None and env.stream in point.machine.by_stream:
                self._take(point.machine.observe(env.stream, env.seq, ev, env.at))
        for member in self.fleet.ids:
            listed = member in sessions
            sid = sessions.get(member, f"{self.fleet.name}.{member}")
            recorded = tuple(member_events.get(sid, ()))
            created = next((e.event for e in recorded if type(e.event) is SessionCreated), None)
            if not listed and created is None:
                continue  # never started
            cwd = self.cwds[member] if listed else created.cwd  # type: ignore[union-attr]
            ended = any(type(e.event) in _SESSION_END for e in recorded)
            point.members[member] = MemberLog(member, sid, cwd, recorded, ended, listed)
        if point.machine is not None:
            self._settle()
        return point

    # ---- the replay -------------------------------------------------------------------
    def _start(self, sessions: dict[str, str],
               member_events: dict[str, list[Envelope]]) -> None:
        missing = [m for m in self.fleet.ids if m not in sessions]
        if missing:
            raise CannotResumeFleet(f"its members differ from the fleet file's (no session "
                                    f"for {', '.join(missing)})")
        machine = FleetMachine(self.fleet, sessions, self.cwds,
                               [m for m, wt in self.point.worktrees.items() if wt.mode == "git"],
                               [m for m, sid in sessions.items()
                                if any(type(e.event) is SessionCreated and e.event.queued_input
                                       for e in member_events.get(sid, ()))])
        self.point.machine = machine
        self._take(machine.start())

    def _take(self, outputs: list[Output]) -> None:
        for output in outputs:
            if isinstance(output, Emit):
                self.expected.append(output)
                if type(output.event) is FleetPaused:
                    self.until[output.event.member] = output.event.until
            elif isinstance(output, Deliver):
                self.pending[output.message_id] = (output, self.at)
            elif isinstance(output, Collect):
                self.collects.append(output)
            elif isinstance(output, Finished):
                self.finished = True
                self.point.finish = output
            # CancelTurn and Wake: the state after the replay says which still stand

    def _fleet_event(self, env: Envelope) -> None:
        machine = self.point.machine
        assert machine is not None
        ev = env.event
        kind = type(ev)
        if self._matched(env):
            if kind in (FleetCompleted, FleetFailed):
                self.point.ended = "completed" if kind is FleetCompleted else "failed"
                self.point.finish = None
            return
        if kind is FleetMessageDelivered:
            if self.pending.pop(ev.message_id, None) is None:
                raise self._diverged(env, "no delivery of that message was pending")
            self.claimed_seqs.add(ev.input_seq)
        elif kind is FleetMessageRefused and ev.message_id in self.pending:
            self.pending.pop(ev.message_id)
            self._outside(env, machine.undeliverable(ev.message_id, ev.reason))
        elif kind is FleetResumed:
            self._outside(env, machine.resume(ev.member))
        elif kind is FleetInterrupt:
            self._outside(env, machine.interrupt(ev.member, ev.correction))
        elif kind in (FleetRunResumed, FleetArchive):
            pass  # an earlier resume (and its answerer): what followed replays as any other
        elif kind is FleetDiff:  # a hand-off's diff, taken by the shell
            if Collect(ev.member) not in self.collects:
                raise self._diverged(env, "no diff of that member was asked for")
            self.collects.remove(Collect(ev.member))
            self._outside(env, machine.collected(ev.member, ev.content, ev.size, ev.uri,
                                                 ev.branch))
        elif kind is Artifact:
            self.point.diffed.add(str((ev.meta or {}).get("cap.member", "")))
        elif kind in (FleetTouched, FleetConflict) and ev.via == "diff" and self.finished:
            if kind is FleetTouched:  # the wind-up's: known, so a resumed one is not repeated
                machine.touches.touch(ev.member, ev.path, "diff")
        elif kind is FleetFailed and not self.finished:
            self.point.ended = "failed"  # stopped from outside (abandoned)
            self.point.finish = None
        else:
            raise self._diverged(env, "the fleet's rules did not decide it")

    def _matched(self, env: Envelope) -> bool:
        """Whether the event is one the machine decided: then it is no longer pending."""
        for i, emit in enumerate(self.expected):
            if emit.event == env.event and emit.cause == env.cause:
                del self.expected[i]
                return True
        return False

    def _outside(self, env: Envelope, outputs: list[Output]) -> None:
        """An outside call the log records: its first output is the event itself."""
        first = outputs[0] if outputs else None
        if not isinstance(first, Emit) or first.event != env.event:
            raise self._diverged(env, "the fleet's rules answer that call differently")
        self._take(outputs[1:])

    def _diverged(self, env: Envelope, why: str) -> CannotResumeFleet:
        return CannotResumeFleet(f"its fleet log does not replay at seq {env.seq} "
                                 f"({env.kind}): {why}")

    # ---- where it stands ----------------------------------------------------------------
    def _settle(self) -> None:
        point = self.point
        machine = point.machine
        assert machine is not None
        point.unlogged = list(self.expected)
        point.collect = list(self.collects)
        for message_id, (deliver, asked_at) in self.pending.items():
            inject = self._inject_of(deliver, asked_at)
            if inject is None:
                point.deliver.append(deliver)
                continue
            self.claimed_seqs.add(inject.seq)
            turn = next((e.event.turn for e in point.members[deliver.member].recorded
                         if type(e.event) is SessionWorking and e.cause == inject.seq
                         and not e.event.resumed), None)
            point.claimed.extend(e for e in machine.delivered(message_id, inject.seq, turn)
                                 if isinstance(e, Emit))
        owed = {d.message_id for d in point.deliver}
        for mid, member in machine.members.items():
            if member.status == "working" and member.current is not None \
                    and member.current not in owed:  # its inject is in the log: re-run
                point.redelivered.append(member.current)
                point.redelivered.extend(m for m in member.inflight if m not in owed)
                if member.cancel_asked is not None:
                    point.cancel.append(mid)
            elif member.status == "paused":
                point.paused[mid] = self.until.get(mid, 0.0)

    def _inject_of(self, deliver: Deliver, asked_at: int) -> Envelope | None:
        """The fleet's inject of ``deliver`` in its member's stream, if it got there."""
        source = f"fleet:{self.fleet.name}"
        for env in self.point.members[deliver.member].recorded:
            ev = env.event
            if type(ev) is InputInjected and env.seq > asked_at and ev.source == source \
                    and ev.text == deliver.text and env.seq not in self.claimed_seqs:
                return env
        return None


def actions(point: FleetPoint) -> list[Output]:
    """What the resumed shell does first, in order: the lost deliveries' records, the lost
    decisions, the deliveries still owed (the cancels still asked for wait for the re-run
    turn to start: :attr:`FleetPoint.cancel`)."""
    out: list[Output] = [*point.claimed, *point.unlogged, *point.deliver, *point.collect]
    if point.finish is not None:
        out.append(point.finish)
    return out


def wakes(point: FleetPoint, now: float) -> list[Wake]:
    """The paused members' wake-ups, at their ``until`` on the log's clock (now or later)."""
    return [Wake(member, max(0.0, until - now)) for member, until in point.paused.items()]
