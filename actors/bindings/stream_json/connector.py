"""The stream-json binding's Trio shell: the kit's process and delivery around the driver.

Everything protocol-shaped happens in :class:`StreamJsonDriver`; the process
rules (own process group, budgeted stderr, stdin EOF → SIGTERM → SIGKILL of
the group on every exit path, always reaped) are :mod:`..process`'s, and the
batching into the session inbox is :mod:`..deliver`'s.  What is left here is
the stream-json handshake and its failure modes, each a one-line
:class:`ConnectError` with the process group already gone:

=============================  ===================================================
what happens during ``open``   what the caller gets
=============================  ===================================================
the program cannot start       ``cannot start 'x': program not found …``
``initialize`` is refused      ``stream-json initialize failed: …``
the agent exits first          ``stream-json agent ended during the handshake: …``
no answer within N s           ``stream-json agent did not answer initialize within N s``
the caller is cancelled        ``Cancelled`` (the group is killed and reaped first)
an error in the caller's body  that error, unchanged (the group is ended first)
=============================  ===================================================

A handshake failure is raised after the reader nursery is closed, never
inside it (trio would wrap it in an ExceptionGroup; cancelling the nursery
while it propagated once turned it into contextlib's "generator didn't
yield"); the caller's own errors come back through ``open_task_group`` as
themselves.  Ids (the agent session id, prompt uuids) come from the
spec's id source, so deterministic ids give a deterministic run.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from trio_cap.actors.bindings.base import AgentGone
from trio_cap.actors.bindings.deliver import Deliverer
from trio_cap.actors.bindings.process import AgentProcess, open_task_group, spawn_agent
from trio_cap.actors.bindings.stream_json.driver import DriverState, StreamJsonDriver
from trio_cap.actors.bindings.stream_json.driver_argv import driver_argv
from trio_cap.actors.bindings.stream_json.driver_blocks import BINDING
from trio_cap.actors.connection import AgentSpec, ConnectError
from trio_cap.actors.ids import IdSource, RandomIds
from trio_cap.actors.recording import Recorder
from trio_cap.events.kinds import Cancel, CancelScope, Event

_UUIDS = uuid.UUID("6f1c2b0e-2a57-4d43-9c55-7472696f2d63")
"""Namespace for the uuids derived from an id source (Claude Code wants uuids)."""


def uuid_source(ids: IdSource) -> Callable[[], str]:
    """Uuids made from ``ids`` (uuid5), so deterministic ids give the same uuids every run.

    Random ids are not reproducible anyway and carry fewer random bits than a
    uuid4, and a clash of Claude Code's ``--session-id`` would refuse the
    session: with them, plain uuid4s.
    """
    if isinstance(ids, RandomIds):
        return lambda: str(uuid.uuid4())
    return lambda: str(uuid.uuid5(_UUIDS, ids.new("uuid")))


class StreamJsonConnection:
    def __init__(self, agent: AgentProcess, driver: StreamJsonDriver,
                 deliver: trio.MemorySendChannel[Any], recorder: Recorder | None = None) -> None:
        self.agent = agent
        self.proc = agent.proc
        self.driver = driver
        self.deliver = deliver
        self.recorder = recorder
        self.out = Deliverer(deliver, write=agent.write, kill=self._kill, recorder=recorder)
        self.settled = trio.Event()
        """Set when the handshake succeeded or failed, or the agent went away."""
        self.gone_reason: str | None = None
        self._closing = False

    # ---- Connection -------------------------------------------------------
    async def send(self, frames: Sequence[Event]) -> None:
        await self._write(b"".join(self.driver.send(frame) for frame in frames))

    async def _write(self, data: bytes) -> None:
        if self.recorder is not None:
            self.recorder.bytes_out(data)
        await self.agent.write(data)

    async def cancel(self, scope: CancelScope) -> None:
        if scope == "session":
            if self.recorder is not None:
                self.recorder.frame_out({"stdin": "closed"})
            await self.agent.close_stdin()  # the agent finishes queued work and exits
            return
        await self._write(self.driver.send(Cancel(scope="current_turn")))

    # ---- plumbing ---------------------------------------------------------
    async def _kill(self, reason: str) -> None:
        await self.agent.terminate(graceful=False)  # a hard cancel: no stdin-EOF grace

    async def _feed(self, data: bytes) -> None:
        received = self.recorder.bytes_in(data) if self.recorder is not None else None
        await self.out(self.driver.receive_data(data), received)
        if self.driver.state in (DriverState.READY, DriverState.FAILED):
            self.settled.set()

    async def read_stdout(self) -> None:
        try:
            await self.agent.pump_stdout(self._feed)
            rec = self.recorder
            await self.out(self.driver.receive_eof(), rec.eof() if rec is not None else None)
            await self.agent.wait_exit()
            self.gone_reason = self.agent.describe_exit()
            self.settled.set()
            if not self._closing:
                code = self.agent.returncode
                await self.out([AgentGone(self.gone_reason, code)],
                               rec.gone(self.gone_reason, code) if rec is not None else None)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.settled.set()  # the session stopped listening, or we closed: shutdown follows

    async def read_stderr(self) -> None:
        await self.agent.pump_stderr(self.out.events)

    async def handshake(self, seconds: float) -> str | None:
        """Send ``initialize`` and wait for its answer; why it failed, or None."""
        await self._write(self.driver.initialize())
        await self.agent.wait_for(self.settled, seconds)  # or until the agent has exited
        if self.driver.state is DriverState.READY:
            return None
        if self.driver.handshake_error:
            return f"stream-json initialize failed: {self.driver.handshake_error}"
        if self.gone_reason is None and self.agent.returncode is not None:
            self.gone_reason = self.agent.describe_exit()
        if self.gone_reason:
            return f"stream-json agent ended during the handshake: {self.gone_reason}"
        return f"stream-json agent did not answer initialize within {seconds:g} s"

    async def shutdown(self) -> None:
        """Close stdin, give the agent ``grace`` seconds to exit, then end its group."""
        self._closing = True
        await self.agent.terminate()  # shielded
        self.driver.close()


class StreamJsonConnector:
    """Drives any agent that speaks Claude Code's stream-json (``binding = "stream-json"``).

    ``env`` is added to the inherited environment (an isolated peer's HOME and
    model URL, for instance); ``grace`` is the time the agent gets to exit
    after stdin closes, and again after SIGTERM; ``init_timeout`` overrides
    the manifest's ``startup.init_timeout_seconds`` (default 60 s).
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
        recorder: Recorder | None = spec.options.get("recorder")
        new_uuid = uuid_source(spec.ids or RandomIds())
        if recorder is not None:
            new_uuid = recorder.ids(new_uuid)
        agent_session = config.session_resume_id or new_uuid()
        try:
            argv = driver_argv(spec.argv, config, agent_session)
        except ValueError as exc:  # no argv to run: this binding cannot be had
            deliver.close()
            raise ConnectError(f"stream-json: {exc}") from None
        timeout = self._timeout(spec)
        failure: str | None = None
        try:
            async with spawn_agent(argv, cwd=config.cwd, env=self._env(spec), binding=BINDING,
                                   grace=self.grace) as agent:
                driver = StreamJsonDriver(new_uuid=new_uuid, session_id=agent_session,
                                          cwd=config.cwd)
                conn = StreamJsonConnection(agent, driver, deliver, recorder)
                async with open_task_group() as readers:
                    readers.start_soon(conn.read_stderr)
                    readers.start_soon(conn.read_stdout)
                    failure = await conn.handshake(timeout)
                    if failure is None:
                        try:
                            yield conn
                        finally:
                            await conn.shutdown()
                    else:  # no grace for an agent that failed its handshake
                        await agent.terminate(graceful=False)
        finally:
            deliver.close()  # our clone of the inbox; sync, so nothing can replace an error
        if failure is not None:
            raise ConnectError(failure)  # raised out here: a plain error, never a group
