"""``cap replay --check``: run a recorded session again, offline, and compare every event.

The session actor is a thin shell: what it logs is decided by the session
machine (and, with ``--record``, by the binding's machine) from its inputs.
This module is that shell again without Trio, processes or a filesystem: it
rebuilds the machines from the session's first events, takes each *input*
from the log in the order the actor handled it — the recorded frames
(``frame.in``), the owner's commands, the timer expiries and the owner's
close (both known from the events they caused) — and appends what the
machines answer to a virtual log whose seqs are the recorded ones.  The first
event that differs is a :class:`Divergence`.

How inputs are recognised, in the order the actor's inbox took them:

* ``frame.in``: fed to the binding's replay machine (:mod:`.bindings`); its
  outputs are delivered as the Deliverer does.  Batches the actor merged
  (consecutive inbox messages taken in one go) are merged here when the log
  shows the next batch's first event right where this batch's events end;
  merging or not gives the same events unless the machine answered in
  between, which the log shows.
* in-process (no wire): agent events are their own frames; ``frame.in``
  signals mark turn ends and the agent's end.  A log recorded with
  ``--record off`` has neither, so turn ends and the agent's death are taken
  from the ``session.turn_ended`` / ``session.failed`` they caused.
* ``input.injected``, ``cancel.requested``, a human's ``permission.decided`` /
  ``ask.answered``: commands, applied as the actor applies them (refused
  ones left only their ``cap.error``, which is taken as it is).
* a ``cap.error`` ``turn_timeout`` / ``idle_timeout``: the timer fired.
* a terminal event nothing else explains: the owner closed the session (or
  the orchestrator shut it down, for a cancellation with its own reason).
* ``permission.paths_resolved``: the filesystem fact the actor looked up,
  given back when the replayed request needs it.
"""

from __future__ import annotations

import functools
import gc
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import Any

import msgspec

from trio_cap.actors.bindings.base import AgentBatch, AgentGone, KillAgent, TurnEnded
from trio_cap.actors.replay.bindings import (
    REPLAY_BINDINGS,
    InprocReplay,
    ReplayBinding,
    replayable,
)
from trio_cap.actors.replay.compare import CheckResult, Divergence, group_sessions
from trio_cap.actors.session.machine import (
    AUTO_ANSWER,
    TERMINAL,
    CancelAgent,
    Close,
    Emit,
    Output,
    Send,
    SessionMachine,
    State,
)
from trio_cap.actors.session.policy import Answerer, AutoAnswer, PermissionPolicy
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    AgentRaw,
    AskAnswered,
    BindingFallback,
    Cancel,
    CancelRequested,
    CapError,
    Event,
    FrameIn,
    FrameOut,
    InputInjected,
    PermissionDecided,
    PermissionPathsResolved,
    PermissionRequest,
    RunResumed,
    SessionCancelled,
    SessionCompleted,
    SessionConfig,
    SessionCreated,
    SessionFailed,
    SessionInputRequired,
    SessionStarting,
    SessionTurnEnded,
    SessionWarning,
)

__all__ = ["CheckResult", "Divergence", "SessionReplay", "check_sessions", "group_sessions",
           "logged_answers"]
"""``group_sessions``, ``Divergence`` and ``CheckResult`` live in :mod:`.compare`; named here
too, where callers have always found them."""

_CLOSE_REASONS = ("closed while a turn was running", "closed before the agent was ready")
_TIMERS = ("turn_timeout", "idle_timeout")
_REFUSALS = ("invalid_state", "cap_unknown_permission", "unknown_ask", "cap_invalid_answer")
_TERMINAL = (SessionCompleted, SessionCancelled, SessionFailed)


class _LogEnds(Exception):
    """The log of a run that never ended (killed) stops here."""


class _CrashCut(Exception):
    """The run was killed here and later resumed (``run.resumed`` comes next)."""


_FRAMES = (FrameIn, FrameOut)
_EVENT = attrgetter("event")


def _untimed(event: Event) -> Event:
    """Frame events compare without their monotonic time (it is the world's, not a decision)."""
    kind = type(event)
    if kind is FrameIn or kind is FrameOut:
        return msgspec.structs.replace(event, t=0.0)  # type: ignore[type-var]
    return event


def _is_agent(event: Event) -> bool:
    return event.direction == "in" or type(event) is AgentRaw


