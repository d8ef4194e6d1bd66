"""The fleet brain: a whole fleet behind one agent face (``cap agent --fleet``).

Layering (DESIGN §2a): like :mod:`actors.bridge` it drives the orchestrator, so it
lives above it, beside the bridge and below the CLI.  It is a *core*: the agent sides
(stream-json, ACP; and, through the ``inproc`` connector, A2A's publisher) hand it
orchestrator → agent frames and show what it emits, exactly as they do for the
scripted brain and the bridge — so every wire gets the fleet with no code of its own.

Each prompt is one run of the fleet with the prompt as its task (to the members the
fleet file starts with: the lead, or the first stage): the run is logged in the
orchestrator's log like ``cap fleet run``'s, and the sans-io :class:`~.fleet.face.FaceMachine`
turns what it logs into the face's events (the plan, the members' text and tool calls,
their questions).  The members run with a person present (``human=True``): what their
policy leaves to a person is asked of the client, renumbered by the same
:class:`~.relay.Relay` the bridge uses, and its answer goes back to the member's session.
The turn ends when the fleet does: with the fleet's answer (the last member turn's
final text) and every member's usage, or with why it failed.

A later run (the next prompt, or another session of the same orchestrator) is named
``<fleet>-<n>`` (its own streams and session ids); like any run it gets working
directories and branches of its own, so runs never wait for a ``cap fleet clean``.
"""

from __future__ import annotations

import math
import os
import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager

import attrs
import trio

from trio_cap.actors.agent.core import Emit, Emitted, first_config
from trio_cap.actors.bindings.base import TurnEnded
from trio_cap.actors.bridge import answer, decide, unknown
from trio_cap.actors.connection import Connector
from trio_cap.actors.fleet.face import FaceMachine
from trio_cap.actors.fleet.model import BySubtask, Fleet
from trio_cap.actors.fleet.runner import FleetSetupError, run_fleet
from trio_cap.actors.orchestrator import Orchestrator, open_orchestrator
from trio_cap.actors.relay import Relay
from trio_cap.events.kinds import (
    AskUserAnswer,
    Cancel,
    CapError,
    CapSessionReady,
    Event,
    PermissionResponse,
    Plan,
    SessionConfig,
    TextChunk,
    UserInputInject,
)
from trio_cap.events.log import EventLog

FLEET = "cap.fleet"
"""``_meta`` of the face's ``cap.session.ready``: the fleet's name, members and file."""
CATCH_UP = 30.0
"""Seconds the face waits for its log subscription to reach the end of a finished run
(it is already in the log; this only bounds a stalled subscription)."""


