"""Helpers for the PTY driver tests: manifests for real REPLs, and a connection driven directly.

:class:`Driven` opens the real :class:`PtyConnector` with an inbox of its own
(no session actor), so a test sees exactly what the binding delivers: the
batches of events, ``TurnEnded`` and ``AgentGone``, in order.  Every wait is
for a condition on what arrived, with a generous bound.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from trio_cap.actors.bindings.base import AgentBatch, AgentGone, TurnEnded
from trio_cap.actors.bindings.pty.connector import PtyConnection, PtyConnector
from trio_cap.actors.connection import AgentSpec
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.manifest.model import Manifest
from trio_cap.actors.manifest.validate import validate_data
from trio_cap.events.kinds import ContentBlock, SessionConfig, TextChunk, UserInputInject

WAIT = 60.0
"""Seconds any single wait may take (CI is a loaded 2-core box)."""

PS1 = "tcap$ "


def manifest(name: str, command: list[str], *, ready: str, idle: list[str],
             cancel: str = "graceful", paste: bool = False, init_timeout: float = 20,
             queued: bool = False, parse: dict[str, Any] | None = None,
             pty: dict[str, Any] | None = None) -> Manifest:
    raw = {
        "agent": {"name": name, "binary": command[0], "profiles": []},
        "startup": {"command": command, "ready_when": {"pattern": ready},
                    "init_timeout_seconds": init_timeout},
        "pty": {"cols": 100, "rows": 30, "bracketed_paste": paste,
                "sigint_cancels_turn": cancel, "queued_input_supported": queued, **(pty or {})},
        "parse": {"idle": idle, **(parse or {})},
        "capabilities": {"streaming_output": True, "mid_turn_cancel": cancel,
                         "queued_input": queued},
    }
    return validate_data(raw, f"test manifest {name}")


def bash(**kw: Any) -> Manifest:
    """``bash --norc -i`` with the known prompt ``tcap$`` (PS1 from the environment)."""
    return manifest("bash", ["bash", "--norc", "--noprofile", "-i"], ready=r"^tcap\$\s*$",
                    idle=[r"^tcap\$\s*$"], **kw)


def python(**kw: Any) -> Manifest:
    return manifest("python", ["python3", "-i", "-q"], ready=r"^>>>\s*$", idle=[r"^>>>\s*$"],
                    **kw)


def inject(text: str) -> UserInputInject:
    return UserInputInject(content=(ContentBlock(text=text),))


class Driven:
    """What one PTY connection delivered, and ways to wait on it."""

    def __init__(self, conn: PtyConnection, inbox: trio.MemoryReceiveChannel[Any]) -> None:
        self.conn = conn
        self.inbox = inbox
        self.items: list[Any] = []
        self._changed = trio.Event()

    async def pump(self) -> None:
        async for item in self.inbox:
            self.items.append(item)
            self._changed.set()
            self._changed = trio.Event()

    @property
    def events(self) -> list[Any]:
        out: list[Any] = []
        for item in self.items:
            if isinstance(item, AgentBatch):
                out.extend(item.events)
        return out

    def drain(self) -> None:
        while True:
            try:
                self.items.append(self.inbox.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel):
                return

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def turn_ends(self) -> list[TurnEnded]:
        return [i for i in self.items if isinstance(i, TurnEnded)]

    @property
    def gone(self) -> list[AgentGone]:
        return [i for i in self.items if isinstance(i, AgentGone)]

    async def until(self, cond: Callable[[], Any], what: str, seconds: float = WAIT) -> Any:
        with trio.move_on_after(seconds):
            while not (result := cond()):
                await self._changed.wait()
            return result
        raise AssertionError(f"timed out after {seconds} s waiting for {what}; got "
                             f"{self.items!r}"[:4000])

    def text_since(self, start: int) -> str:
        """Text of the turns' chunks delivered after item ``start``."""
        out = []
        for item in self.items[start:]:
            if isinstance(item, AgentBatch):
                out += [e.text for e in item.events if isinstance(e, TextChunk)]
        return "".join(out)

    async def start(self, text: str, marker: str) -> int:
        """Send a prompt and wait until its output shows ``marker``; the item it began at."""
        start = len(self.items)
        await self.conn.send([inject(text)])
        await self.until(lambda: marker in self.text_since(start), f"{marker!r} in the output")
        return start

    async def cancel_turn(self) -> TurnEnded:
        """Cancel the running turn and wait for its end."""
        ends = len(self.turn_ends)
        await self.conn.cancel("current_turn")
        await self.until(lambda: len(self.turn_ends) > ends, "the cancelled turn to end")
        return self.turn_ends[ends]

    async def turn(self, text: str, seconds: float = WAIT) -> tuple[str, TurnEnded]:
        """Send a prompt and wait for its turn end: (the turn's text, the end)."""
        start, ends = len(self.items), len(self.turn_ends)
        await self.conn.send([inject(text)])
        await self.until(lambda: len(self.turn_ends) > ends, f"the end of turn {text!r}",
                         seconds)
        return self.text_since(start), self.turn_ends[ends]


@asynccontextmanager
async def driven(m: Manifest, tmp_path: Path, *, env: dict[str, str] | None = None,
                 options: dict[str, Any] | None = None,
                 connector: PtyConnector | None = None) -> AsyncIterator[Driven]:
    send, receive = trio.open_memory_channel[Any](math.inf)
    spec = AgentSpec(name=m.agent.name, binding="pty",
                     config=SessionConfig(cwd=str(tmp_path)), argv=m.startup.command,
                     options={"manifest": m, **(options or {})}, ids=SequentialIds())
    connector = connector or PtyConnector(env={"PS1": PS1, **(env or {})}, grace=2.0)
    async with connector.open(spec, send) as conn:
        d = Driven(conn, receive)
        d.drain()  # what open delivered (the ready event) is there before the body runs
        async with trio.open_nursery() as nursery:
            nursery.start_soon(d.pump)
            yield d
            nursery.cancel_scope.cancel()
    d.drain()  # and what came while the connection closed
