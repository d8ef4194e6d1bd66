"""The embedding API: ``async with open_orchestrator() as orch:`` inside any Trio program.

The orchestrator owns an actor system, the event log and a live projection of
it.  Sessions are actors; a :class:`Session` handle turns method calls into
inbox commands and waits on the projection for their effect, so every answer
an embedding app gets is one the log can reproduce.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from trio_cap.actors.agent.script import Script, load_script
from trio_cap.actors.bindings.base import UPDATED_INPUT
from trio_cap.actors.bindings.registry import ConnectorRegistry, plugin_plan
from trio_cap.actors.connection import AgentSpec, Connector
from trio_cap.actors.ids import IdSource, RandomIds
from trio_cap.actors.manifest import (
    AdHocError,
    BindingNotOffered,
    ManifestInvalid,
    ManifestNotFound,
    Resolved,
    resolve_agent,
)
from trio_cap.actors.peers.hints import missing_program
from trio_cap.actors.recording import Recorder, RecordMode
from trio_cap.actors.runtime import (
    ActorNotFound,
    ActorRef,
    ActorSystem,
    Escalate,
    open_actor_system,
)
from trio_cap.actors.session.actor import (
    Accepted,
    Candidate,
    CloseSession,
    Command,
    SessionActor,
    SessionEnded,
    request,
)
from trio_cap.actors.session.machine import SessionMachine
from trio_cap.actors.session.policy import POLICIES, Answerer, PermissionPolicy
from trio_cap.actors.session.timers import Timeouts
from trio_cap.events.clock import Clock, SystemClock
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    TERMINAL_EVENTS,
    AskAnswered,
    CancelRequested,
    CancelScope,
    CapError,
    Decision,
    InputInjected,
    PermissionDecided,
    SessionConfig,
    SessionCreated,
    SessionTurnEnded,
    StopReason,
    TextChunk,
)
from trio_cap.events.log import EventLog, MemoryEventLog
from trio_cap.events.log.opener import open_log
from trio_cap.events.projections import State, fold, forget, initial_state
from trio_cap.events.projections.sessions import TERMINAL_STATUSES, SessionView

BUILTIN_AGENT = "cap-agent"


BUSY_AT_ONCE = 16
"""Default of :attr:`Orchestrator.busy`: sessions starting, closing or taking a command at
once.  Measured (``bench sessions``, 1,000 in-process sessions): 16 → append → subscriber
p99 ~3 ms, 64 → 15–40 ms, the same wall time; 40 ``cap-agent`` processes started 16 at a
time each reach ready in 3.4 s instead of 8.3 s, all 40 in the same 10 s."""


async def _acquire(limiter: trio.CapacityLimiter, token: object) -> None:
    """Take a slot, passing through the scheduler only when none is free: an uncontended
    take changes no task's order, so a deterministic run stays byte-identical."""
    try:
        limiter.acquire_on_behalf_of_nowait(token)
    except trio.WouldBlock:
        await limiter.acquire_on_behalf_of(token)


@asynccontextmanager
async def occupy(limiter: trio.CapacityLimiter) -> AsyncIterator[None]:
    token = object()
    await _acquire(limiter, token)
    try:
        yield
    finally:
        limiter.release_on_behalf_of(token)


class UnknownAgent(Exception):
    """No usable manifest for that agent, or it does not offer the binding asked for."""


@attrs.frozen
class TurnResult:
    turn: int | None
    stop_reason: StopReason | None
    text: str
    input_seq: int


