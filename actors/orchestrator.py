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

import trio

from trio_cap.actors.agent.script import Script, load_script
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
    ActorRef,
    ActorSystem,
    Escalate,
    open_actor_system,
)
from trio_cap.actors.session.actor import (
    Candidate,
    SessionActor,
    SessionEnded,
)
from trio_cap.actors.session.machine import SessionMachine
from trio_cap.actors.session.policy import POLICIES, Answerer, PermissionPolicy
from trio_cap.actors.session.timers import Timeouts
from trio_cap.actors.session_handle import Session, TurnResult, acquire_slot
from trio_cap.events.clock import Clock, SystemClock
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    TERMINAL_EVENTS,
    FleetCompleted,
    FleetFailed,
    FleetStarted,
    SessionConfig,
    SessionCreated,
)
from trio_cap.events.log import EventLog, MemoryEventLog
from trio_cap.events.log.opener import open_log
from trio_cap.events.projections import State, fold, forget, initial_state
from trio_cap.events.projections.fleets import FleetView, fold_fleet, forget_fleet

__all__ = ["BUILTIN_AGENT", "Orchestrator", "Session", "TurnResult", "UnknownAgent",
           "open_orchestrator", "resolve"]

BUILTIN_AGENT = "cap-agent"


BUSY_AT_ONCE = 16
"""Default of :attr:`Orchestrator.busy`: sessions starting, closing or taking a command at
once.  Measured (``bench sessions``, 1,000 in-process sessions): 16 → append → subscriber
p99 ~3 ms, 64 → 15–40 ms, the same wall time; 40 ``cap-agent`` processes started 16 at a
time each reach ready in 3.4 s instead of 8.3 s, all 40 in the same 10 s."""


_FORGETS: dict[type, str] = {**dict.fromkeys(TERMINAL_EVENTS, "session"),
                             FleetCompleted: "fleet ended", FleetFailed: "fleet ended",
                             FleetStarted: "fleet started"}
"""The events after which the live state forgets something (one lookup per event folded)."""


class UnknownAgent(Exception):
    """No usable manifest for that agent, or it does not offer the binding asked for."""


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
        trail, and an ended fleet run's messages, audit and asks (default: no — it keeps
        their summaries and usage; :meth:`session_state` and :meth:`fleet_state` fold the
        rest from the log on demand)."""
        self.keep_last_fleet = True
        """Whether the fleet run that ended last keeps its detail until another run starts
        (default: yes, for callers that read a run's projection from ``state`` once it has
        returned, as ``cap fleet run`` and the fleet tests do; a long-lived fleet face then
        holds one ended run's detail, never all of them).  No: forgotten at its end."""
        self._ended_fleets: list[str] = []
        """Fleet streams that ended and whose detail is still held."""
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
                what = _FORGETS.get(type(env.event))
                if what is None:
                    continue
                if what == "session":
                    forget(self.state, env.stream)
                elif what == "fleet ended":
                    self._ended_fleets.append(env.stream)
                    if not self.keep_last_fleet:
                        self._forget_ended_fleets()
                else:
                    self._forget_ended_fleets(but=env.stream)
        if self._waiters:
            for stream in {env.stream for env in batch}:
                self._wake(stream)
            self._wake(None)

    def _forget_ended_fleets(self, but: str | None = None) -> None:
        """Forget every ended fleet run held so far (``but``: one starting again, resumed)."""
        for stream in self._ended_fleets:
            if stream != but:
                forget_fleet(self.state.fleets, stream)
        self._ended_fleets = []

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

    def fleet_state(self, name: str) -> FleetView | None:
        """A fleet run's whole projection — plan, messages, audit, asks — folded from its
        stream and its members' in the log: the detail the live state drops once the run
        has ended.  ``None``: the log has no fleet of that name."""
        view = self.state.fleets.fleets.get(name)
        stream = view.stream if view is not None else f"fleet:{name}"
        return fold_fleet(lambda s: self.log.read(1, s), stream).fleets.get(name)

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
        await acquire_slot(self.busy, token)  # held until the session is up
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


def _pick(given: float | None, manifest: float | None, default: float | None) -> float | None:
    """The first limit set, caller before manifest before default; 0 means off."""
    for value in (given, manifest, default):
        if value is not None:
            if not value >= 0:  # negative or NaN
                raise ValueError(f"a timeout must be 0 (off) or positive seconds, not {value}")
            return value or None
    return None
