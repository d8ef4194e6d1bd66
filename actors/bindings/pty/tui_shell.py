"""The Trio shell of ``cap agent --cap-speak pty``: the terminal, the brain and the clock.

The terminal is opened again by its name (``/dev/pts/N``) rather than used
through fd 0, so the non-blocking mode Trio needs is set on a file
description of our own and the parent shell's stdin is left as it was; it is
put in raw mode (no echo, no line editing, Ctrl-C as a byte rather than a
signal, since the TUI decides what Ctrl-C means) and restored on every way
out.  Everything that changes the machine goes through one inbox: keys, the
core's event batches, the spinner's tick, SIGWINCH.

The core is the scripted brain, :class:`~actors.agent.core.AgentCore`, the
same as the stream-json and inproc bindings run.
"""

from __future__ import annotations

import fcntl
import os
import signal
import struct
import sys
import termios
import tty
import uuid
from collections.abc import Sequence
from typing import Any

import attrs
import trio

from trio_cap.actors import __version__
from trio_cap.actors.agent.brain import ScriptedBrain
from trio_cap.actors.agent.core import AgentCore, Emitted
from trio_cap.actors.agent.script import Script
from trio_cap.actors.bindings.pty.agent_tui import Deliver, Effect, Paint, Quit, TuiAgent
from trio_cap.events.kinds import Event, PermissionMode, SessionConfig
from trio_cap.events.log.base import EventLog

TICK_SECONDS = 0.1
"""Spinner frame time: fast enough that a settle window never elapses mid-turn."""


@attrs.frozen
class TuiOptions:
    cwd: str
    model: str | None = None
    system_prompt: str | None = None
    max_turns: int | None = None
    permission_mode: PermissionMode = "interactive"
    drop_enters: int = 0


class NotATerminal(Exception):
    """stdin is no terminal: the TUI needs one (run it under a PTY)."""


def _size(fd: int) -> tuple[int, int]:
    rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
    return (cols or 80), (rows or 24)


class TuiShell:
    def __init__(self, options: TuiOptions, log: EventLog, *, script: Script | None = None,
                 stdin_fd: int = 0) -> None:
        if not os.isatty(stdin_fd):
            raise NotATerminal("the pty agent needs a terminal on stdin; run it under a PTY "
                               "(e.g. `cap run --binding pty`), or use --cap-speak stream-json")
        self.options = options
        self.log = log
        self.session_id = str(uuid.uuid4())
        self._tty = os.open(os.ttyname(stdin_fd), os.O_RDWR | os.O_NOCTTY)
        cols, rows = _size(self._tty)
        header = f" ✻ cap-agent v{__version__} · scripted brain · {options.cwd}"
        self.machine = TuiAgent(cols=cols, rows=rows, header=header,
                                drop_enters=options.drop_enters)
        self.script = script or Script()
        self._frames_send, self._frames_recv = trio.open_memory_channel[Event](64)
        self._inbox_send, self._inbox = trio.open_memory_channel[tuple[str, Any]](64)
        self.core = AgentCore(ScriptedBrain(self.script), self._emit, session_id=self.session_id)
        self._out = bytearray()
        self._done = False

    async def _emit(self, batch: Sequence[Emitted]) -> None:
        await self._inbox_send.send(("core", list(batch)))

    async def _run_core(self) -> None:
        try:
            await self.core.run(self._frames_recv)
        except Exception as exc:  # a crashed brain ends the session, not the terminal state
            await self._inbox_send.send(("crashed", repr(exc)))
            return
        await self._inbox_send.send(("core_ended", None))

    async def _read(self, stream: trio.lowlevel.FdStream) -> None:
        while True:
            try:
                data = await stream.receive_some(4096)
            except (OSError, trio.ClosedResourceError, trio.BrokenResourceError):
                data = b""
            await self._inbox_send.send(("keys", data))
            if not data:
                return

    async def _tick(self) -> None:
        while True:
            await trio.sleep(TICK_SECONDS)
            await self._inbox_send.send(("tick", None))

    async def _signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGWINCH, signal.SIGTERM, signal.SIGHUP) as sigs:
            async for signum in sigs:
                await self._inbox_send.send(("signal", signum))

    async def _apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Paint):
                self._out += effect.data
            elif isinstance(effect, Deliver):
                await self._frames_send.send(effect.frame)
            elif isinstance(effect, Quit):
                self._done = True

    async def _log(self, items: list[Emitted]) -> None:
        events = [item for item in items if isinstance(item, Event)]
        if events:
            await self.log.append(events, stream=self.session_id)

    async def run(self) -> int:
        saved = termios.tcgetattr(self._tty)
        stream = trio.lowlevel.FdStream(self._tty)
        exit_code = 0
        try:
            tty.setraw(self._tty, termios.TCSANOW)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._run_core)
                nursery.start_soon(self._signals)
                nursery.start_soon(self._tick)
                await self._apply(self.machine.start(trio.current_time()))
                await self._frames_send.send(SessionConfig(
                    cwd=self.options.cwd, model=self.options.model or self.script.model,
                    system_prompt=self.options.system_prompt,
                    max_turns=self.options.max_turns,
                    permission_mode=self.options.permission_mode))
                await self._flush(stream)
                nursery.start_soon(self._read, stream)
                while not self._done:
                    kind, payload = await self._inbox.receive()
                    exit_code = await self._dispatch(kind, payload)
                    await self._flush(stream)
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                try:
                    self._out += b"".join(e.data for e in self.machine.leave()
                                          if isinstance(e, Paint))
                    await self._flush(stream)
                except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
                    pass
                try:
                    termios.tcsetattr(self._tty, termios.TCSADRAIN, saved)
                except termios.error:
                    pass
                await stream.aclose()
        return exit_code

    async def _dispatch(self, kind: str, payload: Any) -> int:
        now = trio.current_time()
        if kind == "keys":
            if not payload:  # the terminal hung up
                self._done = True
                return 0
            await self._apply(self.machine.keys(payload, now))
        elif kind == "core":
            await self._log(payload)
            await self._apply(self.machine.core(payload, now))
        elif kind == "tick":
            await self._apply(self.machine.quiet(now) + self.machine.tick(now))
        elif kind == "signal":
            if payload == signal.SIGWINCH:
                await self._apply(self.machine.resize(*_size(self._tty)))
            else:
                self._done = True
                return 128 + payload
        elif kind == "core_ended":
            self._done = True
        elif kind == "crashed":
            print(f"cap-agent: the scripted brain crashed: {payload}", file=sys.stderr)
            self._done = True
            return 1
        return 0

    async def _flush(self, stream: trio.lowlevel.FdStream) -> None:
        if self._out:
            data, self._out = bytes(self._out), bytearray()
            await stream.send_all(data)


async def serve_tui(options: TuiOptions, log: EventLog, *, script: Script | None = None) -> int:
    """Be the TUI agent on this process's terminal until Ctrl-D or hang-up; the exit code."""
    async with log:
        shell = TuiShell(options, log, script=script)
        return await shell.run()