class Session:
    """Owner's handle on one session actor.

    Every method that waits — for the actor's answer or for the projection to
    show an effect — also watches the actor's end, so a session that has
    ended (or ends meanwhile) raises :class:`SessionEnded` at once instead of
    leaving the caller waiting for something that cannot happen.
    """

    def __init__(
        self, orch: Orchestrator, session_id: str, address: str, ref: ActorRef | None = None
    ) -> None:
        self.orch = orch
        self.id = session_id
        self.address = address
        if ref is None:
            try:
                ref = orch.system.lookup(address)
            except ActorNotFound:
                ref = None
        self._ref = ref

    @property
    def view(self) -> SessionView | None:
        return self.orch.state.sessions.sessions.get(self.id)

    @property
    def gone(self) -> trio.Event:
        """Set once the session's actor has finished (at once for a session already gone)."""
        if self._ref is None:
            ended = trio.Event()
            ended.set()
            return ended
        return self._ref.done

    def _ended(self, what: str) -> SessionEnded:
        view = self.view
        status = f" ({view.status})" if view is not None else ""
        return SessionEnded(f"session {self.id} has ended{status}: {what}", view)

    async def _command(self, event: Any) -> Accepted:
        if self._ref is None:
            raise self._ended(f"cannot {_verb(event)}")
        try:
            async with occupy(self.orch.busy):
                return await request(self._ref, lambda reply: Command(event, reply))
        except SessionEnded:
            await self.orch.caught_up()
            raise self._ended(f"cannot {_verb(event)}") from None

    async def _until(self, predicate: Callable[[State], bool], what: str) -> State:
        """Wait for ``predicate`` on the projection, or raise SessionEnded once the actor has
        finished and everything it logged is folded without satisfying it.

        Woken only by folds that touch this session and by its actor's end, so N sessions
        waiting cost one wake-up each per change of their own, not N per change of any."""
        gone = self.gone
        if self._ref is not None:
            self.orch._watch_end(self.id, self._ref)
        state = await self.orch.wait_until(predicate, stream=self.id, unless=gone)
        if predicate(state):
            return state
        await self.orch.caught_up()
        if predicate(self.orch.state):
            return self.orch.state
        raise self._ended(what)

    async def _refused(self, seq: int, since: int) -> bool:
        """Input held before the agent was ready can be refused later (the budget gate, at
        ready): the turn it was given then never runs.  Looks at this session's events from
        ``since`` on (the ones not looked at yet), read off the loop's hot path."""
        return any(type(env.event) is CapError and (env.event.details or {}).get(
            "input_seq") == seq for env in await self.orch.log.read_async(since, self.id))

    async def inject(self, text: str, *, source: str = "owner") -> Accepted:
        """Accept input; it is sent when the session is ready and no turn runs."""
        return await self._command(InputInjected(text=text, source=source))

    async def cancel(self, scope: CancelScope = "current_turn", reason: str = "user") -> Accepted:
        return await self._command(CancelRequested(scope=scope, reason=reason))

    async def decide(self, req_id: str, decision: Decision, *, reason: str = "",
                     updated_input: dict[str, Any] | None = None) -> Accepted:
        """Answer a pending permission request; ``updated_input`` (an allow only) makes the
        agent run the call with that input instead (``_meta["cap.updated_input"]``)."""
        meta = {UPDATED_INPUT: updated_input} if updated_input is not None else None
        return await self._command(
            PermissionDecided(req_id=req_id, decision=decision, by="human", reason=reason,
                              meta=meta)
        )

    async def answer(self, ask_id: str, value: Any) -> Accepted:
        return await self._command(AskAnswered(ask_id=ask_id, value=value, by="human"))

    async def close(self) -> SessionView:
        """End the session (completed, or failed when its last turn failed) and wait for it.

        Closing a session that has already ended returns its final view at
        once (closing twice is harmless); only a session that ended without
        a terminal event in the log raises :class:`SessionEnded`.
        """
        if self._ref is not None:
            async with occupy(self.orch.busy):
                try:
                    await request(self._ref, CloseSession)
                except SessionEnded:
                    pass
                return await self.wait_terminal()
        return await self.wait_terminal()

    async def wait_terminal(self) -> SessionView:
        """Wait until the session has ended and its actor has finished: its connection is
        closed and the agent's process reaped (the actor ends at most a grace after its
        terminal event)."""
        view = await self.wait_status(*TERMINAL_STATUSES)
        await self.gone.wait()
        return view

    async def wait_status(self, *statuses: str) -> SessionView:
        """Wait until the session is in one of ``statuses``; SessionEnded if it ends first."""
        await self._until(
            lambda s: (v := s.sessions.sessions.get(self.id)) is not None and v.status in statuses,
            f"it never reached {' or '.join(statuses)}",
        )
        return self.view  # type: ignore[return-value]

    async def run_turn(self, text: str) -> TurnResult:
        """Inject ``text`` and wait until its turn ends (or the session does)."""
        accepted = await self.inject(text)
        if accepted.turn is not None:
            turn = accepted.turn
            looked = accepted.seq  # this session's events up to here refuse nothing after it

            def over(v: SessionView) -> bool:
                return v.ended_turn >= turn or v.status in TERMINAL_STATUSES

            while True:  # a budget refusal is told by an event, read outside the predicate
                state = await self._until(
                    lambda s, looked=looked: over(v := s.sessions.sessions[self.id]) or (
                        s.last_seq > looked and (v.last_error or "").startswith(
                            "cap_budget_exceeded: turn refused")),
                    f"turn {turn} never ended",
                )
                seen = state.last_seq
                if over(state.sessions.sessions[self.id]) or await self._refused(
                        accepted.seq, looked + 1):
                    break
                looked = seen
        # everything the turn did names its input as the cause
        caused = [env.event for env in await self.orch.log.read_async(accepted.seq, self.id)
                  if env.cause == accepted.seq]
        text_out = "".join(
            ev.text for ev in caused if type(ev) is TextChunk and ev.channel == "assistant"
        )
        ended = [ev.stop_reason for ev in caused if type(ev) is SessionTurnEnded]
        return TurnResult(
            turn=accepted.turn,
            stop_reason=ended[0] if ended else None,
            text=text_out,
            input_seq=accepted.seq,
        )