def _separates(event: Event) -> bool:
    """An event the actor logs only between two inbox batches (a machine's answer, a command)."""
    kind = type(event)
    if kind in (FrameIn, FrameOut, AgentRaw, PermissionPathsResolved, SessionWarning):
        return False
    return event.direction != "in"


def logged_answers(recorded: Sequence[Envelope]) -> Answerer:
    """The answerer a session ran with, played back from what it logged: its answers
    (``ask.answered`` by ``policy:auto_answer``) and its escalations (the ``_meta`` on
    the headless ``ask.answered`` or the ``session.input_required`` that followed); the
    archive it searched is not in the log, and need not be."""
    said: dict[str, AutoAnswer] = {}
    for env in recorded:
        ev = env.event
        if type(ev) is AskAnswered and ev.by == AUTO_ANSWER:
            said[ev.ask_id] = AutoAnswer(ev.value, dict(ev.meta or {}))
        elif type(ev) is AskAnswered and ev.by == "policy:headless" and ev.meta:
            said.setdefault(ev.ask_id, AutoAnswer(None, dict(ev.meta)))
        elif type(ev) is SessionInputRequired and ev.reason == "ask" and ev.meta:
            said.setdefault(ev.ref, AutoAnswer(None, dict(ev.meta)))
    return lambda ask: said.get(ask.ask_id, AutoAnswer())


