"""The publisher's Trio shell on the orchestrator side: sessions, their streams, the waiters.

It carries out what :class:`~.publisher.PublisherMachine` answers — starts a
session per A2A context through the orchestrator (``start_session``), turns
the machine's actions into ``Session.inject / answer / decide / cancel`` —
and feeds each session's stream in the log back to the machine.  Subscribers
(the SSE streams and blocking sends of ``serve_app``) never get a queue: they
*pull* a task's numbered updates and sleep on one change event when caught
up, as the log's own subscriptions do, so a slow subscriber never slows the
session or another subscriber, and memory is the task's updates, kept anyway
for resubscription.

Layering: it drives the orchestrator, so like ``actors/bridge.py`` it sits above it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import attrs
import trio

from trio_cap.actors.bindings.a2a.publisher import (
    UNSUPPORTED_OPERATION,
    Answer,
    CancelTurn,
    Decide,
    Inbound,
    Inject,
    Plan,
    PublisherMachine,
    RpcFault,
    StartSession,
    Task,
    Update,
    ending,
)
from trio_cap.actors.manifest import Resolved
from trio_cap.actors.orchestrator import Orchestrator, Session, UnknownAgent
from trio_cap.actors.session.actor import CommandRefused, SessionEnded
from trio_cap.events.kinds import TERMINAL_EVENTS

BUSY = -32603


@attrs.frozen
class SessionOptions:
    """How every published session is started (``cap serve a2a``'s flags)."""

    binding: str | None = None
    cwd: str | None = None
    model: str | None = None
    script: Any = None
    permissions: str = "ask"
    allow_high_risk: bool = False
    max_sessions: int = 64
    cancel_wait: float = 30.0
    """Seconds ``tasks/cancel`` waits for the turn to end before answering with its state."""
    idle_close: float | None = 1800.0
    """Seconds a conversation with no task at work (none, or one waiting for an answer that
    does not come) may sit unused before its session is closed, its agent ended and a
    waiting task failed; later messages to it are refused (None: never)."""


class Publisher:
    """One published agent: the machine, its sessions and the tasks' waiters."""

    def __init__(self, orch: Orchestrator, agent: Resolved, options: SessionOptions,
                 nursery: trio.Nursery) -> None:
        self.orch = orch
        self.agent = agent
        self.options = options
        self.machine = PublisherMachine(orch.ids.new)
        self.sessions: dict[str, Session] = {}
        self.closing = trio.Event()
        self._nursery = nursery
        self._changed = trio.Event()
        self._used: dict[str, float] = {}
        """context → when it last did anything (a call or an event), on Trio's clock."""
        if options.idle_close is not None:
            nursery.start_soon(self._close_idle, options.idle_close)

    # ---- calls -------------------------------------------------------------------------

    async def send(self, owner: str, message: Inbound) -> Plan | RpcFault:
        if not message.task_id and not message.context_id and self._open() >= \
                self.options.max_sessions:
            return RpcFault(BUSY, f"busy: {self.options.max_sessions} conversations are open "
                            "(cap serve a2a --max-sessions); continue one of yours or retry later",
                            "BUSY")
        plan = self.machine.send(owner, message)
        if isinstance(plan, RpcFault):
            return plan
        self._used[plan.context_id] = trio.current_time()
        for action in plan.actions:
            fault = await self._carry_out(action, plan)
            if fault is not None:
                return fault
        return plan

    def _open(self) -> int:
        return sum(1 for c in self.machine.contexts.values() if c.ended is None)

    async def _carry_out(self, action: Any, plan: Plan) -> RpcFault | None:
        at = self.orch.clock.now()
        if isinstance(action, StartSession):
            await self._start(action.context_id, plan.task_id)
        elif isinstance(action, Inject):
            session = self.sessions.get(action.context_id)
            if session is None:
                return None  # the start failed: the task already says why
            try:
                await session.inject(action.text, source=action.source)
            except CommandRefused as exc:
                self._publish(self.machine.fail_task(action.task_id, exc.error.message, at))
            except SessionEnded as exc:  # say why it ended, from its terminal event
                why = next((ending(env.event) for env in reversed(
                    self.orch.log.read(1, session.id)) if isinstance(env.event,
                                                                     TERMINAL_EVENTS)),
                           str(exc))
                self._publish(self.machine.end_context(action.context_id, why, at))
        elif isinstance(action, Answer | Decide):
            session = self.sessions[action.context_id]
            try:
                if isinstance(action, Answer):
                    await session.answer(action.ask_id, action.value)
                else:
                    await session.decide(action.req_id, action.decision, reason=action.reason)
            except CommandRefused as exc:
                return RpcFault(-32602, f"the session refused the answer: {exc.error.message}")
            except SessionEnded as exc:
                return RpcFault(UNSUPPORTED_OPERATION, str(exc), "UNSUPPORTED_OPERATION")
        return None

    async def _start(self, context_id: str, task_id: str) -> None:
        opts = self.options
        try:
            session = await self.orch.start_session(
                self.agent, opts.binding, cwd=opts.cwd, model=opts.model, script=opts.script,
                permissions=opts.permissions, allow_high_risk=opts.allow_high_risk,
                human=opts.permissions == "ask", session_id=context_id,
                permissions_chosen=True)
        except (UnknownAgent, OSError, ValueError) as exc:
            at = self.orch.clock.now()
            updates = self.machine.fail_task(task_id, f"cannot start the agent: {exc}", at)
            updates += self.machine.end_context(context_id, f"cannot start the agent: {exc}", at)
            self._publish(updates)
            return
        self.sessions[context_id] = session
        self._nursery.start_soon(self._pump, context_id, session)

    async def cancel(self, owner: str, task_id: str) -> Task | RpcFault:
        found = self.machine.cancel(owner, task_id)
        if isinstance(found, RpcFault):
            return found
        assert isinstance(found, CancelTurn)
        task = self.machine.tasks[found.task_id]
        session = self.sessions.get(found.context_id)
        if session is not None:
            try:
                await session.cancel("current_turn", reason="canceled by the A2A caller")
            except (CommandRefused, SessionEnded):
                pass
            with trio.move_on_after(self.options.cancel_wait):
                while not task.terminal:
                    await self.wait_changed()
        return task

    # ---- the sessions' streams -----------------------------------------------------------

    async def _pump(self, context_id: str, session: Session) -> None:
        async for batch in self.orch.log.subscribe(1, session.id):
            self._used[context_id] = trio.current_time()
            self._publish(self.machine.on_envelopes(context_id, batch))
            if any(isinstance(env.event, TERMINAL_EVENTS) for env in batch):
                return

    async def _close_idle(self, idle: float) -> None:
        """Close the sessions of conversations idle for ``idle`` seconds (not mid-task)."""
        while True:
            await trio.sleep(max(idle / 4, 0.05))
            now = trio.current_time()
            for context in list(self.machine.contexts.values()):
                session = self.sessions.get(context.id)
                active = self.machine.tasks[context.active] if context.active else None
                if context.ended is not None or session is None or (
                        active is not None and not active.interrupted) or \
                        now - self._used.get(context.id, now) < idle:
                    continue  # a task at work is never idle; one waiting for an answer is
                self._publish(self.machine.end_context(
                    context.id, f"closed after {idle:g} s without use", self.orch.clock.now()))
                self._used.pop(context.id, None)
                try:
                    await session.close()
                except SessionEnded:
                    pass

    def _publish(self, updates: list[Update]) -> None:
        if updates:
            self._changed.set()
            self._changed = trio.Event()

    async def wait_changed(self) -> None:
        await self._changed.wait()

    async def follow(self, task: Task, start: int, *, include_raw: bool,
                     ping: float) -> AsyncIterator[list[Update]]:
        """The task's updates from number ``start`` on, in batches, until a final one.

        An empty batch every ``ping`` seconds of silence lets the caller keep its
        connection alive; the server's shutdown ends the iteration.
        """
        index = start
        while True:
            updates = task.updates
            if index < len(updates):
                batch = updates[index:]
                index = len(updates)
                final = any(u.final for u in batch)
                if not include_raw:
                    batch = [u for u in batch if not u.raw]
                if batch:
                    yield batch
                if final:
                    return
                continue
            if self.closing.is_set():
                return
            with trio.move_on_after(ping):
                await self._wait_or_close()
                continue
            yield []

    async def _wait_or_close(self) -> None:
        changed = self._changed
        if self.closing.is_set():
            return
        async with trio.open_nursery() as nursery:
            async def on_close() -> None:
                await self.closing.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(on_close)
            await changed.wait()
            nursery.cancel_scope.cancel()

    async def wait_settled(self, task: Task, start: int) -> None:
        """Until an update from number ``start`` on ends the turn (a blocking send's answer)."""
        async for _ in self.follow(task, start, include_raw=False, ping=3600.0):
            pass
