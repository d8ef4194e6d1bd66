"""The bridge brain: an agent trio-cap drives, re-exposed through the agent side.

Layering (DESIGN §2a): this module drives the orchestrator, so it lives above
it, beside it in ``actors/`` and below the CLI; nothing under the orchestrator
imports it.  The agent shell only knows a ``make_core`` factory, which the CLI
fills with :func:`bridge_core`.

``cap agent --cap-speak stream-json --bridge AGENT [--binding B]`` puts this
object where the scripted :class:`~actors.agent.core.AgentCore` normally sits
(the CLI hands :func:`bridge_core` to the agent shell as its ``make_core``).
It has the same interface — it consumes orchestrator → agent CAP frames and
emits CAP events plus :class:`~actors.bindings.base.TurnEnded` — but instead of
running script steps it opens an in-process orchestrator, starts a session for
AGENT (any binding trio-cap has) and relays:

* frames in → the :class:`~actors.orchestrator.Session` handle (inject, cancel,
  decide, answer), so every command goes through the session actor and its log;
* the session's stream in that log → events out, with ``session.turn_ended`` as the
  turn end and a terminal session as the end of the bridge.

The session runs with ``permissions="ask"`` and ``human=True``: every
permission request and ask of the driven agent waits for a human, and the
"human" is whoever drives the agent side (for stream-json, the SDK client's
``can_use_tool``).  Request ids are renumbered (``perm_N``, ``ask_N``) because
the driven agent's ids are its own (Claude Code's are control-request uuids)
and the agent side must never see two namespaces.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import trio

from trio_cap.actors.agent.core import CoreEnded, Emit, Emitted, first_config
from trio_cap.actors.agent.script import Script
from trio_cap.actors.bindings.base import BRIDGED, TurnEnded
from trio_cap.actors.bindings.stream_json.agent_argv import AgentOptions
from trio_cap.actors.connection import Connector
from trio_cap.actors.orchestrator import Orchestrator, Session, UnknownAgent, open_orchestrator
from trio_cap.actors.relay import Relay, Verdict
from trio_cap.actors.session.actor import CommandRefused, SessionEnded
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    TERMINAL_EVENTS,
    AskUser,
    AskUserAnswer,
    Cancel,
    CapError,
    CapSessionReady,
    Event,
    PermissionRequest,
    PermissionResponse,
    PtyRawBytes,
    SessionCancelled,
    SessionConfig,
    SessionFailed,
    SessionReady,
    SessionTurnEnded,
    SessionWorking,
    TextChunk,
    ToolCallStart,
    UserInputInject,
)
from trio_cap.events.log import EventLog


class BridgeCore:
    """Drive ``agent`` through an orchestrator and speak for it as a CAP core.

    ``log`` is the orchestrator's event log (an :class:`EventLog`, a file path,
    or None for memory): it is separate from the agent side's own log, because
    that one's transcript diffs promise contiguous seqs of one session.
    ``connectors`` replace the orchestrator's defaults (tests give the driven
    agent an isolated environment that way).
    """

    def __init__(self, agent: str, emit: Emit, *, binding: str | None = None,
                 session_id: str = "cap-agent", log: EventLog | str | None = None,
                 script: Script | None = None,
                 connectors: Mapping[str, Connector] | None = None,
                 grace: float = 5.0) -> None:
        self.agent = agent
        self.binding = binding
        self.session_id = session_id
        self.config: SessionConfig | None = None
        self.session: Session | None = None
        self.orch: Orchestrator | None = None
        self._emit = emit
        self._log = log
        self._script = script
        self._connectors = dict(connectors or {})
        self._grace = grace
        self._open_turns = 0
        self._working = False
        self._cancel_pending = False
        self._closing = False
        self._failure: str | None = None
        self._ids = Relay()
        """The driven agent's permission and ask ids, renumbered (shared with the fleet face)."""

    # ---- frames in -----------------------------------------------------------------
    async def run(self, frames: trio.MemoryReceiveChannel[Event]) -> None:
        """Serve one session; raises :class:`CoreEnded` when the driven agent cannot go on."""
        first = await first_config(frames, self._emit)
        if first is None:
            return
        self.config = first
        async with open_orchestrator(self._log, grace=self._grace) as orch:
            self.orch = orch
            orch.connectors.update(self._connectors)
            try:
                session = await orch.start_session(
                    self.agent, self.binding, cwd=first.cwd, model=first.model,
                    system_prompt=first.system_prompt, max_turns=first.max_turns,
                    budget_usd=first.budget_usd, script=self._script,
                    permissions="ask", human=True)
            except (UnknownAgent, OSError, ValueError) as exc:
                self._failure = f"bridge: cannot drive {self.agent!r}: {exc}"
            else:
                self.session = session
                await self._serve(orch, session, frames)
        # raised out here, not inside the orchestrator's nurseries, so it is not wrapped
        if self._failure is not None:
            raise CoreEnded(self._failure)

    async def _serve(self, orch: Orchestrator, session: Session,
                     frames: trio.MemoryReceiveChannel[Event]) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._pump, orch, session, nursery.cancel_scope)
            await self._frames(frames, session, nursery)
            # the agent side's frames ended: close the driven session gracefully rather
            # than leave it to the orchestrator's shutdown
            self._closing = True
            await _quietly(session.close())
            nursery.cancel_scope.cancel()

    async def _frames(self, frames: trio.MemoryReceiveChannel[Event], session: Session,
                      nursery: trio.Nursery) -> None:
        async for frame in frames:
            if isinstance(frame, UserInputInject):
                self._open_turns += 1
                accepted = await _quietly(session.inject(frame.text))
                if accepted is None or accepted.turn is None:  # refused (budget, or gone)
                    self._open_turns -= 1
                    ended = self._ended_reason(session)
                    if ended is not None:
                        # the driven session is over: the bridge ends with it and the agent
                        # side fails the open turn with this reason (then exits 1)
                        self._failure = ended
                        nursery.cancel_scope.cancel()
                        return
                    await self._emit([TurnEnded("error")])
            elif isinstance(frame, Cancel):
                if frame.scope == "session":
                    self._closing = True
                    await _quietly(session.cancel("session", frame.reason))
                    nursery.cancel_scope.cancel()
                    return
                if self._working:
                    await _quietly(session.cancel("current_turn", frame.reason))
                elif self._open_turns:
                    self._cancel_pending = True  # the driven turn has not started yet
            elif isinstance(frame, PermissionResponse):
                await self._decide(session, frame)
            elif isinstance(frame, AskUserAnswer):
                await self._answer(session, frame)
            elif isinstance(frame, SessionConfig):
                await self._emit([CapError(code="invalid_state", message="cap.session.config "
                                           "arrived after the session started; ignored")])

    async def _decide(self, session: Session, frame: PermissionResponse) -> None:
        verdict = self._ids.decision(frame)
        if verdict is None:
            await self._emit([unknown(frame)])
            return
        # a refusal (the agent withdrew the request) is logged in the session's stream,
        # and so reaches the client through the pump
        await decide(session, verdict)

    async def _answer(self, session: Session, frame: AskUserAnswer) -> None:
        pending = self._ids.answer(frame)
        if pending is None:
            await self._emit([unknown(frame)])
            return
        await answer(session, pending.remote, frame.value)

    # ---- the session's stream out -----------------------------------------------------
    async def _pump(self, orch: Orchestrator, session: Session,
                    scope: trio.CancelScope) -> None:
        async for batch in orch.log.subscribe(1, session.id):
            out: list[Emitted] = []
            for env in batch:
                ended = await self._relay(env, session, out)
                if ended:
                    if out:
                        await self._emit(out)
                    scope.cancel()
                    return
            if out:
                await self._emit(out)

    async def _relay(self, env: Envelope, session: Session, out: list[Emitted]) -> bool:
        """Translate one envelope of the driven session into ``out``; True at its end."""
        event = env.event
        if isinstance(event, SessionReady):
            out.append(CapSessionReady(session_id=self.session_id, meta={BRIDGED: {
                "agent": self.agent, "binding": self._binding(session),
                "session": session.id, "agent_session_id": event.agent_session_id}}))
        elif isinstance(event, SessionWorking) and not event.resumed:
            self._working = True
            if self._cancel_pending:
                self._cancel_pending = False
                await _quietly(session.cancel("current_turn", "interrupt"))
        elif isinstance(event, SessionTurnEnded):
            if self._open_turns:
                self._open_turns -= 1
                if not self._open_turns:
                    self._working = False
                    self._cancel_pending = False
                out.append(TurnEnded(event.stop_reason))
        elif isinstance(event, TERMINAL_EVENTS):
            if not self._closing:
                self._failure = _ending(self.agent, event)
            return True
        elif type(event).direction == "in":
            relayed = self._translate(event)
            if relayed is not None and (self._open_turns or isinstance(relayed, CapError)):
                out.append(relayed)
        return False

    def _translate(self, event: Event) -> Event | None:
        """The driven agent's event as the agent side must see it (None: not relayed)."""
        if isinstance(event, CapSessionReady | PtyRawBytes):
            return None  # the bridge announces its own readiness; raw screens are not CAP text
        if isinstance(event, TextChunk) and event.channel == "system":
            return None  # interrupt notices: the agent side writes its own
        cwd = self.config.cwd if self.config is not None else ""
        if isinstance(event, ToolCallStart):
            return self._ids.tool_start(event, cwd)
        if isinstance(event, PermissionRequest):
            return self._ids.permission(event, self.session_id, cwd)
        if isinstance(event, AskUser):
            return self._ids.ask(event, self.session_id, cwd)
        return event

    def _ended_reason(self, session: Session) -> str | None:
        """Why the driven session ended, from its terminal event in the log (None: it has
        not; a refusal then is the session's own, e.g. its budget, logged as a cap.error)."""
        if self.orch is None:
            return None
        for env in reversed(self.orch.log.read(1, session.id)):
            if isinstance(env.event, TERMINAL_EVENTS):
                return _ending(self.agent, env.event)
        return None

    def _binding(self, session: Session) -> str | None:
        view = session.view
        return view.binding if view is not None else self.binding


