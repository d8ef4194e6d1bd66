"""The session actor: the Trio shell around :class:`SessionMachine`.

Its inbox takes commands from the owner (through :class:`~actors.orchestrator.Session`)
and what the connection delivers (agent event batches, turn ends, the agent's
disappearance), in one order.  Event sourcing is literal here: a command is
validated, appended to the log, and only then applied; agent events are
appended as they arrive and then fed to the machine, whose derived events
(lifecycle, decisions) name them as their ``cause``.  Every outbound frame is
logged before it is sent, so the log proves what reached the agent and when.

The actor also keeps the session's clock: turn and idle timeouts
(:mod:`.timers`) wake it through its own inbox, so a timeout is handled in
the same order as everything else and is logged before the turn ends.

Whoever waits for an answer from the actor races that wait against the
actor's end (``ActorRef.done``): a command that reaches the inbox just as the
session ends would otherwise wait forever on a reply nobody will send.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from typing import Any

import attrs
import trio

from trio_cap.actors.bindings.base import AgentBatch, AgentGone, TurnEnded
from trio_cap.actors.connection import AgentSpec, ConnectError, Connector
from trio_cap.actors.manifest.select import BindingUnavailable, first_working
from trio_cap.actors.runtime import Actor, ActorContext, ActorNotFound, ActorRef, first_of
from trio_cap.actors.session.machine import (
    BUSY,
    CancelAgent,
    Close,
    Emit,
    Output,
    Send,
    SessionMachine,
    State,
)
from trio_cap.actors.session.resolve import with_resolved_paths
from trio_cap.actors.session.timers import Timeouts, TurnTimer
from trio_cap.events.kinds import BindingFallback, Cancel, CapError, Event
from trio_cap.events.log.base import EventLog
from trio_cap.events.log.errors import EventRejected


class CommandRefused(Exception):
    """The session did not accept a command; ``error`` is the logged ``cap.error``."""

    def __init__(self, error: CapError) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.error = error


class SessionEnded(Exception):
    """The session ended before it could handle the command (or while it was waited on)."""

    def __init__(self, message: str = "the session has ended", view: Any = None) -> None:
        super().__init__(message)
        self.view = view
        """The session's final projection (a ``SessionView``) when the caller knows it."""


class Reply:
    """A one-shot answer from the actor to whoever sent a command."""

    def __init__(self) -> None:
        self._done = trio.Event()
        self._value: Any = None
        self._error: BaseException | None = None

    def set(self, value: Any) -> None:
        if not self._done.is_set():
            self._value = value
            self._done.set()

    def fail(self, error: BaseException) -> None:
        if not self._done.is_set():
            self._error = error
            self._done.set()

    async def wait(self, gone: trio.Event | None = None) -> Any:
        """The answer; :class:`SessionEnded` if ``gone`` (the actor's end) comes first."""
        if gone is None:
            await self._done.wait()
        else:
            await first_of(self._done, gone)
        if not self._done.is_set():
            raise SessionEnded()
        if self._error is not None:
            raise self._error
        return self._value


async def request(ref: ActorRef, make: Any) -> Any:
    """Send ``make(reply)`` to the actor and wait for the answer, or for the actor's end.

    A stopped actor (its inbox closed) and one that ends with the message
    unread both raise :class:`SessionEnded` at once, never a wait.
    """
    reply = Reply()
    if ref.done.is_set():
        raise SessionEnded()
    try:
        await ref.send(make(reply))
    except ActorNotFound:
        raise SessionEnded() from None
    return await reply.wait(ref.done)


@attrs.frozen
class Command:
    event: Event
    reply: Reply


@attrs.frozen
class CloseSession:
    reply: Reply


@attrs.frozen
class Tick:
    """The session's timer woke up: something may have expired."""


@attrs.frozen
class Candidate:
    """One binding to try: its connector, or why it cannot be tried in this build."""

    binding: str
    spec: AgentSpec
    connector: Connector | None = None
    unavailable: str | None = None


