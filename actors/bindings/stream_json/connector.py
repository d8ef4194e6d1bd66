"""The stream-json binding's Trio shell: spawn, pump bytes through the driver, reap.

Everything protocol-shaped happens in :class:`StreamJsonDriver`; this module
owns the process.  The agent runs in its own process group (its tools spawn
children that must die with it) with ``cwd`` = the session's directory.
stdout is read in large chunks and every chunk's events go to the session
as one batch; stderr is logged as ``agent.raw`` events up to a budget, and
its tail explains a crash.  Closing is graceful first — stdin closed, the
agent finishes and exits — then SIGTERM and SIGKILL to the group, and the
child is always reaped, also when the caller is cancelled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from trio_cap.actors.bindings.base import AgentBatch, AgentGone, TurnEnded
from trio_cap.actors.bindings.stream_json.driver import (
    DriverState,
    Output,
    StreamJsonDriver,
    ToAgent,
)
from trio_cap.actors.bindings.stream_json.driver_argv import driver_argv
from trio_cap.actors.bindings.stream_json.driver_blocks import BINDING
from trio_cap.actors.connection import AgentSpec, ConnectError
from trio_cap.actors.peers.process import kill_process_group
from trio_cap.events.kinds import AgentRaw, Cancel, CancelScope, Event

STDERR_BUDGET = 64 * 1024
"""stderr bytes kept in the log per session; the rest is counted."""
_READ_SIZE = 256 * 1024


class StreamJsonConnection:
    def __init__(self, proc: trio.Process, driver: StreamJsonDriver,
                 deliver: trio.MemorySendChannel[Any], grace: float) -> None:
        self.proc = proc
        self.driver = driver
        self.deliver = deliver
        self.grace = grace
        self.settled = trio.Event()
        """Set when the handshake succeeded or failed, or the agent went away."""
        self.gone_reason: str | None = None
        self._write_lock = trio.Lock()
        self._closing = False
        self._stderr_done = trio.Event()
        self._stderr_tail = b""

    # ---- Connection -------------------------------------------------------
    async def send(self, frames: Sequence[Event]) -> None:
        data = b"".join(self.driver.send(frame) for frame in frames)
        await self._write(data)

    async def cancel(self, scope: CancelScope) -> None:
        if scope == "session":
            await self._close_stdin()  # the agent finishes queued work and exits
            return
        await self._write(self.driver.send(Cancel(scope="current_turn")))

    # ---- plumbing ---------------------------------------------------------
    async def _write(self, data: bytes) -> None:
        if not data or self.proc.stdin is None:
            return
        async with self._write_lock:
            try:
                await self.proc.stdin.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the agent is gone; the stdout reader reports it

    async def _close_stdin(self) -> None:
        if self.proc.stdin is not None:
            async with self._write_lock:
                try:
                    await self.proc.stdin.aclose()
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass

    async def _dispatch(self, outputs: list[Output]) -> None:
        events: list[Event] = []
        for item in outputs:
            if isinstance(item, TurnEnded):
                if events:
                    await self.deliver.send(AgentBatch(events))
                    events = []
                await self.deliver.send(item)
            elif isinstance(item, ToAgent):
                await self._write(item.data)
            else:
                events.append(item)
        if events:
            await self.deliver.send(AgentBatch(events))
        if self.driver.state in (DriverState.READY, DriverState.FAILED):
            self.settled.set()

    async def read_stdout(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            while data := await stdout.receive_some(_READ_SIZE):
                await self._dispatch(self.driver.receive_data(data))
            await self._dispatch(self.driver.receive_eof())
            with trio.move_on_after(self.grace):
                await self._stderr_done.wait()
                await self.proc.wait()
            self.gone_reason = self._describe_exit()
            self.settled.set()
            if not self._closing:
                await self.deliver.send(AgentGone(self.gone_reason, self.proc.returncode))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.settled.set()  # the session stopped listening; shutdown follows

    async def read_stderr(self) -> None:
        stderr = self.proc.stderr
        assert stderr is not None
        kept = dropped = 0
        try:
            while data := await stderr.receive_some(_READ_SIZE):
                self._stderr_tail = (self._stderr_tail + data)[-2048:]
                room = STDERR_BUDGET - kept
                if room <= 0:
                    dropped += len(data)
                    continue
                piece = data[:room]
                kept += len(piece)
                dropped += len(data) - len(piece)
                await self.deliver.send(AgentBatch([AgentRaw(
                    binding=BINDING, reason="stderr", source="stderr",
                    text=piece.decode("utf-8", errors="replace"))]))
            if dropped:
                await self.deliver.send(AgentBatch([AgentRaw(
                    binding=BINDING, reason="stderr_truncated", source="stderr",
                    text=f"{dropped} more bytes of stderr were not kept", truncated=dropped)]))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self._stderr_done.set()

    def _describe_exit(self) -> str:
        code = self.proc.returncode
        if code is None:
            what = "the agent closed its output but did not exit"
        elif code < 0:
            what = f"the agent was killed by {signal.Signals(-code).name}"
        else:
            what = f"the agent exited with code {code}"
        tail = self._stderr_tail.decode("utf-8", errors="replace").strip()
        return f"{what}; stderr: {tail[-500:]}" if tail else what

    async def shutdown(self) -> None:
        """Close stdin, give the agent ``grace`` seconds to exit, then end its group."""
        self._closing = True
        with trio.CancelScope(shield=True):
            await self._close_stdin()
            with trio.move_on_after(self.grace):
                await self.proc.wait()
            await kill_process_group(self.proc, self.grace)
            self.driver.close()


class StreamJsonConnector:
    """Drives any agent that speaks Claude Code's stream-json (``binding = "stream-json"``).

    ``env`` is added to the inherited environment (an isolated peer's HOME and
    model URL, for instance); ``grace`` is the time the agent gets to exit
    after stdin closes, and again after SIGTERM.
    """

    binding = BINDING

    def __init__(self, *, env: Mapping[str, str] | None = None, inherit_env: bool = True,
                 grace: float = 5.0, init_timeout: float | None = None) -> None:
        self.env = dict(env or {})
        self.inherit_env = inherit_env
        self.grace = grace
        self.init_timeout = init_timeout

    def _env(self, spec: AgentSpec) -> dict[str, str]:
        env = dict(os.environ) if self.inherit_env else {}
        env.update(self.env)
        env.update(spec.options.get("env") or {})
        env.pop("CLAUDECODE", None)  # as the SDK does: we are not Claude Code's own child
        env["PWD"] = spec.config.cwd
        return env

    def _timeout(self, spec: AgentSpec) -> float:
        if self.init_timeout is not None:
            return self.init_timeout
        manifest = spec.options.get("manifest")
        startup = getattr(manifest, "startup", None)
        return float(getattr(startup, "init_timeout_seconds", 60.0))

    @asynccontextmanager
    async def open(self, spec: AgentSpec,
                   deliver: trio.MemorySendChannel[Any]) -> AsyncIterator[StreamJsonConnection]:
        config = spec.config
        agent_session = config.session_resume_id or str(uuid.uuid4())
        argv = driver_argv(spec.argv, config, agent_session)
        try:
            proc = await trio.lowlevel.open_process(
                list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, cwd=config.cwd, env=self._env(spec),
                start_new_session=True)
        except OSError as exc:
            raise ConnectError(f"cannot start {argv[0]!r}: {exc}") from exc
        driver = StreamJsonDriver(new_uuid=lambda: str(uuid.uuid4()), session_id=agent_session,
                                  cwd=config.cwd)
        conn = StreamJsonConnection(proc, driver, deliver, self.grace)
        try:
            async with trio.open_nursery() as nursery, deliver:
                nursery.start_soon(conn.read_stderr)
                nursery.start_soon(conn.read_stdout)
                try:
                    await conn._write(driver.initialize())
                    with trio.move_on_after(self._timeout(spec)):
                        await conn.settled.wait()
                    if driver.state is not DriverState.READY:
                        raise ConnectError(self._why_not_ready(conn))
                    yield conn
                finally:
                    await conn.shutdown()
                    nursery.cancel_scope.cancel()
        finally:
            await kill_process_group(proc, self.grace)  # reaped whatever happened above

    def _why_not_ready(self, conn: StreamJsonConnection) -> str:
        driver = conn.driver
        if driver.handshake_error:
            return f"stream-json initialize failed: {driver.handshake_error}"
        if conn.gone_reason:
            return f"stream-json agent ended during the handshake: {conn.gone_reason}"
        return "stream-json agent did not answer initialize in time"
