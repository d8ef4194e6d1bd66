"""The PTY binding's Trio shell: a program on a pseudo-terminal around the settle machine.

Everything screen-shaped happens in :class:`~.machine.PtyMachine`; the
terminal and the process are :mod:`.ptyproc`'s; batching into the session
inbox is :mod:`..deliver`'s.  Three tasks feed the machine, one step at a
time under a lock so its outputs keep their order: the master reader
(bytes with the time they arrived), the timer (``tick`` at the machine's
``deadline()``: settles, the Enter after a prompt) and the exit watcher
(liveness is the child's exit status, never a failed read).

=============================  ===================================================
what happens during ``open``   what the caller gets
=============================  ===================================================
the program cannot start       ``cannot start 'x': program not found …``
it exits before it is ready    ``pty agent 'x' ended before it was ready: …``
it shows a dialog at start     ``… did not become ready …: it shows a dialog …``
no ready screen in N s         ``pty agent 'x' did not become ready within N s …``
the caller is cancelled        ``Cancelled`` (the group is killed and reaped first)
an error in the caller's body  that error, unchanged (the group is ended first)
=============================  ===================================================

Time is ``trio.current_time()`` (an autojump clock in tests); ids come from the
spec's id source.  ``spec.options["pty.raw_bytes"]``, the connector's
``raw_bytes`` or a session recorded with ``--record raw`` opts in to
``cap.pty.raw_bytes``; ``spec.options["pty.record"]``,
a list, receives every machine input as ``(method, args)`` so a session replays
through a fresh machine (:func:`replay`).

With a :class:`~trio_cap.actors.recording.Recorder` (``--record frames|raw``) every
step the machine takes is logged as the ``frame.in`` that leads its batch: a read
with its time, a timer tick that could act (one before the machine's deadline only
moves its clock, and the next step's time carries that), a send, cancel, resize or
the child's exit as a signal with the machine's clock; the ids it drew are on that
frame.in and every write is a ``frame.out``.  The settings, the creation time and
the session id are on the connection's first ``frame.out`` (``pty_machine``), so
``cap replay --check`` builds the same machine with no manifest at hand.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import math
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import trio

from trio_cap.actors.bindings.base import AgentGone, Output
from trio_cap.actors.bindings.deliver import Deliverer
from trio_cap.actors.bindings.process import open_task_group
from trio_cap.actors.bindings.pty.machine import BINDING, PtyMachine
from trio_cap.actors.bindings.pty.machine_rules import (
    BUILTIN_BLOCKED,
    BUILTIN_CHROME,
    PtySettings,
)
from trio_cap.actors.bindings.pty.ptyproc import PtyProcess, describe_status, spawn_pty
from trio_cap.actors.connection import AgentSpec, ConnectError
from trio_cap.actors.ids import IdSource, RandomIds
from trio_cap.actors.manifest.adhoc import PTY_RECORDED
from trio_cap.actors.manifest.model import IDLE_DEFAULT, Manifest
from trio_cap.actors.manifest.regex import PatternError, compile_line_pattern
from trio_cap.actors.recording import Recorder
from trio_cap.events.kinds import CancelScope, Event

RAW_OPTION = "pty.raw_bytes"
RECORD_OPTION = "pty.record"


def _compile(patterns: Sequence[str]) -> tuple[Any, ...]:
    """The patterns as matchers, joined into one alternation where RE2 allows it: the
    machine asks "does any match this line" for every line of a turn, and one RE2 search
    costs about what the call costs, whatever the pattern."""
    if len(patterns) > 1:
        try:
            return (compile_line_pattern("|".join(f"(?:{p})" for p in patterns)),)
        except PatternError:
            pass  # e.g. two patterns naming the same group: matched one by one
    return tuple(compile_line_pattern(p) for p in patterns)


def _one(pattern: str | None) -> Any:
    return compile_line_pattern(pattern) if pattern else None


def settings_for(manifest: Manifest, *, raw_bytes: bool = False,
                 options: Mapping[str, Any] | None = None) -> PtySettings:
    """The machine's settings from a manifest, every pattern compiled with RE2.

    ``options`` may override ``idle_window`` (seconds), ``learn_prompt`` and
    ``submit_retries`` for one session (``pty.idle_window`` … in ``AgentSpec.options``).
    """
    opts = dict(options or {})
    parse, pty = manifest.parse, manifest.pty
    learn = tuple(parse.idle) == IDLE_DEFAULT  # the manifest does not know the prompt
    return PtySettings(
        cols=pty.cols, rows=pty.rows,
        ready_when=_one(manifest.startup.ready_when.pattern),
        idle=_compile(parse.idle),
        learn_prompt=bool(opts.get("pty.learn_prompt", learn)),
        blocked=_compile((*BUILTIN_BLOCKED, *parse.x_blocked)),
        busy=_compile(parse.x_busy),
        redraw=pty.x_redraw,
        chrome=_compile((*BUILTIN_CHROME, *parse.x_chrome)),
        tool_call_start=_one(parse.tool_call_start), tool_call_end=_one(parse.tool_call_end),
        plan_section=_one(parse.plan_section), thought_section=_one(parse.thought_section),
        ask_yes_no=_one(parse.ask_yes_no), ask_options=_one(parse.ask_options),
        error_lines=_compile(parse.error_lines),
        bracketed_paste=pty.bracketed_paste,
        cancel=manifest.capabilities.mid_turn_cancel,
        cancel_keys=tuple(k.encode() for k in pty.x_cancel_keys) or (b"\x03",),
        text_prefix=_one(parse.x_text_prefix),
        queued_input=manifest.capabilities.queued_input and pty.queued_input_supported,
        idle_window=float(opts.get("pty.idle_window", pty.x_idle_ms / 1000.0)),
        enter_gap=pty.x_enter_delay_ms / 1000.0,
        submit_retries=int(opts.get("pty.submit_retries", 2)),
        raw_bytes=bool(raw_bytes or opts.get(RAW_OPTION)),
    )


def agent_argv(spec: AgentSpec, manifest: Manifest | None) -> list[str]:
    """``startup.command`` plus the model and cwd flags the manifest names."""
    argv = list(spec.argv or (manifest.startup.command if manifest else ()))
    startup = manifest.startup if manifest else None
    if startup is not None and spec.config.model and startup.model_arg:
        argv += [startup.model_arg, spec.config.model]
    if startup is not None and startup.cwd_arg:
        argv += [startup.cwd_arg, spec.config.cwd]
    return argv


def replay(settings: PtySettings, record: Sequence[tuple[str, tuple[Any, ...]]], *,
           new_id: Callable[[str], str]) -> list[Output]:
    """Feed a recorded session (its first entry ``("init", (now,))``) into a fresh
    machine; the outputs, in order."""
    (first, (now,)), rest = record[0], record[1:]
    assert first == "init", "a record starts with the machine's creation time"
    machine = PtyMachine(settings, new_id=new_id, now=now)
    out: list[Output] = []
    for method, args in rest:
        result = getattr(machine, method)(*args)
        if isinstance(result, list):
            out += result
    return out


def settings_record(settings: PtySettings) -> dict[str, Any]:
    """The settings as plain data (patterns as their source), as the log holds them."""
    out: dict[str, Any] = {}
    for spec in dataclasses.fields(settings):
        value = getattr(settings, spec.name)
        if hasattr(value, "pattern"):
            value = {"re": value.pattern}
        elif spec.name == "cancel_keys":
            value = [base64.b64encode(k).decode("ascii") for k in value]
        elif isinstance(value, tuple | list) and value and hasattr(value[0], "pattern"):
            value = [{"re": m.pattern} for m in value]
        out[spec.name] = value
    return msgspec.json.decode(msgspec.json.encode(out))


def settings_from_record(record: dict[str, Any]) -> PtySettings:
    """:func:`settings_record` undone: every pattern compiled again."""
    def matcher(value: Any) -> Any:
        return compile_line_pattern(value["re"].removeprefix("(?m)"))

    given: dict[str, Any] = {}
    for spec in dataclasses.fields(PtySettings):
        if spec.name not in record:
            continue
        value = record[spec.name]
        if isinstance(value, dict) and "re" in value:
            value = matcher(value)
        elif spec.name == "cancel_keys":
            value = tuple(base64.b64decode(k) for k in value)
        elif isinstance(value, list) and value and isinstance(value[0], dict) and "re" in value[0]:
            value = tuple(matcher(v) for v in value)
        elif isinstance(value, list):
            value = tuple(value)
        given[spec.name] = value
    return PtySettings(**given)


class PtyConnection:
    """A live PTY session: ``send``, ``cancel``, ``resize``."""

    def __init__(self, pty: PtyProcess, machine: PtyMachine, deliver: trio.MemorySendChannel[Any],
                 *, name: str, record: list[Any] | None = None,
                 recorded_outputs: list[Any] | None = None, recorder: Recorder | None = None,
                 drawn: list[str] | None = None) -> None:
        self.pty = pty
        self.machine = machine
        self.deliver = deliver
        self.name = name
        self.recorder = recorder
        self.drawn = drawn if drawn is not None else []
        """The ids the machine drew in the step under way (recording only)."""
        self.out = Deliverer(deliver, write=pty.write, kill=self._kill, recorder=recorder)
        self.ready = trio.Event()
        self.exited = trio.Event()
        self.output_ended = trio.Event()
        self.gone_reason: str | None = None
        self._lock = trio.Lock()
        self._wake = trio.Event()
        self._closing = False
        self._record = record
        self._recorded_outputs = recorded_outputs
        self._nursery: trio.Nursery | None = None

    # ---- Connection -------------------------------------------------------
    async def send(self, frames: Sequence[Event]) -> None:
        for frame in frames:
            await self._step("send", frame)

    async def cancel(self, scope: CancelScope) -> None:
        if scope == "session":
            self._closing = True
            self.pty.signal_group(1)  # SIGHUP, as a closed terminal; shutdown follows
            return
        await self._step("cancel", scope)

    async def resize(self, cols: int, rows: int) -> None:
        """A new window size for the program (TIOCSWINSZ + SIGWINCH) and the screen."""
        self.pty.resize(cols, rows)
        await self._step("resize", cols, rows)

    # ---- the machine, one step at a time ------------------------------------------
    async def _step(self, method: str, *args: Any, wake: bool = True) -> None:
        async with self._lock:
            if self._record is not None:
                self._record.append((method, args))
            rec = self.recorder
            if rec is None:
                outputs = getattr(self.machine, method)(*args)
                received = None
            else:
                outputs, received = self._recorded_step(rec, method, args)
            if self._recorded_outputs is not None and isinstance(outputs, list):
                self._recorded_outputs.extend(outputs)
            if self.machine.ready:
                self.ready.set()
            if outputs or received is not None:
                try:
                    await self.out(outputs or (), received)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass  # the session stopped listening: shutdown follows
        if wake:
            self._wake.set()

    def _recorded_step(self, rec: Recorder, method: str,
                       args: tuple[Any, ...]) -> tuple[Any, Any]:
        """The step, and the frame.in that records it (None for a tick that cannot act)."""
        machine = self.machine
        self.drawn.clear()
        if method == "tick":
            deadline = machine.deadline()
            if deadline is None or args[0] is None or args[0] < deadline:
                return machine.tick(*args), None  # only the clock moves: nothing to record
        t = machine.now
        outputs = getattr(machine, method)(*args)
        ids = tuple(self.drawn)
        if method == "receive_data":
            return outputs, rec.step_in(args[1], args[0], ids=ids)
        if method == "tick":
            return outputs, rec.step_in(args[0], signal="tick", ids=ids)
        if method == "resize":
            return outputs, rec.step_in(t, signal="resize", frame=list(args), ids=ids)
        if method == "process_exited":
            return outputs, rec.step_in(t, signal="exited", text=args[0], exit_code=args[1],
                                        frame={"expected": bool(args[2])}, ids=ids)
        scope = args[0] if method == "cancel" else None
        return outputs, rec.step_in(t, signal=method, text=scope, ids=ids)

    async def _kill(self, reason: str) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(functools.partial(self.pty.terminate, graceful=False))
        else:
            await self.pty.terminate(graceful=False)

    # ---- the three tasks ----------------------------------------------------------
    async def read_master(self) -> None:
        try:
            while data := await self.pty.read():
                await self._step("receive_data", data, trio.current_time())
        finally:
            self.output_ended.set()

    async def run_timer(self) -> None:
        while True:
            deadline = self.machine.deadline()
            with trio.move_on_at(math.inf if deadline is None else deadline):
                await self._wake.wait()
            self._wake = trio.Event()
            await self._step("tick", trio.current_time(), wake=False)

    async def watch_exit(self) -> None:
        code = await self.pty.wait()
        with trio.move_on_after(1.0):  # the last output, unless an orphan holds the tty
            await self.output_ended.wait()
        self.gone_reason = f"the agent {describe_status(code)}"
        expected = self._closing
        await self._step("process_exited", self.gone_reason, code, expected)
        self.exited.set()
        if not expected:
            reason = self.gone_reason
            if self.machine.killing:
                reason = f"hard cancel: {reason}"
            rec = self.recorder
            try:
                await self.out([AgentGone(reason, code)],
                               rec.gone(reason, code) if rec is not None else None)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

    async def wait_ready(self, seconds: float, pattern: str | None) -> str | None:
        """Wait for ``cap.session.ready`` (or the program's exit); why it failed, or None."""
        with trio.move_on_after(seconds):
            async with trio.open_nursery() as nursery:
                async def exited() -> None:
                    await self.exited.wait()
                    nursery.cancel_scope.cancel()
                nursery.start_soon(exited)
                await self.ready.wait()
                nursery.cancel_scope.cancel()
        if self.machine.ready:
            return None
        shown = self.machine.describe()
        screen = f"; its screen's last line: {shown!r}" if shown else "; its screen is empty"
        if self.exited.is_set() or self.pty.returncode is not None:
            return (f"pty agent {self.name!r} ended before it was ready: the program "
                    f"{describe_status(self.pty.returncode)}{screen}")
        dialog = self.machine.blocked_dialog
        if dialog:
            return (f"pty agent {self.name!r} did not become ready within {seconds:g} s: it "
                    f"shows a dialog trio-cap will not answer ({dialog!r}); answer it once in "
                    "a terminal, or start the agent so it does not ask")
        return (f"pty agent {self.name!r} did not become ready within {seconds:g} s "
                f"(startup.ready_when {pattern!r} never matched a settled screen){screen}")

    async def shutdown(self) -> None:
        self._closing = True
        await self.pty.terminate()  # shielded
        self.machine.close()


class PtyConnector:
    """Drives any program in a terminal (``binding = "pty"``), CAP's universal binding.

    ``env`` is added to the inherited environment; ``grace`` is the time the
    program gets after SIGHUP, and again after SIGTERM; ``init_timeout``
    overrides the manifest's ``startup.init_timeout_seconds``; ``raw_bytes``
    opts every session in to ``cap.pty.raw_bytes``.
    """

    binding = BINDING

    def __init__(self, *, env: Mapping[str, str] | None = None, inherit_env: bool = True,
                 grace: float = 5.0, init_timeout: float | None = None,
                 raw_bytes: bool = False) -> None:
        self.env = dict(env or {})
        self.inherit_env = inherit_env
        self.grace = grace
        self.init_timeout = init_timeout
        self.raw_bytes = raw_bytes

    def _env(self, spec: AgentSpec, manifest: Manifest | None) -> dict[str, str]:
        env = dict(os.environ) if self.inherit_env else {}
        env.update(self.env)
        env.update(spec.options.get("env") or {})
        env["PWD"] = spec.config.cwd
        name = manifest.startup.session_id_env if manifest else None
        session = spec.options.get("agent_session_id")
        if name and isinstance(session, str):
            env[name] = session
        return env

    @asynccontextmanager
    async def open(self, spec: AgentSpec,
                   deliver: trio.MemorySendChannel[Any]) -> AsyncIterator[PtyConnection]:
        manifest = spec.options.get("manifest")
        if not isinstance(manifest, Manifest):
            deliver.close()
            raise ConnectError("pty: the session has no manifest to read [pty] and [parse] from")
        recorder = spec.options.get("recorder")  # `cap run --record raw` opts in to raw bytes
        recorder = recorder if isinstance(recorder, Recorder) else None
        raw = self.raw_bytes or bool(getattr(recorder, "raw", False))
        recorded = manifest.extensions.get(PTY_RECORDED)
        if isinstance(recorded, dict):  # a played-back session: read as the original was
            settings = dataclasses.replace(settings_from_record(recorded), raw_bytes=bool(
                raw or spec.options.get(RAW_OPTION)))
        else:
            settings = settings_for(manifest, raw_bytes=raw, options=spec.options)
        timeout = (self.init_timeout if self.init_timeout is not None
                   else manifest.startup.init_timeout_seconds)
        ids: IdSource = spec.ids or RandomIds()
        record = spec.options.get(RECORD_OPTION)
        record = record if isinstance(record, list) else None
        failure: str | None = None
        try:
            async with spawn_pty(agent_argv(spec, manifest), cwd=spec.config.cwd,
                                 env=self._env(spec, manifest), cols=settings.cols,
                                 rows=settings.rows, grace=self.grace) as pty:
                now = trio.current_time()
                if record is not None:
                    record.append(("init", (now,)))
                session = spec.options.get("agent_session_id")
                session = session if isinstance(session, str) else None
                new_id = ids.new
                drawn: list[str] = []
                if recorder is not None:
                    recorder.frame_out({"pty_machine": {
                        "settings": settings_record(settings), "now": now, "session_id": session}})
                    new_id = _drawing(ids.new, drawn)
                machine = PtyMachine(settings, new_id=new_id, now=now, session_id=session)
                conn = PtyConnection(pty, machine, deliver, name=spec.name, record=record,
                                     recorder=recorder, drawn=drawn)
                async with open_task_group() as tasks:
                    conn._nursery = tasks
                    tasks.start_soon(conn.read_master)
                    tasks.start_soon(conn.run_timer)
                    tasks.start_soon(conn.watch_exit)
                    failure = await conn.wait_ready(timeout, manifest.startup.ready_when.pattern)
                    if failure is None:
                        try:
                            yield conn
                        finally:
                            await conn.shutdown()
                    else:
                        await pty.terminate(graceful=False)
        finally:
            deliver.close()  # our clone of the inbox; sync, so nothing can replace an error
        if failure is not None:
            raise ConnectError(failure)  # raised out here: a plain error, never a group


def _drawing(new: Callable[[str], str], drawn: list[str]) -> Callable[[str], str]:
    def draw(prefix: str) -> str:
        value = new(prefix)
        drawn.append(value)
        return value
    return draw