class Orchestrator:
    def __init__(self, system: ActorSystem, log: EventLog, clock: Clock, ids: IdSource,
                 connectors: Mapping[str, Connector] | None = None) -> None:
        self.system = system
        self.log = log
        self.clock = clock
        self.ids = ids
        self.state: State = initial_state()
        self.shutdown_reason = "orchestrator shut down"
        """What ``session.cancelled`` says for sessions still open when the orchestrator stops
        (``cap run`` names the signal that stopped it)."""
        self.default_timeouts = Timeouts()
        """Turn/idle limits for sessions whose caller and manifest name none (``cap run``
        sets an idle timeout here; an embedding app gets none unless it asks)."""
        self._waiters: dict[str | None, set[trio.Event]] = {}
        """Who waits for a change: stream → events to set when a fold touches that stream
        (``None``: woken by every fold)."""
        self._watched: set[str] = set()
        self.keep_finished = False
        """Whether the live state keeps a finished session's transcript, plan and audit
        trail (default: no — it keeps its summary and usage; :meth:`session_state` folds
        the rest from the log on demand)."""
        self.busy = trio.CapacityLimiter(BUSY_AT_ONCE)
        """Sessions starting, closing or taking a command at one time; the rest wait their
        turn.  Work done for every session in the same scheduler round lengthens every
        round, and so the way of each event to its subscribers (1,000 sessions started at
        once: p99 ~300 ms unbounded)."""
        self.record: RecordMode = "off"
        """Default recording of every new session's wire traffic (``cap run``: frames)."""
        self.node: Any = None
        """The :class:`~trio_cap.actors.nodes.Node` this orchestrator runs as on a shared log
        (set by its opener): every session it starts is first recorded as that node's."""
        self.connectors = ConnectorRegistry(connectors)
        """Binding name → connector, from entry points (``trio_cap.bindings``); set an
        entry (``orch.connectors["stream-json"] = …``) to override one for this orchestrator."""

    async def _project(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        subscription = self.log.subscribe(self.state.last_seq + 1)
        task_status.started()
        async for batch in subscription:
            self._fold(batch)

    def _fold(self, batch: list[Envelope]) -> None:
        fold(self.state, batch)
        if not self.keep_finished:
            for env in batch:
                if type(env.event) in TERMINAL_EVENTS:
                    forget(self.state, env.stream)
        if self._waiters:
            for stream in {env.stream for env in batch}:
                self._wake(stream)
            self._wake(None)

    def _wake(self, stream: str | None) -> None:
        for event in self._waiters.pop(stream, ()):
            event.set()

    def _watch_end(self, session_id: str, ref: ActorRef) -> None:
        """Wake the session's waiters when its actor finishes (one watcher per session)."""
        if session_id in self._watched or ref.done.is_set():
            return
        self._watched.add(session_id)

        async def watch() -> None:
            try:
                await ref.done.wait()
            finally:
                self._watched.discard(session_id)
                self._wake(session_id)

        self.system.nursery.start_soon(watch)

    async def wait_until(self, predicate: Callable[[State], bool], *, stream: str | None = None,
                         unless: trio.Event | None = None) -> State:
        """Wait until the live projection satisfies ``predicate``.

        ``stream``: the predicate depends only on that stream's events, so only folds
        touching it re-check it.  ``unless``: stop waiting (returning the state as it is)
        once that event is set; whoever sets it must also wake ``stream``."""
        while not predicate(self.state):
            if unless is not None and unless.is_set():
                break
            wake = trio.Event()
            waiters = self._waiters.setdefault(stream, set())
            waiters.add(wake)
            try:
                await wake.wait()
            finally:
                waiters.discard(wake)
        return self.state

    def session_state(self, session_id: str) -> State:
        """Every projection of one session, folded from its own events in the log (reads
        only that stream): the detail the live state drops once a session has ended."""
        return fold(initial_state(), self.log.read(1, session_id))

    async def caught_up(self) -> State:
        """Wait until the projection has folded everything the log has acknowledged."""
        return await self.wait_until(lambda s: s.last_seq >= self.log.last_seq)

    async def start_session(
        self,
        agent: str | Resolved = BUILTIN_AGENT,
        binding: str | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        model: str | None = None,
        script: Script | str | os.PathLike[str] | None = None,
        permissions: str | None = None,
        allow_high_risk: bool = False,
        human: bool | None = None,
        budget_usd: float | None = None,
        system_prompt: str | None = None,
        max_turns: int | None = None,
        session_id: str | None = None,
        turn_timeout: float | None = None,
        idle_timeout: float | None = None,
        permissions_chosen: bool | None = None,
        record: RecordMode | None = None,
        options: Mapping[str, Any] | None = None,
        session_resume_id: str | None = None,
        restore: Callable[[SessionMachine], SessionMachine] | None = None,
        allow_tools: Sequence[str] = (),
        deny_tools: Sequence[str] = (),
        answerer: Answerer | None = None,
    ) -> Session:
        """Spawn a session actor; returns once ``session.created`` is in the log.

        ``agent`` is a manifest name, a manifest path or an ad-hoc spec
        (``pty:CMD`` …), or what :func:`resolve` returned for one; its
        bindings are tried best first (or only ``binding``), each failure
        logged as ``binding.fallback``.  ``human`` says whether someone will
        answer asks and permission requests through
        :meth:`Session.decide` / :meth:`Session.answer` (implied by
        ``permissions="ask"``).  ``permissions`` defaults to ``"deny"``;
        ``permissions_chosen`` says whether a person picked the policy (by
        default: whether ``permissions`` was given), which refusals mention.

        ``turn_timeout`` bounds each turn's total time and ``idle_timeout``
        the agent's silence during a turn (seconds; ``0`` turns one off;
        ``None`` takes the manifest's ``capabilities.x-turn-timeout-seconds``
        / ``x-idle-timeout-seconds``, else :attr:`Orchestrator.default_timeouts`,
        which embedding apps get with no limit).  On expiry the turn is
        cancelled (CAP cancel, then the connection is ended after a grace), a
        ``cap.error`` ``turn_timeout`` / ``idle_timeout`` is logged and the
        turn counts as failed.

        ``record`` (``off | frames | raw``; default :attr:`Orchestrator.record`) logs the
        connection's wire traffic as ``frame.in`` / ``frame.out`` for ``cap replay
        --check``; ``options`` are added to the connector's ``spec.options``.
        ``session_resume_id`` asks the agent to continue its own earlier session, and
        ``restore`` (``cap run --resume``) turns the new machine into the one the log
        rebuilt, so an existing ``session_id`` goes on where it stopped.

        ``allow_tools`` / ``deny_tools`` (tool-name globs) approve / refuse those tools
        without asking, high risk still excepted; ``answerer`` sees every ask first
        (:class:`~trio_cap.actors.session.policy.AutoAnswer`; a fleet's research archive).
        """
        if permissions_chosen is None:
            permissions_chosen = permissions is not None
        permissions = permissions or "deny"
        if permissions not in POLICIES:
            raise ValueError(f"permissions must be one of {POLICIES}, not {permissions!r}")
        resolved = await self.resolve(agent)
        try:
            plan = resolved.plan(force=binding)
        except BindingNotOffered as exc:
            extra = plugin_plan(resolved.manifest, binding) if binding in self.connectors else None
            if extra is None:
                raise UnknownAgent(str(exc)) from None
            plan = extra  # a plug-in's binding, which no manifest can declare
        if not plan.candidates:
            raise UnknownAgent(f"agent {agent!r} offers no binding trio-cap can speak")
        if isinstance(script, str | os.PathLike):
            script = load_script(script)
        workdir = str(Path(cwd or os.getcwd()).resolve())  # noqa: ASYNC240 - one stat, no I/O wait
        if not os.path.isdir(workdir):  # noqa: ASYNC240
            raise NotADirectoryError(f"--cwd {workdir} is not a directory")
        policy = PermissionPolicy(
            name=permissions,  # type: ignore[arg-type]
            allow_high_risk=allow_high_risk,
            human=(permissions == "ask") if human is None else human,
            chosen=permissions_chosen,
            allow_tools=tuple(allow_tools),
            deny_tools=tuple(deny_tools),
        )
        sid = session_id or self.ids.new("sess")
        config = SessionConfig(
            cwd=workdir,
            model=model,
            system_prompt=system_prompt,
            max_turns=max_turns,
            budget_usd=budget_usd,
            permission_mode=policy.permission_mode,  # type: ignore[arg-type]
            session_resume_id=session_resume_id,
        )
        created = SessionCreated(
            session_id=sid,
            cwd=workdir,
            agent=resolved.manifest.agent.name,
            binding=plan.candidates[0].binding,
            model=model,
            permissions=permissions,
            allow_high_risk=allow_high_risk,
            budget_usd=budget_usd,
            human=policy.human,
            policy_chosen=policy.chosen,
            queued_input=resolved.manifest.capabilities.queued_input,
            allow_tools=policy.allow_tools,
            deny_tools=policy.deny_tools,
            auto_answer=answerer is not None,
        )
        record = self.record if record is None else record
        candidates = []
        for planned in plan.candidates:
            spec = AgentSpec(
                name=resolved.manifest.agent.name,
                binding=planned.binding,
                config=config,
                argv=planned.argv or (),
                url=planned.url,
                options={"script": script, "agent_session_id": f"agent-{sid}",
                         "manifest": resolved.manifest,
                         "recorder": None if record == "off" else Recorder(planned.binding,
                                                                          record),
                         **(options or {})},
                ids=self.ids,
            )
            unavailable = None
            unavailable = self.connectors.why_unavailable(planned.binding)
            if unavailable is None and not planned.available:
                unavailable = missing_program(planned.program or "")
            connector = self.connectors.get(planned.binding) if unavailable is None else None
            candidates.append(Candidate(planned.binding, spec, connector, unavailable))
        machine = SessionMachine(
            created, config, policy, queued_input=resolved.manifest.capabilities.queued_input,
            answerer=answerer,
        )
        if restore is not None:
            machine = restore(machine)
        caps = resolved.manifest.capabilities
        defaults = self.default_timeouts
        timeouts = Timeouts(
            turn=_pick(turn_timeout, caps.x_turn_timeout_seconds, defaults.turn),
            idle=_pick(idle_timeout, caps.x_idle_timeout_seconds, defaults.idle),
            grace=defaults.grace,
        )
        address = f"cap://{sid}"
        if self.node is not None:
            await self.node.own(sid)  # before the session's first event: never unowned
        token = object()
        await _acquire(self.busy, token)  # held until the session is up
        try:
            ref = self.system.spawn(
                lambda: SessionActor(machine, candidates, self.log, timeouts,
                                     lambda: self.shutdown_reason),
                address=address,
                policy=Escalate(),
            )
        except BaseException:
            self.busy.release_on_behalf_of(token)
            raise
        session = Session(self, sid, address, ref)
        self.system.nursery.start_soon(self._release_when_up, session, token)
        await session._until(lambda s: sid in s.sessions.sessions, "it was never created")
        return session

    async def _release_when_up(self, session: Session, token: object) -> None:
        try:
            await session._until(
                lambda s: (v := s.sessions.sessions.get(session.id)) is not None
                and v.status not in ("created", "starting"), "it never started")
        except SessionEnded:
            pass
        finally:
            self.busy.release_on_behalf_of(token)

    async def resolve(self, agent: str | Resolved) -> Resolved:
        """The agent's manifest, by the CAP resolution order; UnknownAgent says why not."""
        return await resolve(agent)

    def session(self, session_id: str) -> Session:
        return Session(self, session_id, f"cap://{session_id}")


async def resolve(agent: str | Resolved) -> Resolved:
    """The agent's manifest, by the CAP resolution order; UnknownAgent says why not.

    Callable before any orchestrator exists, so a command can refuse a bad
    ``--agent`` before it creates anything (a resolved agent passes through).
    """
    if isinstance(agent, Resolved):
        return agent
    try:
        return await resolve_agent(agent)
    except ManifestNotFound as exc:
        raise UnknownAgent(str(exc)) from None
    except ManifestInvalid as exc:
        raise UnknownAgent(str(exc)) from None
    except (AdHocError, ValueError) as exc:
        raise UnknownAgent(f"--agent {agent}: {exc}") from None


@asynccontextmanager
async def open_orchestrator(
    log: EventLog | str | os.PathLike[str] | None = None,
    *,
    clock: Clock | None = None,
    ids: IdSource | None = None,
    grace: float = 5.0,
    fsync: str = "batch",
    connectors: Mapping[str, Connector] | None = None,
) -> AsyncIterator[Orchestrator]:
    """Run an orchestrator inside the caller's task tree.

    ``log`` may be an :class:`EventLog` (the caller keeps ownership), a path
    or a ``postgresql://`` URL (a file or PostgreSQL log opened and closed
    here), or None for an in-memory log.
    Leaving the block, normally or by cancellation, stops every session
    within ``grace`` seconds, each with a terminal event in the log.
    ``connectors`` (binding name → connector) override or add to the bindings
    found through the ``trio_cap.bindings`` entry points.
    """
    clock = clock or SystemClock()
    ids = ids or RandomIds()
    owned: EventLog | None = None
    if log is None:
        owned = MemoryEventLog(clock)
    elif isinstance(log, str | os.PathLike):
        # a file path or a postgresql:// URL; opened off the event loop (scan, connect)
        owned = await open_log(log, fsync=fsync, clock=clock, listen=True)
    event_log = owned or log
    assert isinstance(event_log, EventLog)
    try:
        async with open_actor_system(clock=clock, ids=ids, grace=grace) as system:
            orch = Orchestrator(system, event_log, clock, ids, connectors)
            await system.nursery.start(orch._project)
            yield orch
    finally:
        if owned is not None:
            with trio.CancelScope(shield=True):
                await owned.aclose()


def _verb(event: Any) -> str:
    """What a command was trying to do, for the SessionEnded message."""
    return {
        InputInjected: "accept input",
        CancelRequested: "cancel",
        PermissionDecided: "take a permission decision",
        AskAnswered: "take an answer",
    }.get(type(event), "take the command")


def _pick(given: float | None, manifest: float | None, default: float | None) -> float | None:
    """The first limit set, caller before manifest before default; 0 means off."""
    for value in (given, manifest, default):
        if value is not None:
            if not value >= 0:  # negative or NaN
                raise ValueError(f"a timeout must be 0 (off) or positive seconds, not {value}")
            return value or None
    return None
