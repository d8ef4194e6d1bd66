"""The Trio shell of the ACP agent side: stdio, the event log, and one core per session.

Everything that changes the machine goes through one inbox and one pump task
— stdin chunks, each core's event batches, the tool hosts' reverse requests
and reports — so the machine is only touched by that task, the log has one
appender, and stdout gets one write per inbox message.  stdin is read by its
own task, because cancels and permission answers arrive while cores work.

A session's core is trio-cap's scripted brain (:class:`~actors.agent.core.AgentCore`)
with an :class:`~.agent_host.AcpToolHost`, so its files and commands go
through the client when the client offers them; or, with ``make_core``, what
the CLI passes (the bridge brain for ``--bridge AGENT``: the driven agent
uses its own tools).  The shell sits below the orchestrator and never imports
what drives it.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import trio

from trio_cap.actors.agent.brain import ScriptedBrain
from trio_cap.actors.agent.core import AgentCore, CoreEnded, Emitted
from trio_cap.actors.agent.script import Script
from trio_cap.actors.bindings.acp.agent_effects import (
    ClientError,
    Deliver,
    Effect,
    Finish,
    Note,
    ReadHistory,
    Record,
    Resolve,
    Send,
    StartCore,
    StopCore,
)
from trio_cap.actors.bindings.acp.agent_host import AcpToolHost
from trio_cap.actors.bindings.acp.agent_side import AcpAgentSide, AgentSettings
from trio_cap.actors.bindings.base import TurnEnded
from trio_cap.actors.bindings.stream_json.agent_shell import (
    CoreFactory,
    end_on_signals,
    read_into,
)
from trio_cap.actors.bindings.stream_json.agent_shell import _Pipe as Pipe
from trio_cap.events.kinds import Cancel, Event
from trio_cap.events.log.base import EventLog

CONNECTION_STREAM = "cap-agent.acp"
"""The log stream of what belongs to the connection, not a session (bad input lines)."""
CLOSE_GRACE = 5.0


@attrs.define
class _Core:
    frames: trio.MemorySendChannel[Event]
    done: trio.Event = attrs.field(factory=trio.Event)


class _Reports:
    """A tool host's reports, queued behind the core's own events (same inbox, in order)."""

    def __init__(self, shell: AcpAgentShell, session_id: str) -> None:
        self._shell = shell
        self._session_id = session_id

    async def file_changed(self, path: str, old: str | None, new: str) -> None:
        await self._shell._inbox_send.send(("file", (self._session_id, path, old, new)))

    async def terminal_started(self, terminal_id: str) -> None:
        await self._shell._inbox_send.send(("terminal", (self._session_id, terminal_id)))


class AcpAgentShell:
    def __init__(self, settings: AgentSettings, log: EventLog, *, script: Script | None = None,
                 make_core: CoreFactory | None = None, stdin_fd: int = 0, stdout_fd: int = 1,
                 new_session_id: Callable[[], str] | None = None,
                 notes: Callable[[str], None] | None = None) -> None:
        self.log = log
        self.script = script or Script()
        self.machine = AcpAgentSide(settings, new_session_id=new_session_id
                                    or (lambda: str(uuid.uuid4())))
        self._make_core = make_core
        self._stdin_fd = stdin_fd
        self._stdout_fd = stdout_fd
        self._note = notes or (lambda text: print(f"cap-agent: {text}", file=sys.stderr))
        self._out = bytearray()
        self._exit: int | None = None
        self._inbox_send, self._inbox = trio.open_memory_channel[tuple[str, Any]](16)
        self._cores: dict[str, _Core] = {}
        self._waiters: dict[int, tuple[trio.Event, list[Any]]] = {}
        self._tickets = 0
        self._nursery: trio.Nursery | None = None

    # ---- cores ----------------------------------------------------------------------
    def _start_core(self, effect: StartCore) -> None:
        sid = effect.session_id
        send, receive = trio.open_memory_channel[Event](64)

        async def emit(batch: Sequence[Emitted]) -> None:
            await self._inbox_send.send(("core", (sid, list(batch))))

        if self._make_core is not None:
            core = self._make_core(emit, sid)
        else:
            host = AcpToolHost(sid, effect.client, lambda m, p: self._client_call(sid, m, p),
                               _Reports(self, sid))
            core = AgentCore(ScriptedBrain(self.script), emit, session_id=sid, tool_host=host)
        entry = self._cores[sid] = _Core(send)
        send.send_nowait(effect.config)
        assert self._nursery is not None
        self._nursery.start_soon(self._run_core, sid, core, receive, entry)

    async def _run_core(self, sid: str, core: Any, frames: trio.MemoryReceiveChannel[Event],
                        entry: _Core) -> None:
        try:
            await core.run(frames)
        except CoreEnded as exc:  # a bridged agent that died: its turn fails
            await self._inbox_send.send(("core_failed", (sid, str(exc))))
        except Exception as exc:  # a crashed brain fails its session, not the process
            await self._inbox_send.send(("core_failed", (sid, f"the brain crashed: {exc!r}")))
        finally:
            entry.done.set()

    async def _stop_core(self, sid: str) -> None:
        entry = self._cores.pop(sid, None)
        if entry is None:
            return
        try:
            entry.frames.send_nowait(Cancel(scope="session", reason="closed"))
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        await entry.frames.aclose()

    # ---- the tool hosts' reverse requests ------------------------------------------------
    async def _client_call(self, sid: str, method: str, params: Any) -> Any:
        self._tickets += 1
        ticket = self._tickets
        event, box = trio.Event(), []
        self._waiters[ticket] = (event, box)
        try:
            await self._inbox_send.send(("call", (ticket, sid, method, params)))
            await event.wait()
        finally:
            self._waiters.pop(ticket, None)
        return box[0] if box else ClientError(-32603, "no answer")

    def _set_exit(self, code: int) -> None:
        self._exit = code

    # ---- effects ---------------------------------------------------------------------
    async def _apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            match effect:
                case Send():
                    self._out += effect.data
                case Record():
                    await self.log.append(effect.events,
                                          stream=effect.stream or CONNECTION_STREAM)
                case Deliver():
                    entry = self._cores.get(effect.session_id)
                    if entry is not None:
                        for frame in effect.frames:
                            await entry.frames.send(frame)
                case StartCore():
                    self._start_core(effect)
                case StopCore():
                    await self._stop_core(effect.session_id)
                case ReadHistory():
                    envs = self.log.read(1, effect.session_id)
                    await self._apply(self.machine.history(effect.request_id, envs))
                case Resolve():
                    waiter = self._waiters.get(effect.ticket)
                    if waiter is not None:
                        waiter[1].append(effect.value)
                        waiter[0].set()
                case Finish():
                    self._exit = effect.exit_code
                case Note():
                    self._note(effect.text)

    async def _core_batch(self, sid: str, items: list[Emitted]) -> None:
        events: list[Event] = []
        for item in items:
            if isinstance(item, TurnEnded):
                await self._core_events(sid, events)
                events = []
                await self._apply(self.machine.turn_ended(sid, item.stop_reason))
            else:
                events.append(item)
        await self._core_events(sid, events)

    async def _core_events(self, sid: str, events: list[Event]) -> None:
        if events:
            await self.log.append(events, stream=sid)
            await self._apply(self.machine.core_events(sid, events))

    async def _dispatch(self, kind: str, payload: Any) -> None:
        m = self.machine
        if kind == "data":
            await self._apply(m.receive_data(payload))
        elif kind == "eof":
            await self._apply(m.receive_eof())
        elif kind == "core":
            await self._core_batch(*payload)
        elif kind == "call":
            await self._apply(m.client_call(*payload))
        elif kind == "file":
            await self._apply(m.file_changed(*payload))
        elif kind == "terminal":
            await self._apply(m.terminal_started(*payload))
        elif kind == "core_failed":
            await self._apply(m.core_failed(*payload))

    # ---- the pump --------------------------------------------------------------------
    async def run(self) -> int:
        """Serve until stdin ends (0) or a signal (128 + its number); the exit code."""
        stdout = Pipe(self._stdout_fd)
        stdin = Pipe(self._stdin_fd)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(end_on_signals, "closing the sessions and the log",
                                   self._note, self._set_exit, nursery.cancel_scope)
                nursery.start_soon(read_into, stdin, self._inbox_send)
                while self._exit is None:
                    kind, payload = await self._inbox.receive()
                    await self._dispatch(kind, payload)
                    await self._flush(stdout)
                await self._close_cores(nursery)
                nursery.cancel_scope.cancel()
        except trio.BrokenResourceError:
            self._note("stdout closed by the client")
            self._exit = 1
        finally:
            with trio.CancelScope(shield=True):
                await stdout.aclose()
                await stdin.aclose()
        return self._exit if self._exit is not None else 1

    async def _flush(self, stdout: Pipe) -> None:
        if self._out:
            data, self._out = bytes(self._out), bytearray()
            await stdout.send_all(data)

    async def _close_cores(self, nursery: trio.Nursery) -> None:
        """Every core gets its session cancel and a grace period to end (a bridge closes the
        agent it drives); the inbox keeps draining meanwhile, so no core blocks on emit."""
        entries = list(self._cores.values())
        for sid in list(self._cores):
            await self._stop_core(sid)
        nursery.start_soon(self._drain)
        with trio.move_on_after(CLOSE_GRACE):
            for entry in entries:
                await entry.done.wait()

    async def _drain(self) -> None:
        async for kind, payload in self._inbox:
            if kind == "call":  # a tool host still asking: nothing will answer now
                await self._apply([Resolve(payload[0], ClientError(-32800, "agent closing"))])


async def serve(settings: AgentSettings, log: EventLog, *, script: Script | None = None,
                make_core: CoreFactory | None = None) -> int:
    """Speak ACP as an agent on this process's stdio until stdin ends; the exit code."""
    async with log:
        shell = AcpAgentShell(settings, log, script=script, make_core=make_core)
        return await shell.run()
