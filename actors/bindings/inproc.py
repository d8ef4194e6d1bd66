"""The ``inproc`` binding: trio-cap's scripted brain inside the orchestrator's process.

No subprocess and no encoding: frames are the event structs themselves.  It is
the fast path for tests and the large benchmarks, and the reference every wire
binding is compared with.  The brain runs in the connection's own nursery; if
it ends on its own (or crashes) the session hears :class:`AgentGone`, the
same as when a real agent process dies.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio
from trio.lowlevel import RunVar

from trio_cap.actors.agent.brain import ScriptedBrain
from trio_cap.actors.agent.core import AgentCore, Emitted
from trio_cap.actors.agent.script import Script
from trio_cap.actors.bindings.base import AgentBatch, AgentGone, TurnEnded
from trio_cap.actors.bindings.deliver import Deliverer
from trio_cap.actors.bindings.process import open_task_group
from trio_cap.actors.connection import AgentSpec
from trio_cap.actors.recording import Recorder
from trio_cap.events.kinds import Cancel, CancelScope, Event


class InprocConnection:
    def __init__(self, frames: trio.MemorySendChannel[Event]) -> None:
        self._frames = frames

    async def send(self, frames: Sequence[Event]) -> None:
        for frame in frames:
            await self._frames.send(frame)

    async def cancel(self, scope: CancelScope) -> None:
        await self._frames.send(Cancel(scope=scope))


TURNS_AT_ONCE = 32
"""How many in-process turns compute at once (per Trio run); the others wait their turn.
The brain is CPU in the orchestrator's own process: letting every session compute in every
scheduler round only makes each round, and so each event's way to a subscriber, longer
(1,000 concurrent turns: append → subscriber p99 237 ms unbounded).  Waits (replies,
commands, ``wait`` steps) hold no slot."""

_TURN_SLOTS: RunVar[trio.CapacityLimiter] = RunVar("inproc_turn_slots")


def turn_slots() -> trio.CapacityLimiter:
    """This Trio run's shared limiter of in-process turns."""
    try:
        return _TURN_SLOTS.get()
    except LookupError:
        slots = trio.CapacityLimiter(TURNS_AT_ONCE)
        _TURN_SLOTS.set(slots)
        return slots


CoreFactory = Callable[[Callable[[Sequence[Emitted]], Awaitable[None]], str], Any]
"""``make_core(emit, session_id)``: a core other than the scripted brain (the fleet face)."""


class InprocConnector:
    """``make_core`` puts another core where the scripted brain sits (``cap serve a2a
    --fleet`` registers one under the binding name ``fleet``); it gets the same frames and
    its end is the agent's end, as the brain's is."""

    binding = "inproc"
    make_core: CoreFactory | None = None  # class defaults: subclasses need not call __init__

    def __init__(self, make_core: CoreFactory | None = None, binding: str = "inproc") -> None:
        self.make_core = make_core
        self.binding = binding

    @asynccontextmanager
    async def open(
        self, spec: AgentSpec, deliver: trio.MemorySendChannel[Any]
    ) -> AsyncIterator[InprocConnection]:
        script: Script | None = spec.options.get("script")
        frames_send, frames_receive = trio.open_memory_channel[Event](64)

        recorder: Recorder | None = spec.options.get("recorder")
        emit: Callable[[Sequence[Emitted]], Awaitable[None]] = Deliverer(deliver)
        if recorder is not None:
            emit = _recording(emit, recorder)
        agent_session_id = spec.options.get("agent_session_id", "cap-agent")
        core = (AgentCore(ScriptedBrain(script), emit, session_id=agent_session_id,
                          turn_slots=turn_slots()) if self.make_core is None
                else self.make_core(emit, agent_session_id))

        async def serve() -> None:
            reason = "the agent ended the session"
            try:
                await core.run(frames_receive)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return  # the session actor is gone; nobody to tell
            except Exception as exc:  # a crashed brain is a dead agent, not a crashed orchestrator
                reason = f"the in-process agent crashed: {exc!r}"
            try:
                if recorder is not None:  # the agent's end is an input a replay must see
                    await deliver.send(AgentBatch([recorder.gone(reason, None)]))
                await deliver.send(AgentGone(reason))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

        try:
            async with open_task_group() as nursery:
                nursery.start_soon(serve)
                try:
                    yield InprocConnection(frames_send)
                finally:
                    frames_send.close()
        finally:
            deliver.close()  # sync: a checkpoint here could replace the caller's error


def _recording(emit: Callable[[Sequence[Emitted]], Awaitable[None]],
               recorder: Recorder) -> Callable[[Sequence[Emitted]], Awaitable[None]]:
    """In process the frames are the events themselves (already logged); what has no event
    of its own is a turn's end, so a frame.in marks each one for replay."""
    async def recorded(outputs: Sequence[Emitted]) -> None:
        if any(type(o) is TurnEnded for o in outputs):
            marked: list[Emitted] = []
            for o in outputs:
                if type(o) is TurnEnded:
                    marked.append(recorder.turn_ended(o.stop_reason))
                marked.append(o)
            outputs = marked
        await emit(outputs)
    return recorded
