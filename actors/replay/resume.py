"""Picking a run up after its orchestrator died: the machine the log rebuilds, reconciled.

Why through the replay: the session machine's state (turn count, money
spent, what was queued or in flight) is a function of the log, and
:class:`~trio_cap.actors.replay.check.SessionReplay` is that function — the
same one ``cap replay --check`` trusts.  A log that does not replay is not
resumed (refusing beats guessing what the dead run was doing).

Reconciling with reality (:func:`reconcile`): the agent process is gone
(with stream-json it saw stdin close when its parent died), so the turns it
had in flight are lost; their inputs go back to the front of the queue with
their original seqs (the re-run names the same ``input.injected`` as its
cause) and their numbers are reused; requests and asks the dead agent
waited on died with it (the re-run turn asks again), while an ask already
answered in a cut turn (by a person or the auto-answerer) is answered the same
way, from the log, when the re-run turn asks the same question
(``ask.answered`` by ``policy:resume``) — whether the agent was resumed (its own
conversation may already hold the answer; then it does not ask) or restarted
(it asks again): whoever answered is never asked twice.  Money spent, the raw
output budget and turns done carry over.  Whether the new agent *resumes*
its own conversation (Claude Code's ``--resume``, when the manifest declares
``capabilities.x-session-resume``; an ACP agent's ``session/load``, when its
``initialize`` answer declared ``loadSession``) or is *restarted* with the transcript so
far as its system prompt is decided here and logged as ``run.resumed``, the
first event the resumed session writes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import attrs

from trio_cap.actors.replay.check import SessionReplay
from trio_cap.actors.session.machine import Emit, Output, SessionMachine, State
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    CapSessionReady,
    Event,
    InputInjected,
    RunResumed,
    RunStarted,
    SessionConfig,
    SessionCreated,
    SessionOwned,
    SessionReady,
    SessionTurnEnded,
    TextChunk,
    ToolCallStart,
)
from trio_cap.events.projections.sessions import TERMINAL_STATUSES

RESUME_CAPABILITY = "capabilities.x-session-resume"
"""Manifest extension: the agent continues its own session when given its id (stream-json:
Claude Code's ``--resume``)."""

TRANSCRIPT_LIMIT = 20_000
"""Characters of transcript a restarted agent is given as context (the latest are kept)."""


class CannotResume(Exception):
    """The log holds nothing to resume, or not in a state that can be picked up safely."""


@attrs.frozen
class ResumePoint:
    """What the log says about the run to pick up."""

    run: RunStarted
    session_id: str | None
    recorded: tuple[Envelope, ...]
    status: str | None
    after_seq: int

    @property
    def injected(self) -> list[str]:
        return [e.event.text for e in self.recorded  # type: ignore[attr-defined]
                if type(e.event) is InputInjected]

    @property
    def agent_session_id(self) -> str | None:
        ready = [e.event.agent_session_id for e in self.recorded  # type: ignore[attr-defined]
                 if type(e.event) is SessionReady]
        return ready[-1] if ready else None


def find_resume_point(envs: Sequence[Envelope], statuses: dict[str, str],
                      session_id: str | None = None) -> ResumePoint:
    """The run to pick up: the last ``run.started`` in the log and the session it created
    (if it got that far), or, given ``session_id``, the run that started that session —
    in a log several runs share, the run is found by its session, never by position."""
    if session_id is not None:
        return _run_of(envs, statuses, session_id)
    runs = [i for i, e in enumerate(envs) if type(e.event) is RunStarted]
    if not runs:
        raise CannotResume("holds no cap run to resume (no run.started event)")
    start = runs[-1]
    run: RunStarted = envs[start].event  # type: ignore[assignment]
    if not run.tasks:
        raise CannotResume("its prompts were too large to log, so the run cannot be picked up")
    sid = run.session_id or next((e.event.session_id for e in envs[start:]  # type: ignore[attr-defined]
                                  if type(e.event) is SessionCreated), None)
    recorded = tuple(e for e in envs[start:] if sid is not None and e.stream == sid
                     and type(e.event) is not SessionOwned)
    sid = sid if recorded else None  # named by run.started, but never created
    return ResumePoint(run=run, session_id=sid, recorded=recorded,
                       status=statuses.get(sid) if sid else None,
                       after_seq=envs[-1].seq if envs else 0)


def _run_of(envs: Sequence[Envelope], statuses: dict[str, str], sid: str) -> ResumePoint:
    start = next((i for i, e in enumerate(envs) if type(e.event) is RunStarted
                  and e.event.session_id == sid), None)  # type: ignore[attr-defined]
    if start is None:
        raise CannotResume("no run.started names it: it was not started by cap run, so "
                           "there are no prompts to go on with")
    run: RunStarted = envs[start].event  # type: ignore[assignment]
    if not run.tasks:
        raise CannotResume("its prompts were too large to log, so the run cannot be picked up")
    recorded = tuple(e for e in envs[start:] if e.stream == sid
                     and type(e.event) is not SessionOwned)
    return ResumePoint(run=run, session_id=sid if recorded else None, recorded=recorded,
                       status=statuses.get(sid), after_seq=envs[-1].seq if envs else 0)


def acp_loads_sessions(point: ResumePoint) -> bool:
    """Whether the session's ACP agent declared ``agentCapabilities.loadSession`` in its
    ``initialize`` answer (the connection's ``cap.session.ready`` records it), so a new
    process of it can ``session/load`` the recorded session id."""
    ready = [e.event for e in point.recorded if type(e.event) is CapSessionReady]
    acp = (ready[-1].meta or {}).get("acp") if ready else None
    return isinstance(acp, dict) and acp.get("load_session") is True


def finished(point: ResumePoint) -> bool:
    return point.status in TERMINAL_STATUSES


class ResumedMachine(SessionMachine):
    """A session machine whose first event, once resumed, is the ``run.resumed`` record."""

    resumed: RunResumed | None = None
    unlogged: tuple[Event, ...] = ()
    """The reaction the dead run had not finished writing (its input is in the log)."""

    def create(self) -> list[Output]:
        if self.resumed is None:
            return super().create()
        return [Emit((self.resumed, *self.unlogged))]


def rebuild(point: ResumePoint) -> ResumedMachine:
    """The machine as the dead run left it: the session's log replayed (refused if it diverges)."""
    from trio_cap.actors.replay.check import Divergence

    replay = SessionReplay(point.recorded, ResumedMachine)
    try:
        replay.run()
    except Divergence as exc:
        raise CannotResume(f"its log does not replay, so its state is unknown: {exc}") from None
    machine: ResumedMachine = replay.machine  # type: ignore[assignment]
    machine.unlogged = tuple(replay.unlogged)
    return machine


def reconcile(machine: SessionMachine, resumed: RunResumed, texts: dict[int, str],
              config: SessionConfig) -> None:
    """Make ``machine`` (rebuilt from the log) the one that goes on: see the module docstring.

    Deterministic in the machine and the event, so ``cap replay --check`` reconciles the
    same way when it meets the ``run.resumed``.
    """
    machine.carry_answers()  # before the turns in flight are put back: theirs carry over
    in_flight = list(machine.in_flight)
    machine.queue = deque([(texts[seq], seq) for _, seq in in_flight] + list(machine.queue))
    machine.in_flight.clear()
    machine.turn -= len(in_flight)
    machine.pending_permissions.clear()
    machine.pending_asks.clear()
    machine.timed_out = machine.turn_error = None
    machine.state = State.CREATED
    machine.config = config


def resumed_event(point: ResumePoint, machine: SessionMachine, how: str,
                  reason: str) -> RunResumed:
    ended = sum(1 for e in point.recorded if type(e.event) is SessionTurnEnded) + sum(
        1 for ev in getattr(machine, "unlogged", ()) if type(ev) is SessionTurnEnded)
    rerun = tuple(turn for turn, _ in machine.in_flight)
    return RunResumed(session_id=point.session_id or "", how=how,  # type: ignore[arg-type]
                      after_seq=point.after_seq, turns_done=ended, rerun_turns=rerun,
                      agent_session_id=point.agent_session_id if how == "resumed" else None,
                      reason=reason)


def transcript_context(point: ResumePoint, system_prompt: str | None) -> str:
    """The conversation so far, for an agent that is restarted instead of resumed."""
    lines: list[str] = []
    for env in point.recorded:
        ev = env.event
        if type(ev) is InputInjected:
            lines.append(f"\nUser: {ev.text}")  # type: ignore[attr-defined]
        elif type(ev) is TextChunk and ev.channel == "assistant":  # type: ignore[attr-defined]
            lines.append(ev.text)  # type: ignore[attr-defined]
        elif type(ev) is ToolCallStart:
            lines.append(f"\n[tool {ev.name}]")  # type: ignore[attr-defined]
    text = "".join(lines).strip()[-TRANSCRIPT_LIMIT:]
    head = (system_prompt + "\n\n") if system_prompt else ""
    return (f"{head}This session was restarted after its orchestrator stopped. The "
            f"conversation so far:\n{text}")