@attrs.frozen
class Accepted:
    seq: int
    turn: int | None
    """For an input: the turn it will run as (None when refused by the budget gate)."""


class SessionActor(Actor):
    def __init__(
        self,
        machine: SessionMachine,
        candidates: Sequence[Candidate],
        log: EventLog,
        timeouts: Timeouts | None = None,
        shutdown_reason: Callable[[], str] | None = None,
    ) -> None:
        self.machine = machine
        self.candidates = candidates
        self.log = log
        self.stream = machine.session_id
        self.conn: Any = None
        self.timer = TurnTimer(timeouts or Timeouts())
        self.shutdown_reason = shutdown_reason or (lambda: "orchestrator shut down")
        """Why the session ends if the orchestrator stops it (read at that moment)."""
        self._rearm = trio.Event()
        self.recorder: Any = None
        """The chosen connection's :class:`~trio_cap.actors.recording.Recorder`, if recording."""

    async def run(self, ctx: ActorContext) -> None:
        machine = self.machine
        try:
            await self._apply(machine.create())
            # a stop while still connecting (an agent that never answers its handshake) ends
            # the attempt at once; once connected, a stop drains the inbox and closes gently
            with ctx.cancelled_on_stop() as connecting:
                await self._connected(ctx, connecting)
        finally:
            self.conn = None
            with ctx.shielded():
                if not machine.terminal:
                    await self._apply(machine.shutdown(self.shutdown_reason()))
                _refuse_queued(ctx)

    async def _connected(self, ctx: ActorContext, connecting: trio.CancelScope) -> None:
        machine = self.machine
        async with AsyncExitStack() as stack:

            async def try_open(candidate: Candidate) -> Any:
                if candidate.connector is None:
                    raise ConnectError(candidate.unavailable or "no connector")
                opened = candidate.connector.open(candidate.spec, ctx.ref.clone_sender())
                return await stack.enter_async_context(opened)

            async def on_fallback(failed: str, next_binding: str, reason: str) -> None:
                event = BindingFallback(failed=failed, next=next_binding, reason=reason)
                await self.log.append([event], stream=self.stream)

            try:
                chosen, self.conn = await first_working(self.candidates, try_open, on_fallback)
            except BindingUnavailable as exc:
                await self._apply(machine.fail(exc.code, str(exc)))
                return
            ctx.keep_on_stop(connecting)
            self.recorder = chosen.spec.options.get("recorder")
            await self._recorded_out(None)  # what the handshake wrote
            await self._apply(machine.start(chosen.binding))
            async with trio.open_nursery() as clock:
                if self.timer.timeouts.enabled:
                    clock.start_soon(self._clock, ctx.ref)
                async for batch in ctx.batches():
                    await self._handle(batch)
                    self._observe(batch)
                    if machine.terminal:
                        break
                clock.cancel_scope.cancel()
            self.conn = None

    # ---- timers -----------------------------------------------------------
    def _observe(self, batch: list[Any]) -> None:
        machine = self.machine
        in_flight = machine.in_flight[0][0] if machine.in_flight and machine.state in BUSY else None
        self.timer.observe(
            trio.current_time(),
            turn=in_flight,
            waiting=machine.state is State.INPUT_REQUIRED,
            activity=any(type(m) is AgentBatch for m in batch),
        )
        self._rearm.set()

    async def _clock(self, ref: ActorRef) -> None:
        """Wake the actor (through its inbox, in order) when the next deadline passes."""
        while True:
            rearm = self._rearm = trio.Event()
            deadline = self.timer.deadline()
            with trio.move_on_at(deadline if deadline is not None else math.inf):
                await rearm.wait()
                continue
            try:
                await ref.send(Tick())
            except ActorNotFound:
                return
            await rearm.wait()  # set once the actor has handled the tick

    async def _expire(self) -> None:
        expired = self.timer.expire(trio.current_time())
        if expired is None:
            return
        if expired.hard:
            await self._apply(self.machine.fail(expired.code, expired.message))
        else:
            await self._apply(
                self.machine.time_out(expired.code, f"{expired.message}; the turn is cancelled")
            )

    # ---- inbox ------------------------------------------------------------
    async def _handle(self, batch: list[Any]) -> None:
        events: list[Event] = []
        for message in batch:
            if type(message) is AgentBatch:
                events.extend(message.events)
                continue
            if events:
                await self._agent_events(events)
                events = []
            await self._one(message)
            if self.machine.terminal:
                return
        if events:
            await self._agent_events(events)

    async def _agent_events(self, events: list[Event]) -> None:
        machine = self.machine
        # raw output past the session's budget is counted, not stored; permission requests
        # get the symlink facts the machine rates from (logged, so replay needs no disk)
        events = await with_resolved_paths(machine.admit(events), machine.config.cwd)
        if not events:
            return
        last = await self.log.append(events, stream=self.stream, cause=machine.turn_cause)
        outputs = machine.on_agent(events, last - len(events) + 1)
        if outputs:
            await self._apply(outputs)

    async def _one(self, message: Any) -> None:
        machine = self.machine
        if isinstance(message, Command):
            refusal = machine.refusal(message.event)
            if refusal is not None:
                await self.log.append([refusal], stream=self.stream)
                message.reply.fail(CommandRefused(refusal))
                return
            try:
                seq = await self.log.append([message.event], stream=self.stream)
            except EventRejected as exc:  # e.g. a task larger than a log record: nothing was
                message.reply.fail(exc)  # written, so the session goes on without it
                return
            outputs = machine.on_command(message.event, seq)
            await self._apply(outputs)
            refused = any(
                isinstance(o, Emit)
                and o.cause == seq
                and any(getattr(e, "code", "") == "cap_budget_exceeded" for e in o.events)
                for o in outputs
            )
            turn = None if refused else machine.turn + len(machine.queue)
            message.reply.set(Accepted(seq, turn))
        elif isinstance(message, CloseSession):
            await self._apply(machine.close())
            message.reply.set(None)
        elif isinstance(message, TurnEnded):
            await self._apply(machine.on_turn_ended(message.stop_reason))
        elif isinstance(message, AgentGone):
            await self._apply(machine.on_agent_gone(message.reason))
        elif isinstance(message, Tick):
            await self._expire()

    async def _apply(self, outputs: list[Output]) -> None:
        for out in outputs:
            if isinstance(out, Emit):
                await self.log.append(out.events, stream=self.stream, cause=out.cause)
            elif isinstance(out, Send):
                if self.conn is not None:
                    await self.log.append([out.frame], stream=self.stream, cause=out.cause)
                    await self.conn.send([out.frame])
                    await self._recorded_out(out.cause)
            elif isinstance(out, CancelAgent):
                if self.conn is not None:
                    frame = Cancel(scope=out.scope, reason=out.reason)
                    await self.log.append([frame], stream=self.stream, cause=out.cause)
                    await self.conn.cancel(out.scope)
                    await self._recorded_out(out.cause)
            elif isinstance(out, Close):
                pass  # leaving the connection's context closes it

    async def _recorded_out(self, cause: int | None) -> None:
        """Log what the connection wrote for the last send (``--record``), after the send."""
        if self.recorder is not None:
            written = self.recorder.take_out()
            if written:
                await self.log.append(written, stream=self.stream, cause=cause)


def _refuse_queued(ctx: ActorContext) -> None:
    """Answer commands still queued so no caller waits forever on a dead session."""
    while True:
        try:
            message = ctx.inbox.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            return
        if isinstance(message, CloseSession):
            message.reply.set(None)
        elif isinstance(message, Command):
            message.reply.fail(SessionEnded())