class SessionReplay:
    """One recorded session run again through fresh machines; :meth:`run` raises
    :class:`Divergence` at the first difference."""

    def __init__(self, recorded: Sequence[Envelope], machine_factory: Any = SessionMachine
                 ) -> None:
        first = recorded[0].event
        if type(first) is not SessionCreated:
            raise ValueError(f"stream {recorded[0].stream!r} does not start with session.created")
        self.rec = recorded
        self.created: SessionCreated = first  # type: ignore[assignment]
        self.sid = self.created.session_id
        # what the replay needs to know up front, from the session's kinds (C loops: this
        # runs for every session of the log, over every event)
        events = list(map(_EVENT, recorded))
        kinds = list(map(type, events))
        present = set(kinds)
        self.kinds = kinds
        recorded_frames = FrameOut in present or FrameIn in present
        complete = not present.isdisjoint(_TERMINAL)
        self.ids: deque[str] = deque()
        if FrameOut in present:
            for ev in compress(events, map(is_, kinds, repeat(FrameOut))):
                self.ids.extend(ev.ids)  # type: ignore[attr-defined]
        config: SessionConfig | None = events[kinds.index(SessionConfig)] \
            if SessionConfig in present else None  # type: ignore[assignment]
        name: str | None = events[kinds.index(SessionStarting)].binding \
            if SessionStarting in present else None  # type: ignore[attr-defined]
        policy = PermissionPolicy(name=self.created.permissions,  # type: ignore[arg-type]
                                  allow_high_risk=self.created.allow_high_risk,
                                  human=self.created.human, chosen=self.created.policy_chosen,
                                  allow_tools=self.created.allow_tools,
                                  deny_tools=self.created.deny_tools)
        self.config: SessionConfig = config or SessionConfig(  # type: ignore[assignment]
            cwd=self.created.cwd, model=self.created.model, budget_usd=self.created.budget_usd,
            permission_mode=policy.permission_mode)  # type: ignore[arg-type]
        extra = {"answerer": logged_answers(recorded)} if self.created.auto_answer else {}
        self.machine = machine_factory(self.created, self.config, policy,
                                       queued_input=self.created.queued_input, **extra)
        name = name or self.created.binding
        self.recorded_frames = recorded_frames
        factory = REPLAY_BINDINGS.get(name)
        usable = factory is not None and (not factory.decodes or replayable(factory, recorded))
        self.undecoded = name if recorded_frames and not usable else None
        """A binding that recorded frames but has no replay machine in this build (or whose
        log lacks what its machine needs): its frames are taken as recorded and the session
        is checked from its events."""
        self.framed = recorded_frames and usable and factory.decodes  # type: ignore[union-attr]
        """The binding's machine made the agent's events from recorded frames (else the
        events themselves are the inputs: in process, or recorded with --record off)."""
        self.complete = complete
        self.pos = 0
        self.pending: list[Event] = []
        self.unlogged: list[Event] = []
        """What the step the run was killed in had still to write (its input was logged, its
        reaction only partly): a resume writes it right after ``run.resumed``."""
        self.binding: ReplayBinding | None = None
        self.binding_name: str | None = None
        self.conn = False

    @functools.cached_property
    def texts(self) -> dict[int, str]:
        """The owner's inputs by seq, for a resume's reconcile (made only when one comes)."""
        return {env.seq: env.event.text  # type: ignore[attr-defined]
                for env in self.rec if type(env.event) is InputInjected}

    # ---- the virtual log ------------------------------------------------------
    def _append(self, events: Iterable[Event], cause: int | None) -> int:
        rec, last, pos, n = self.rec, 0, self.pos, len(self.rec)
        try:
            for ev in events:
                if pos >= n:
                    if not self.complete:
                        raise _LogEnds  # the run was cut here (killed): nothing more to compare
                    raise Divergence(self.sid, None, None, (cause, ev), "the replay goes on")
                expected = rec[pos]
                was = expected.event
                if expected.cause != cause or (was is not ev and was != ev and (
                        type(was) not in _FRAMES or _untimed(was) != _untimed(ev))):
                    if type(was) is RunResumed:
                        raise _CrashCut  # the dead run never logged the rest of this step
                    raise Divergence(self.sid, expected.seq, expected, (cause, ev))
                last = expected.seq
                pos += 1
        finally:
            self.pos = pos
        return last

    def _apply(self, outputs: Sequence[Output]) -> None:
        binding = self.binding
        for i, out in enumerate(outputs):
            kind = type(out)
            if kind is Emit:
                start = self.pos
                try:
                    self._append(out.events, out.cause)  # type: ignore[union-attr]
                except (_LogEnds, _CrashCut):
                    self._cut_step(out.events[self.pos - start:], outputs[i + 1:])  # type: ignore[union-attr]
                    raise
            elif kind is Send:
                if self.conn:
                    self._append((out.frame,), out.cause)  # type: ignore[union-attr]
                    written = binding.send((out.frame,)) if binding is not None else None  # type: ignore[union-attr]
                    if written:
                        self._append(written, out.cause)  # type: ignore[union-attr]
            elif kind is CancelAgent:
                if self.conn:
                    self._append([Cancel(scope=out.scope, reason=out.reason)],  # type: ignore[union-attr]
                                 out.cause)  # type: ignore[union-attr]
                    written = binding.cancel(out.scope) if binding is not None else None  # type: ignore[union-attr]
                    if written:
                        self._append(written, out.cause)  # type: ignore[union-attr]
            elif kind is Close:
                pass

    def _cut_step(self, rest: Sequence[Event], later: Sequence[Output]) -> None:
        """The run was killed inside this step: the machine has taken its input already, so
        the events it had still to write are kept (frames to the dead agent are not: it
        never got them)."""
        self.unlogged = [*rest, *(ev for out in later if type(out) is Emit
                                  for ev in out.events)]  # type: ignore[union-attr]

    # ---- inbox messages, as SessionActor handles them ---------------------------
    def _absorb(self, events: Sequence[Event]) -> None:
        """One AgentBatch: admitted and given its recorded path facts, as the actor does."""
        admitted = self.machine.admit(events)
        if type(admitted) is not list:
            admitted = list(admitted)
        if PermissionRequest not in map(type, admitted):  # most batches: nothing to add
            self.pending.extend(admitted)
            return
        out: list[Event] = []
        rec = self.rec
        for ev in admitted:
            if type(ev) is PermissionRequest:
                # the fact the actor looked up sits just before its request in the log
                at = self.pos + len(self.pending) + len(out)
                fact = rec[at].event if at < len(rec) else None
                if type(fact) is PermissionPathsResolved and fact.req_id == ev.req_id:  # type: ignore[attr-defined]
                    out.append(fact)
            out.append(ev)
        self.pending.extend(out)

    def _flush(self) -> None:
        events, self.pending = self.pending, []
        if not events:
            return
        last = self._append(events, self.machine.turn_cause)
        outputs = self.machine.on_agent(events, last - len(events) + 1)
        if outputs:
            self._apply(outputs)

    def _message(self, message: Any) -> None:
        kind = type(message)
        if kind is AgentBatch:
            self._absorb(message.events)
            return
        self._flush()
        if kind is TurnEnded:
            self._apply(self.machine.on_turn_ended(message.stop_reason))
        elif kind is AgentGone:
            self._apply(self.machine.on_agent_gone(message.reason))

    def _deliver(self, outputs: Sequence[Any], received: FrameIn | None) -> None:
        """The Deliverer's rules: the step's events in one batch, flushed before a turn end."""
        assert self.binding is not None
        events: list[Event] = [received] if received is not None else []
        for item in outputs:
            if isinstance(item, Event):
                events.append(item)
                continue
            data = getattr(item, "data", None)
            if isinstance(data, bytes):
                events.append(self.binding.recorder.out_event(data))
                continue
            if events:
                self._absorb(events)  # an AgentBatch message, as _message takes it
                events = []
            if type(item) is not KillAgent:  # a kill's effect (eof, exit) is recorded input
                self._message(item)
        if events:
            self._absorb(events)

    # ---- driving ------------------------------------------------------------------
    def _ensure_binding(self) -> ReplayBinding:
        if self.binding is None:
            try:  # the connection's own session.starting, found in C
                starting = self.rec[self.kinds.index(SessionStarting, self.pos)].event
            except ValueError:
                starting = None
            name = getattr(starting, "binding", None) or self.created.binding
            # unrecorded (--record off): the agent's events are the inputs, nothing was written
            factory = REPLAY_BINDINGS.get(name) if self.framed else None
            factory = factory or InprocReplay  # no machine: frames pass as recorded
            self.binding_name = name
            self.binding = factory(self.config, self.ids, self.rec[self.pos:])
        return self.binding

    def _batch_starts_at(self, i: int) -> bool:
        """Whether the recorded event at ``i`` is the first of an inbox batch (for merging)."""
        if i >= len(self.rec):
            return False
        ev = self.rec[i].event
        if type(ev) is FrameIn or self._foreign(ev):
            return True
        if type(ev) is AgentRaw and ev.source == "stderr":  # type: ignore[attr-defined]
            return True
        if self._shell_steps() and (type(ev) is FrameOut or (
                type(ev) is CapError and ev.code == "cap_scope_violation")):  # type: ignore[attr-defined]
            return True  # a step of the shell's own (ACP: a send, a served answer)
        return not self.framed and self._agent_input(i)

    def _foreign(self, ev: Event) -> bool:
        """A frame of a connection that failed before this one (a fallback): its handshake's
        batches were still in the inbox, so the actor logged them after this one started."""
        kind = type(ev)
        return (kind is FrameIn or kind is FrameOut) and self.framed and (
            self.binding_name is not None and ev.binding != self.binding_name)  # type: ignore[attr-defined]

    def _foreign_run(self, i: int) -> list[Event]:
        """The failed connection's batch from ``i`` on, taken as recorded."""
        rec, out = self.rec, []
        while i < len(rec):
            ev = rec[i].event
            if not self._foreign(ev) and (type(ev) in _FRAMES or not _is_agent(ev)):
                break
            out.append(ev)
            i += 1
        return out

    def _shell_steps(self) -> bool:
        binding = self.binding
        return self.framed and binding is not None and binding.shell_steps

    def _agent_input(self, i: int) -> bool:
        """In process (or unrecorded): whether the event at ``i`` came from the agent."""
        env = self.rec[i]
        ev = env.event
        kind = type(ev)
        if kind is PermissionPathsResolved:
            return self._request_follows(i)  # the actor's fact, put before its request
        return _is_agent(ev) and not self._is_refusal(env) and not (
            kind is CapError and ev.code in _TIMERS)  # type: ignore[attr-defined]

    def _agent_run(self, i: int) -> list[Event]:
        """The agent's events from ``i`` on, as one batch (path facts are made again).

        :meth:`_agent_input` inlined: this loop runs for every in-process agent event.
        """
        rec, out, n = self.rec, [], len(self.rec)
        while i < n:
            env = rec[i]
            ev = env.event
            kind = type(ev)
            if kind is PermissionPathsResolved:
                if not (i + 1 < n and type(rec[i + 1].event) is PermissionRequest):
                    break
            elif (ev.direction != "in" and kind is not AgentRaw) or (
                    kind is CapError and (ev.code in _TIMERS or (  # type: ignore[attr-defined]
                        env.cause is None and ev.code in _REFUSALS))):  # type: ignore[attr-defined]
                break  # not the agent's: the actor's own, a refusal or a timer
            else:
                out.append(ev)
            i += 1
        return out

    def _request_follows(self, i: int) -> bool:
        return i + 1 < len(self.rec) and type(self.rec[i + 1].event) is PermissionRequest

    def _is_refusal(self, env: Envelope) -> bool:
        ev = env.event
        return type(ev) is CapError and env.cause is None and ev.code in _REFUSALS  # type: ignore[attr-defined]

    def run(self) -> int:
        """Replay the whole session; the number of events compared."""
        try:
            return self._run()
        except _LogEnds:
            return self.pos

    def _run(self) -> int:
        rec, machine, n = self.rec, self.machine, len(self.rec)
        framed = self.framed
        self._apply(machine.create())
        while True:
            if machine.state in TERMINAL:
                if self.pos < n:  # the actor takes nothing after the end
                    raise Divergence(self.sid, rec[self.pos].seq, rec[self.pos], None)
                return self.pos
            try:
                if self.pending:
                    nxt = self.pos + len(self.pending)
                    # unframed, _step takes as a batch exactly what _batch_starts_at finds
                    if nxt < n and (not framed or self._batch_starts_at(nxt)) and \
                            not self._step(nxt, merged=True):
                        continue
                    self._flush()
                    continue
                if self.pos >= len(rec):
                    return self.pos
                self._step(self.pos, merged=False)
            except _CrashCut:
                self.pending = []  # what the killed run was doing is lost with it

    def _step(self, i: int, *, merged: bool) -> bool:
        """Handle the input at recorded index ``i``; False when it was consumed as a batch."""
        env = self.rec[i]
        ev = env.event
        kind = type(ev)
        machine = self.machine
        if (kind is FrameIn or kind is FrameOut) and self._foreign(ev):
            self._absorb(self._foreign_run(i))
            return False
        if kind is FrameIn:
            binding = self._ensure_binding()
            self._deliver(binding.feed(ev), ev)  # type: ignore[arg-type]
            return False
        if kind is AgentRaw and ev.source == "stderr":  # type: ignore[attr-defined]
            self._absorb([ev])  # the shell's own batch (stderr), not the machine's
            return False
        if (kind is FrameOut or kind is CapError) and self._shell_steps():
            outputs = self.binding.shell_step(self.rec, i)  # type: ignore[union-attr]
            if outputs is not None:
                self._deliver(outputs, None)
                return False
        if not self.framed:
            run = self._agent_run(i)  # empty unless the agent's (what _agent_input tells)
            if run:
                self._absorb(run)  # in process, unrecorded: events are their frames
                return False
        if merged:
            return True
        if kind is FrameOut and not self.framed:
            self._append([ev], env.cause)  # written by a shell this replay does not re-run
        elif kind is FrameOut and machine.state is State.CREATED:
            self._append(self._ensure_binding().open(), None)  # the handshake's writes
        elif kind is BindingFallback:
            self._append([ev], env.cause)  # the actor's own, between connection attempts
        elif kind is RunResumed:
            self._resumed(env)
        elif kind is SessionStarting or (kind is SessionWarning and machine.state is State.CREATED
                                         and ev.code == "permissions_bypassed"):  # type: ignore[attr-defined]
            self._ensure_binding()
            self.conn = True
            self._apply(machine.start(self.binding_name))
        elif kind in (InputInjected, CancelRequested) or (
                kind is PermissionDecided and not ev.by.startswith("policy:")) or (  # type: ignore[attr-defined]
                kind is AskAnswered and not ev.by.startswith("policy:")):  # type: ignore[attr-defined]
            self._command(env)
        elif self._is_refusal(env):
            self._append([ev], None)  # a refused command: only its error was logged
        elif kind is CapError and ev.code in _TIMERS:  # type: ignore[attr-defined]
            self._apply(machine.time_out(ev.code, ev.message))  # type: ignore[attr-defined]
        elif kind is SessionTurnEnded and not self.framed:
            self._message(TurnEnded(ev.stop_reason))  # type: ignore[attr-defined]
        else:
            self._end(env)
        return True

    def _resumed(self, env: Envelope) -> None:
        """``cap run --resume`` picked the session up: reconcile as it did, on a new connection."""
        from trio_cap.actors.replay.resume import reconcile

        config = next((e.event for e in self.rec[self.pos + 1:]
                       if type(e.event) is SessionConfig), self.config)
        self.config = config  # type: ignore[assignment]
        self._append([env.event], env.cause)
        lost, self.unlogged = self.unlogged, []
        if lost:
            self._append(lost, env.cause)  # the cut step's reaction, written by the resume
        reconcile(self.machine, env.event, self.texts, config)  # type: ignore[arg-type]
        # the new connection draws afresh: the ids written after the resume, in order (what
        # the dead connection drew for a write it never logged is gone with it)
        self.ids.clear()
        self.ids.extend(i for e in self.rec[self.pos:] if type(e.event) is FrameOut
                        for i in e.event.ids)  # type: ignore[attr-defined]
        self.binding = None
        self.binding_name = None
        self.conn = False

    def _command(self, env: Envelope) -> None:
        machine = self.machine
        refusal = machine.refusal(env.event)
        if refusal is not None:
            raise Divergence(self.sid, env.seq, env, (None, refusal),
                             "the replayed machine refuses this recorded command")
        seq = self._append([env.event], env.cause)
        self._apply(machine.on_command(env.event, seq))

    def _end(self, env: Envelope) -> None:
        """A terminal event (perhaps after the cancel and warning its end writes) that no
        input explains: the owner's close, a shutdown, a failed connect or a hard timeout."""
        machine = self.machine
        j = self.pos
        while j < len(self.rec) and not isinstance(self.rec[j].event, _TERMINAL) and (
                type(self.rec[j].event) in (Cancel, FrameOut, SessionWarning)):
            j += 1
        end = self.rec[j].event if j < len(self.rec) else None
        if machine.terminal or not isinstance(end, _TERMINAL):
            raise Divergence(self.sid, env.seq, env, None)
        if type(end) is SessionFailed and end.code == "node_lost" and j == self.pos:  # type: ignore[attr-defined]
            # the taking node's record (caused by its node.takeover), not this machine's
            # output: the machine ends as the log says, and the record is taken as written
            machine.fail(end.code, end.message)  # type: ignore[attr-defined]
            self._append([end], self.rec[j].cause)
        elif type(end) is SessionCancelled and end.reason not in _CLOSE_REASONS:  # type: ignore[attr-defined]
            self.conn = False  # the actor stopped: its connection is already gone
            self._apply(machine.shutdown(end.reason))  # type: ignore[attr-defined]
        elif type(end) is SessionFailed and (end.code in _TIMERS or machine.state is State.CREATED
                                             ):  # type: ignore[attr-defined]
            self._apply(machine.fail(end.code, end.message))  # type: ignore[attr-defined]
        elif type(end) is SessionFailed and end.code == "agent_died" and not self.framed:  # type: ignore[attr-defined]
            self._message(AgentGone(end.message))  # type: ignore[attr-defined]
        else:
            self._apply(machine.close())


def check_sessions(streams: dict[str, list[Envelope]], only: str | None = None,
                   machine_factory: Any = SessionMachine) -> CheckResult:
    """Replay every session (or ``only``); raises :class:`Divergence` at the first difference."""
    result = CheckResult()
    with _recorded_frozen():
        for sid, recorded in streams.items():
            if only is not None and sid != only:
                continue
            if not recorded or type(recorded[0].event) is not SessionCreated:
                continue
            replay = SessionReplay(recorded, machine_factory)
            result.events += replay.run()
            result.sessions += 1
            if replay.undecoded:
                result.undecoded.add(replay.undecoded)
    return result


@contextmanager
def _recorded_frozen() -> Iterator[None]:
    """The recorded log (a million objects for a big one) lives, unchanged, for the whole
    check: frozen out of the cycle collector's sight, its full passes walk only what the
    replay makes (they walked the whole log, again and again: a tenth of the check).  A
    heap frozen before (``cap`` freezes at start, :func:`trio_cap.tune_gc`) stays frozen,
    the log with it: its objects are freed by reference counting all the same."""
    frozen_before = gc.get_freeze_count()
    gc.freeze()
    try:
        yield
    finally:
        if not frozen_before:
            gc.unfreeze()
