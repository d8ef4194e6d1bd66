"""A third-party binding, as a newcomer would write one with the kit: ``x-lines``.

The wire: each prompt is one line on the agent's stdin; the agent answers
with ``TEXT <words>`` lines and ends the turn with ``END``.  It is not part
of trio-cap: tests/kit/test_registry.py installs it as its own distribution
(a ``*.dist-info`` with an ``entry_points.txt`` on ``sys.path``) and runs a
session on it, so this file only uses trio-cap's public kit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from trio_cap.actors.bindings.base import AgentGone, Output, ToAgent, TurnEnded
from trio_cap.actors.bindings.deliver import Deliverer
from trio_cap.actors.bindings.process import AgentProcess, open_task_group, spawn_agent
from trio_cap.actors.connection import AgentSpec
from trio_cap.events.kinds import (
    CancelScope,
    CapSessionReady,
    Event,
    SessionConfig,
    TextChunk,
    UserInputInject,
)

BINDING = "x-lines"


class LinesMachine:
    """The sans-io machine: prompt → one line out; ``TEXT``/``END`` lines → events."""

    def __init__(self) -> None:
        self._buffer = b""
        self._turn = 0

    def send(self, frames: Sequence[Event]) -> list[Output]:
        out: list[Output] = []
        for frame in frames:
            if isinstance(frame, SessionConfig):
                out.append(CapSessionReady(session_id="lines"))
            elif isinstance(frame, UserInputInject):
                self._turn += 1
                out.append(ToAgent(frame.text.replace("\n", " ").encode() + b"\n"))
        return out

    def receive_data(self, data: bytes) -> list[Output]:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        out: list[Output] = []
        for line in lines:
            text = line.decode("utf-8", errors="replace")
            if text == "END":
                out.append(TurnEnded())
            elif text.startswith("TEXT "):
                out.append(TextChunk(message_id=f"m{self._turn}", text=text[5:]))
        return out


class LinesConnection:
    def __init__(self, agent: AgentProcess, deliver: Deliverer) -> None:
        self.agent = agent
        self.machine = LinesMachine()
        self.out = deliver

    async def send(self, frames: Sequence[Event]) -> None:
        await self.out(self.machine.send(frames))

    async def cancel(self, scope: CancelScope) -> None:
        await self.agent.close_stdin()

    async def read(self, inbox: trio.MemorySendChannel[Any]) -> None:
        async def feed(data: bytes) -> None:
            await self.out(self.machine.receive_data(data))

        await self.agent.pump_stdout(feed)
        await self.agent.wait_exit()
        await inbox.send(AgentGone(self.agent.describe_exit(), self.agent.returncode))


class LinesConnector:
    binding = BINDING

    @asynccontextmanager
    async def open(self, spec: AgentSpec,
                   deliver: trio.MemorySendChannel[Any]) -> AsyncIterator[LinesConnection]:
        try:
            async with spawn_agent(spec.argv, cwd=spec.config.cwd, env=None, binding=BINDING,
                                   grace=1.0) as agent:
                conn = LinesConnection(agent, Deliverer(deliver, write=agent.write))
                async with open_task_group() as tasks:
                    tasks.start_soon(agent.pump_stderr, conn.out.events)
                    tasks.start_soon(conn.read, deliver)
                    yield conn
        finally:
            deliver.close()