def _ending(agent: str, event: Event) -> str:
    if isinstance(event, SessionFailed):
        return f"the bridged agent {agent!r} failed: {event.code}: {event.message}"
    if isinstance(event, SessionCancelled):
        return f"the bridged agent {agent!r} was cancelled: {event.reason}"
    return f"the bridged agent {agent!r} ended its session"


async def _quietly(command: Any) -> Any:
    """A session command's result, or None when the session refused it or has ended
    (the refusal itself is a ``cap.error`` in the session's stream)."""
    try:
        return await command
    except (CommandRefused, SessionEnded):
        return None


async def decide(session: Session, verdict: Verdict) -> None:
    """The client's permission answer to the driven session that asked."""
    await _quietly(session.decide(verdict.to.remote, verdict.decision, reason=verdict.reason,
                                  updated_input=verdict.updated_input))


async def answer(session: Session, ask_id: str, value: Any) -> None:
    """The client's answer to a driven session's ask."""
    if await _quietly(session.answer(ask_id, value)) is None and value is not None:
        # an answer the ask's form refuses must not leave the driven agent waiting
        await _quietly(session.answer(ask_id, None))


def unknown(frame: PermissionResponse | AskUserAnswer) -> CapError:
    """The error for an answer nothing waits on."""
    if isinstance(frame, PermissionResponse):
        return CapError(code="cap_unknown_permission",
                        message=f"nothing waits on {frame.req_id!r}")
    return CapError(code="unknown_ask", message=f"nothing waits on {frame.ask_id!r}")


def bridge_log_path(agent_log: str | None) -> str | None:
    """Where the bridge's orchestrator logs when the agent side logs to ``agent_log``:
    a sibling file (``run.caplog`` → ``run.bridge.caplog``); None means in memory."""
    if not agent_log:
        return None
    root, ext = os.path.splitext(agent_log)
    return f"{root}.bridge{ext or '.caplog'}"


def bridge_core(options: AgentOptions, script: Script | None = None,
                connectors: Mapping[str, Connector] | None = None,
                ) -> Callable[[Emit, str], BridgeCore]:
    """The agent shell's ``make_core`` for ``--bridge AGENT [--binding B]``: a
    :class:`BridgeCore` for the shell's session, logging beside ``--log``."""
    if not options.bridge:
        raise ValueError("bridge_core needs options.bridge (the agent to drive)")
    agent = options.bridge

    def make(emit: Emit, session_id: str) -> BridgeCore:
        return BridgeCore(agent, emit, binding=options.bridge_binding, session_id=session_id,
                          log=bridge_log_path(options.log), script=script,
                          connectors=connectors)

    return make


__all__: Sequence[str] = ("BRIDGED", "BridgeCore", "bridge_core", "bridge_log_path")
