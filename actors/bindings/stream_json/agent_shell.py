"""The Trio shell of the stream-json agent side: stdin, stdout, the event log and the core.

Everything that changes the machine goes through one inbox and one pump task —
stdin chunks, the core's event batches, timer ticks — so the machine is only
ever touched by that task, the log sees one appender, and stdout gets one
write per inbox message (every frame an input produced, batched).  stdin is
read by its own task, concurrently with the turn, because interrupts and
permission answers arrive while the core is working.  The core is trio-cap's
scripted brain, the same :class:`~actors.agent.core.AgentCore` the ``inproc``
binding runs, unless the caller gives ``make_core``: the CLI passes the bridge
brain's factory (``actors/bridge.py``) for ``--bridge AGENT``, so this
shell, which sits below the orchestrator, never imports what drives it.

The shell is also where the world comes in: the working directory, files the
command line names (:func:`resolve_options`), the id source, the clock, and
the ``--transcript-file`` written at exit.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs
import msgspec
import trio

from trio_cap.actors import __version__
from trio_cap.actors.agent.brain import ScriptedBrain
from trio_cap.actors.agent.core import AgentCore, CoreEnded, Emit, Emitted
from trio_cap.actors.agent.script import Script
from trio_cap.actors.agent.workspace import WorkspaceDiffs
from trio_cap.actors.bindings.base import TurnEnded
from trio_cap.actors.bindings.stream_json.agent_argv import AgentOptions, OptionsError
from trio_cap.actors.bindings.stream_json.agent_ids import FrameIds
from trio_cap.actors.bindings.stream_json.agent_side import (
    AgentSide,
    Deliver,
    Effect,
    Finish,
    Note,
    ReadTranscript,
    Record,
    Send,
    SetModel,
)
from trio_cap.actors.bindings.stream_json.agent_transcript import transcript_document
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import Event, SessionConfig
from trio_cap.events.log.base import EventLog

_READ = 1 << 16


class Core(Protocol):
    """What sits behind the agent side: CAP frames in, CAP events and turn ends out."""

    config: SessionConfig | None

    async def run(self, frames: trio.MemoryReceiveChannel[Event]) -> None: ...


CoreFactory = Callable[[Emit, str], Core]
"""``make_core(emit, session_id)``: the core for one session (default: the scripted brain)."""


def resolve_options(options: AgentOptions) -> AgentOptions:
    """``options`` with what the machine may not read itself filled in: the working directory
    and the text of ``--system-prompt-file`` / ``--append-system-prompt-file``; and
    ``--transcript-file`` checked up front, so a session is not run for a file that cannot
    be written.  Idempotent.

    Raises :class:`OptionsError` (exit code 2) naming the flag and the file."""
    changes: dict[str, Any] = {}
    if options.cwd is None:
        changes["cwd"] = os.getcwd()
    if options.system_prompt_file is not None:
        changes["system_prompt"] = _read("--system-prompt-file", options.system_prompt_file)
        changes["system_prompt_file"] = None
    if options.append_system_prompt_file is not None:
        changes["append_system_prompt"] = _read("--append-system-prompt-file",
                                                options.append_system_prompt_file)
        changes["append_system_prompt_file"] = None
    if options.transcript_file is not None:
        _check_writable("--transcript-file", options.transcript_file)
    return attrs.evolve(options, **changes) if changes else options


MAX_PROMPT_FILE = 16 << 20


def _check_writable(flag: str, path: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise OptionsError(f"{flag}: {path} is a directory")
    if not os.path.isdir(folder):
        raise OptionsError(f"{flag}: {path}: the directory {folder} does not exist")
    if not os.access(path if os.path.exists(path) else folder, os.W_OK):
        raise OptionsError(f"{flag}: {path}: permission denied")


def _read(flag: str, path: str) -> str | None:
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_PROMPT_FILE + 1)
        if len(data) > MAX_PROMPT_FILE:
            raise OptionsError(f"{flag}: {path} is larger than {MAX_PROMPT_FILE >> 20} MiB")
        return data.decode("utf-8") or None
    except UnicodeDecodeError:
        raise OptionsError(f"{flag}: {path} is not UTF-8 text") from None
    except OSError as exc:
        raise OptionsError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None


class _Pipe:
    """One end of stdio: a non-blocking FdStream for pipes and sockets, a worker thread
    for terminals and files (epoll refuses regular files, and a terminal is shared)."""

    def __init__(self, fd: int) -> None:
        mode = os.fstat(fd).st_mode
        self.fd = fd
        self.stream: trio.lowlevel.FdStream | None = None
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            self.stream = trio.lowlevel.FdStream(os.dup(fd))

    async def receive_some(self) -> bytes:
        if self.stream is not None:
            return await self.stream.receive_some(_READ)
        return await trio.to_thread.run_sync(os.read, self.fd, _READ, abandon_on_cancel=True)

    async def send_all(self, data: bytes) -> None:
        if self.stream is not None:
            await self.stream.send_all(data)
            return
        await trio.to_thread.run_sync(_write_all, self.fd, data)

    async def aclose(self) -> None:
        if self.stream is not None:
            await self.stream.aclose()


async def read_into(pipe: _Pipe, inbox: trio.MemorySendChannel[tuple[str, Any]]) -> None:
    """stdin's chunks into an agent shell's inbox as ``("data", bytes)``, then ``("eof",
    None)`` once it ends or breaks (shared by the stream-json and ACP agent shells)."""
    while True:
        try:
            data = await pipe.receive_some()
        except (OSError, trio.ClosedResourceError, trio.BrokenResourceError):
            data = b""
        if not data:
            await inbox.send(("eof", None))
            return
        await inbox.send(("data", data))


async def end_on_signals(closing: str, note: Callable[[str], None],
                         exit_with: Callable[[int], None], cancel: trio.CancelScope) -> None:
    """SIGTERM / SIGHUP end an agent shell cleanly: a note, the shell's exit code
    (143 for SIGTERM, 129 for SIGHUP, as a shell says), its nursery cancelled."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
        async for signum in signals:
            note(f"{signal.Signals(signum).name}: {closing}")
            exit_with(128 + signum)
            cancel.cancel()
            return


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class AgentShell:
    def __init__(self, options: AgentOptions, log: EventLog, *, script: Script | None = None,
                 session_id: str | None = None, stdin_fd: int = 0, stdout_fd: int = 1,
                 notes: Callable[[str], None] | None = None,
                 make_core: CoreFactory | None = None) -> None:
        options = resolve_options(options)
        self.options = options
        self.log = log
        self.script = script or Script()
        self.session_id = session_id or options.session_id or str(uuid.uuid4())
        self.machine = AgentSide(options, session_id=self.session_id,
                                 default_model=self.script.model,
                                 new_id=FrameIds(self.session_id), pid=os.getpid(),
                                 agent_version=__version__)
        self._stdin_fd = stdin_fd
        self._stdout_fd = stdout_fd
        self._note = notes or (lambda text: print(f"cap-agent: {text}", file=sys.stderr))
        self._out = bytearray()
        self._first_seq: int | None = None
        self._exit: int | None = None
        self._frames_send, self._frames_recv = trio.open_memory_channel[Event](64)
        self._inbox_send, self._inbox = trio.open_memory_channel[tuple[str, Any]](16)
        self.hooks: WorkspaceDiffs | None = None
        self.core: Core
        if make_core is not None:
            # e.g. the bridge: the driven agent reports its own workspace diffs, if it makes any
            self.core = make_core(self._emit, self.session_id)
        else:
            exclude = [options.log] if options.log else []
            self.hooks = WorkspaceDiffs(exclude=exclude) if options.workspace_diff else None
            self.core = AgentCore(ScriptedBrain(self.script), self._emit,
                                  session_id=self.session_id, turn_hooks=self.hooks)

    # ---- the core's side ------------------------------------------------------------
    async def _emit(self, batch: Sequence[Emitted]) -> None:
        await self._inbox_send.send(("core", list(batch)))

    async def _run_core(self) -> None:
        try:
            await self.core.run(self._frames_recv)
        except CoreEnded as exc:  # a bridged agent that died: the turn fails, the side ends
            await self._inbox_send.send(("core_failed", str(exc)))
        except Exception as exc:  # a crashed brain fails the turn, not the process
            await self._inbox_send.send(("core_failed", f"the scripted brain crashed: {exc!r}"))

    # ---- stdin and the timer -------------------------------------------------------------
    async def _read_stdin(self, pipe: _Pipe) -> None:
        await read_into(pipe, self._inbox_send)

    async def _tick(self, seconds: float) -> None:
        while True:
            await trio.sleep(seconds)
            await self._inbox_send.send(("tick", trio.current_time()))

    async def _signals(self, cancel: trio.CancelScope) -> None:
        await end_on_signals("closing the log", self._note, self._set_exit, cancel)

    def _set_exit(self, code: int) -> None:
        self._exit = code

    # ---- effects ------------------------------------------------------------------------
    async def _apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            match effect:
                case Send():
                    self._out += effect.data
                case Record():
                    envs = await self._append(effect.events, cause=None)
                    await self._apply(self.machine.logged(envs, effect.after))
                case Deliver():
                    for frame in effect.frames:
                        await self._frames_send.send(frame)
                case SetModel():
                    if self.core.config is not None:
                        self.core.config = msgspec.structs.replace(self.core.config,
                                                                   model=effect.model)
                case ReadTranscript():
                    envs = (self.log.read(self._first_seq, self.session_id)
                            if self._first_seq is not None else [])
                    await self._apply(self.machine.transcript_ready(envs, effect.artifact_id))
                case Finish():
                    self._exit = effect.exit_code
                case Note():
                    self._note(effect.text)

    async def _append(self, events: Sequence[Event], cause: int | None) -> list[Envelope]:
        if not events:
            return []
        last = await self.log.append(events, stream=self.session_id, cause=cause)
        first = last - len(events) + 1
        if self._first_seq is None:
            self._first_seq = first
        return self.log.read(first, until=last)

    async def _core_batch(self, items: list[Emitted]) -> None:
        events: list[Event] = []
        for item in items:
            if isinstance(item, TurnEnded):
                if events:
                    envs = await self._append(events, self.machine.cause)
                    await self._apply(self.machine.logged(envs))
                    events = []
                await self._apply(self.machine.turn_ended(item.stop_reason))
            else:
                events.append(item)
        if events:
            envs = await self._append(events, self.machine.cause)
            await self._apply(self.machine.logged(envs))

    # ---- the pump ----------------------------------------------------------------------------
    async def run(self) -> int:
        """Serve until stdin ends and the last turn is answered; the exit code."""
        stdout = _Pipe(self._stdout_fd)
        stdin = _Pipe(self._stdin_fd) if self.options.input_format != "text" else None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._run_core)
                nursery.start_soon(self._signals, nursery.cancel_scope)
                if self.options.diff_interval > 0:
                    nursery.start_soon(self._tick, self.options.diff_interval)
                if self.options.input_format == "text":
                    await self._apply(await self._text_prompt())
                else:
                    assert stdin is not None
                    nursery.start_soon(self._read_stdin, stdin)
                await self._flush(stdout)
                while self._exit is None:
                    kind, payload = await self._inbox.receive()
                    await self._dispatch(kind, payload)
                    await self._flush(stdout)
                nursery.cancel_scope.cancel()
        except trio.BrokenResourceError:
            self._note("stdout closed by the client")
            self._exit = 1
        finally:
            with trio.CancelScope(shield=True):
                await stdout.aclose()
                if stdin is not None:
                    await stdin.aclose()
                if self.hooks is not None:
                    self.hooks.close()
                self._write_transcript()
        return self._exit if self._exit is not None else 1

    def _write_transcript(self) -> None:
        """``--transcript-file``: the whole session as the coding profile's transcript document,
        on every way out (end of stdin, a failed core, SIGTERM), never on stdout."""
        path = self.options.transcript_file
        if not path:
            return
        envs = self.log.read(self._first_seq, self.session_id) if self._first_seq else []
        model = self.machine.config.model if self.machine.config else None
        text = transcript_document(self.session_id, model or self.machine.current_model, envs)
        try:
            with open(path, "w", encoding="utf-8") as file:
                file.write(text)
        except OSError as exc:
            self._note(f"--transcript-file {path}: cannot write: {exc.strerror or exc}")
            if not self._exit:
                self._exit = 1

    async def _dispatch(self, kind: str, payload: Any) -> None:
        if kind == "data":
            await self._apply(self.machine.receive_data(payload))
        elif kind == "eof":
            await self._apply(self.machine.receive_eof())
        elif kind == "core":
            await self._core_batch(payload)
        elif kind == "tick":
            await self._apply(self.machine.tick(payload))
        elif kind == "core_failed":
            await self._apply(self.machine.core_failed(payload))

    async def _text_prompt(self) -> list[Effect]:
        prompt = self.options.prompt
        if prompt is None:
            chunks = []
            pipe = _Pipe(self._stdin_fd)
            while data := await pipe.receive_some():
                chunks.append(data)
            await pipe.aclose()
            prompt = b"".join(chunks).decode(errors="replace")
        return self.machine.user_text(prompt) + self.machine.receive_eof()

    async def _flush(self, stdout: _Pipe) -> None:
        if self._out:
            data, self._out = bytes(self._out), bytearray()
            await stdout.send_all(data)


async def serve(options: AgentOptions, log: EventLog, *, script: Script | None = None,
                session_id: str | None = None, make_core: CoreFactory | None = None) -> int:
    """Speak stream-json on this process's stdio until stdin ends; returns the exit code."""
    async with log:
        shell = AgentShell(options, log, script=script, session_id=session_id,
                           make_core=make_core)
        return await shell.run()


