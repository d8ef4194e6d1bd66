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
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

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
from trio_cap.actors.manifest.model import IDLE_DEFAULT, Manifest
from trio_cap.actors.manifest.regex import PatternError, compile_line_pattern
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


class PtyConnection:
    """A live PTY session: ``send``, ``cancel``, ``resize``."""

    def __init__(self, pty: PtyProcess, machine: PtyMachine, deliver: trio.MemorySendChannel[Any],
                 *, name: str, record: list[Any] | None = None,
                 recorded_outputs: list[Any] | None = None) -> None:
        self.pty = pty
        self.machine = machine
        self.deliver = deliver
        self.name = name
        self.out = Deliverer(deliver, write=pty.write, kill=self._kill)
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
            outputs = getattr(self.machine, method)(*args)
            if self._recorded_outputs is not None and isinstance(outputs, list):
                self._recorded_outputs.extend(outputs)
            if self.machine.ready:
                self.ready.set()
            if outputs:
                try:
                    await self.out(outputs)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass  # the session stopped listening: shutdown follows
        if wake:
            self._wake.set()

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
            try:
                await self.deliver.send(AgentGone(reason, code))
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
        raw = self.raw_bytes or bool(getattr(recorder, "raw", False))
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
                machine = PtyMachine(settings, new_id=ids.new, now=now,
                                     session_id=session if isinstance(session, str) else None)
                conn = PtyConnection(pty, machine, deliver, name=spec.name, record=record)
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
