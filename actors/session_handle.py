"""The owner's handle on one session: method calls in, the log's answer out.

Split from the orchestrator because it is what an embedding app holds, and its
waiting rules (every wait also watches the actor's end) are its own: a caller
never waits for something an ended session can no longer do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from trio_cap.actors.bindings.base import UPDATED_INPUT
from trio_cap.actors.runtime import ActorNotFound, ActorRef
from trio_cap.actors.session.actor import (
    Accepted,
    CloseSession,
    Command,
    SessionEnded,
    request,
)
from trio_cap.events.kinds import (
    AskAnswered,
    CancelRequested,
    CancelScope,
    CapError,
    Decision,
    InputInjected,
    PermissionDecided,
    SessionTurnEnded,
    StopReason,
    TextChunk,
)
from trio_cap.events.projections import State
from trio_cap.events.projections.sessions import TERMINAL_STATUSES, SessionView

if TYPE_CHECKING:
    from trio_cap.actors.orchestrator import Orchestrator


async def acquire_slot(limiter: trio.CapacityLimiter, token: object) -> None:
    """Take a slot, passing through the scheduler only when none is free: an uncontended
    take changes no task's order, so a deterministic run stays byte-identical."""
    try:
        limiter.acquire_on_behalf_of_nowait(token)
    except trio.WouldBlock:
        await limiter.acquire_on_behalf_of(token)


@asynccontextmanager
async def occupy(limiter: trio.CapacityLimiter) -> AsyncIterator[None]:
    token = object()
    await acquire_slot(limiter, token)
    try:
        yield
    finally:
        limiter.release_on_behalf_of(token)


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


def _verb(event: Any) -> str:
    """What a command was trying to do, for the SessionEnded message."""
    return {
        InputInjected: "accept input",
        CancelRequested: "cancel",
        PermissionDecided: "take a permission decision",
        AskAnswered: "take an answer",
    }.get(type(event), "take the command")