class FleetCore:
    """Run ``fleet`` once per prompt and speak for it as one CAP core.

    ``orch``: run the fleet in this orchestrator (``cap serve a2a``: its log is the
    server's), else in one of the core's own on ``log`` (an :class:`EventLog`, a
    path, or None for memory), kept apart from the agent side's own log as the
    bridge's is.  ``connectors`` replace the orchestrator's defaults (tests).
    """

    def __init__(self, fleet: Fleet, emit: Emit, *, session_id: str = "cap-agent",
                 orch: Orchestrator | None = None, log: EventLog | str | None = None,
                 connectors: Mapping[str, Connector] | None = None,
                 grace: float = 5.0) -> None:
        self.fleet = fleet
        self.session_id = session_id
        self.config: SessionConfig | None = None
        self.orch = orch
        self._own = orch is None
        self._emit = emit
        self._log = log
        self._connectors = dict(connectors or {})
        self._grace = grace
        self._ids = Relay(absolute=True)
        self._runs = 0
        self._turn: trio.CancelScope | None = None
        self._cancel_next = False
        self._queued = 0

    # ---- frames in -----------------------------------------------------------------
    async def run(self, frames: trio.MemoryReceiveChannel[Event]) -> None:
        """Serve one session until the agent side closes the frames or cancels it."""
        first = await first_config(frames, self._emit)
        if first is None:
            return
        self.config = first
        self._ids.face_cwd = first.cwd
        await self._emit([CapSessionReady(session_id=self.session_id, meta={FLEET: {
            "name": self.fleet.name, "members": list(self.fleet.ids),
            "source": self.fleet.source}})])
        async with self._orchestrator() as orch:
            self.orch = orch
            prompts_send, prompts = trio.open_memory_channel[str](math.inf)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._turns, orch, prompts)
                async with prompts_send:
                    async for frame in frames:
                        if isinstance(frame, UserInputInject):
                            self._queued += 1
                            prompts_send.send_nowait(frame.text)
                        elif isinstance(frame, Cancel):
                            if frame.scope == "session":
                                nursery.cancel_scope.cancel()
                                return
                            if self._turn is not None:
                                self._turn.cancel()
                            elif self._queued:
                                self._cancel_next = True
                        elif isinstance(frame, PermissionResponse):
                            await self._decide(orch, frame)
                        elif isinstance(frame, AskUserAnswer):
                            await self._answer(orch, frame)
                        elif isinstance(frame, SessionConfig):
                            await self._emit([CapError(
                                code="invalid_state", message="cap.session.config arrived "
                                "after the session started; ignored")])

    @asynccontextmanager
    async def _orchestrator(self) -> AsyncIterator[Orchestrator]:
        if self.orch is not None and not self._own:
            yield self.orch
            return
        async with open_orchestrator(self._log, grace=self._grace) as orch:
            orch.connectors.update(self._connectors)
            yield orch

    async def _decide(self, orch: Orchestrator, frame: PermissionResponse) -> None:
        verdict = self._ids.decision(frame)
        if verdict is None:
            await self._emit([unknown(frame)])
            return
        # a member that has ended refuses quietly: its request went with it
        await decide(orch.session(verdict.to.source), verdict)

    async def _answer(self, orch: Orchestrator, frame: AskUserAnswer) -> None:
        pending = self._ids.answer(frame)
        if pending is None:
            await self._emit([unknown(frame)])
            return
        await answer(orch.session(pending.source), pending.remote, frame.value)

    # ---- turns ----------------------------------------------------------------------------
    async def _turns(self, orch: Orchestrator, prompts: trio.MemoryReceiveChannel[str]) -> None:
        async for text in prompts:
            self._queued -= 1
            if self._cancel_next:
                self._cancel_next = False
                await self._emit([TurnEnded("cancelled")])
                continue
            await self._run_once(orch, text)

    async def _run_once(self, orch: Orchestrator, text: str) -> None:
        """One prompt: one run of the fleet, relayed; ends with exactly one turn end."""
        self._runs += 1
        name = _claim(orch, self.fleet.name)
        fleet = attrs.evolve(self.fleet, task=text, name=name)
        face = FaceMachine(self._ids, name, frozenset(
            r.source for r in fleet.routes if isinstance(r, BySubtask) and r.source))
        from_seq = orch.log.last_seq + 1
        failure: str | None = None
        with trio.CancelScope() as scope:
            self._turn = scope
            async with trio.open_nursery() as nursery:
                caught_up = _Progress(from_seq - 1)
                nursery.start_soon(self._relay, orch, face, from_seq, caught_up)
                try:
                    await run_fleet(orch, fleet, human=True)
                except FleetSetupError as exc:
                    failure = str(exc)
                with trio.move_on_after(CATCH_UP):
                    await caught_up.reach(orch.log.last_seq)
                nursery.cancel_scope.cancel()
        self._turn = None
        message_id = f"fleet-{self._runs}"
        if scope.cancelled_caught:
            await self._emit([TextChunk(message_id=message_id, text=f"\n\nThe fleet {name} "
                                        "was stopped.", channel="assistant"),
                              face.usage, TurnEnded("cancelled")])
        elif failure is not None:
            await self._emit([CapError(code="fleet_failed", message=failure),
                              TurnEnded("error")])
        else:
            await self._emit([*face.closing(message_id),
                              TurnEnded("end_turn" if face.failure is None else "error")])

    async def _relay(self, orch: Orchestrator, face: FaceMachine, from_seq: int,
                     progress: _Progress) -> None:
        async for batch in orch.log.subscribe(from_seq):
            out: list[Emitted] = []
            for env in batch:
                out += face.observe(env)
            plans = [i for i, e in enumerate(out) if type(e) is Plan]
            if len(plans) > 1:  # each is the whole plan: the batch's last says it all
                out = [e for i, e in enumerate(out) if type(e) is not Plan or i == plans[-1]]
            if out:
                await self._emit(out)
            progress.at(face.seen)


_CLAIMED: weakref.WeakKeyDictionary[Orchestrator, set[str]] = weakref.WeakKeyDictionary()


def _claim(orch: Orchestrator, base: str) -> str:
    """A fleet name no run in ``orch`` has used (its log, or a run starting now): ``base``,
    then ``base-2`` …, so every run's streams, session ids and branches are its own."""
    claimed = _CLAIMED.setdefault(orch, set())
    name, n = base, 1
    while name in claimed or orch.log.read(1, f"fleet:{name}"):
        n += 1
        name = f"{base}-{n}"
    claimed.add(name)
    return name


class _Progress:
    """How far the relay has read the log, and a way to wait until it has read to a seq."""

    def __init__(self, seq: int) -> None:
        self.seq = seq
        self._moved = trio.Event()

    def at(self, seq: int) -> None:
        self.seq = seq
        self._moved.set()
        self._moved = trio.Event()

    async def reach(self, seq: int) -> None:
        while self.seq < seq:
            await self._moved.wait()


def fleet_log_path(agent_log: str | None) -> str | None:
    """Where the fleet's orchestrator logs when the agent side logs to ``agent_log``:
    a sibling file (``run.caplog`` → ``run.fleet.caplog``); None means in memory."""
    if not agent_log:
        return None
    root, ext = os.path.splitext(agent_log)
    return f"{root}.fleet{ext or '.caplog'}"


def fleet_core(fleet: Fleet, *, log: str | None = None,
               connectors: Mapping[str, Connector] | None = None,
               ) -> Callable[[Emit, str], FleetCore]:
    """An agent shell's ``make_core`` for ``--fleet FLEET``: a :class:`FleetCore` per
    session, each logging to ``log`` (a path; with several sessions in one process, the
    session id is added to the name) or to memory."""
    def make(emit: Emit, session_id: str) -> FleetCore:
        return FleetCore(fleet, emit, session_id=session_id, log=log, connectors=connectors)

    return make


__all__: Sequence[str] = ("FLEET", "FleetCore", "fleet_core", "fleet_log_path")
