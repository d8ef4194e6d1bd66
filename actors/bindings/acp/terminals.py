"""``terminal/*`` served for an ACP agent: real Trio subprocesses, each in its own group.

Shell side.  ``terminal/create`` starts the command at once and answers with
its id while it runs; output (stdout and stderr together, as a terminal shows
them) is kept up to the agent's ``outputByteLimit``: the *last* bytes, cut on
a UTF-8 character boundary, with ``truncated`` set.  Exit statuses have the
schema's exact shapes: ``terminal/output`` wraps it (``exitStatus``, only
once exited), ``terminal/wait_for_exit`` answers it flat; a signal is named
``SIGKILL``-style.  ``terminal/kill`` ends the whole process group (SIGTERM,
then SIGKILL after ``grace``) and keeps the id valid; ``terminal/release``
kills if needed and forgets the id (later calls: -32002).  Whatever is left
when the session ends is killed and reaped.

The command was vetted before it got here (the client machine asks the
session's permission policy, as a ``Bash`` call); its cwd is confined to the
session's fs scope like any path.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping

import trio

from trio_cap.actors.bindings import jsonrpc as rpc
from trio_cap.actors.bindings.acp import frames as f
from trio_cap.actors.bindings.acp.fs_service import FsRefused, FsService
from trio_cap.actors.bindings.process import describe_spawn_error

DEFAULT_LIMIT = 1024 * 1024
"""Output kept when the agent names no ``outputByteLimit``."""
MAX_TERMINALS = 16
KEPT_RELEASED = 32
"""Released terminals whose last output is kept, so tool calls that embed them still show it."""


def keep_tail(buffer: bytearray, limit: int) -> bool:
    """Cut ``buffer`` to its last ``limit`` bytes on a UTF-8 boundary; True if it cut."""
    if len(buffer) <= limit:
        return False
    start = len(buffer) - limit
    while start < len(buffer) and (buffer[start] & 0xC0) == 0x80:
        start += 1  # a continuation byte: the character began before the cut
    del buffer[:start]
    return True


def exit_status(returncode: int) -> f.TerminalExitStatus:
    if returncode >= 0:
        return f.TerminalExitStatus(exit_code=returncode, signal=None)
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"SIG{-returncode}"
    return f.TerminalExitStatus(exit_code=None, signal=name)


class Terminal:
    def __init__(self, terminal_id: str, proc: trio.Process, limit: int) -> None:
        self.id = terminal_id
        self.proc = proc
        self.limit = limit
        self.buffer = bytearray()
        self.truncated = False
        self.status: f.TerminalExitStatus | None = None
        self.exited = trio.Event()
        self.drained = trio.Event()

    async def pump(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            while data := await stdout.receive_some(64 * 1024):
                self.buffer += data
                if keep_tail(self.buffer, self.limit):
                    self.truncated = True
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.drained.set()

    async def reap(self, grace: float) -> None:
        code = await self.proc.wait()
        with trio.move_on_after(grace):  # output still in the pipe, or a child holding it
            await self.drained.wait()
        self.status = exit_status(code)
        self.exited.set()

    def output(self) -> f.TerminalOutputResult:
        text = self.buffer.decode("utf-8", errors="replace")
        if self.status is None:
            return f.TerminalOutputResult(output=text, truncated=self.truncated)
        return f.TerminalOutputResult(output=text, truncated=self.truncated,
                                      exit_status=self.status)

    async def kill(self, grace: float) -> None:
        with trio.CancelScope(shield=True):
            if self.proc.returncode is None:
                _signal(self.proc.pid, signal.SIGTERM)
                with trio.move_on_after(grace):
                    await self.exited.wait()
            _signal(self.proc.pid, signal.SIGKILL)  # the leader, and what it left behind
            code = await self.proc.wait()
            if self.status is None:  # the reaper is not running any more (session end)
                self.status = exit_status(code)
                self.exited.set()


def _signal(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


class Terminals:
    """The session's terminals; ``nursery`` runs their readers and outlives them."""

    def __init__(self, nursery: trio.Nursery, fs: FsService, env: Mapping[str, str],
                 *, grace: float = 2.0) -> None:
        self.nursery = nursery
        self.fs = fs
        self.env = dict(env)
        self.grace = grace
        self._live: dict[str, Terminal] = {}
        self._released: dict[str, str] = {}
        self._count = 0

    def text_of(self, terminal_id: str) -> str | None:
        """A terminal's output as shown now (after release: as it was), None if unknown."""
        term = self._live.get(terminal_id)
        if term is not None:
            return term.output().output
        return self._released.get(terminal_id)

    def _get(self, terminal_id: str) -> Terminal:
        term = self._live.get(terminal_id)
        if term is None:
            raise FsRefused(f.RESOURCE_NOT_FOUND, f"no terminal {terminal_id!r} (never "
                                                  "created, or released)")
        return term

    async def create(self, params: f.CreateTerminalParams) -> f.CreateTerminalResult:
        if len(self._live) >= MAX_TERMINALS:
            raise FsRefused(rpc.INTERNAL_ERROR, f"too many terminals open (at most "
                                                f"{MAX_TERMINALS}); release some first")
        cwd = str(self.fs.confine(params.cwd)) if isinstance(params.cwd, str) else self.fs.cwd
        env = dict(self.env)
        env.update({e.name: e.value for e in params.env})
        limit = params.output_byte_limit if isinstance(params.output_byte_limit, int) \
            else DEFAULT_LIMIT
        argv = [params.command, *params.args]
        try:
            proc = await trio.lowlevel.open_process(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                cwd=cwd, env=env, start_new_session=True)
        except OSError as exc:
            raise FsRefused(rpc.INTERNAL_ERROR, describe_spawn_error(params.command, cwd, exc)) \
                from None
        self._count += 1
        term = Terminal(f"term_{self._count}", proc, max(0, limit))
        self._live[term.id] = term
        self.nursery.start_soon(term.pump)
        self.nursery.start_soon(term.reap, self.grace)
        return f.CreateTerminalResult(terminal_id=term.id)

    def output(self, params: f.TerminalParams) -> f.TerminalOutputResult:
        return self._get(params.terminal_id).output()

    async def wait(self, params: f.TerminalParams) -> f.TerminalExitStatus:
        term = self._get(params.terminal_id)
        await term.exited.wait()
        assert term.status is not None
        return term.status

    async def kill(self, params: f.TerminalParams) -> f.Empty:
        await self._get(params.terminal_id).kill(self.grace)
        return f.Empty()

    async def release(self, params: f.TerminalParams) -> f.Empty:
        term = self._get(params.terminal_id)
        await term.kill(self.grace)
        self._live.pop(term.id, None)
        self._released[term.id] = term.output().output  # the id is invalid; its output is not
        while len(self._released) > KEPT_RELEASED:
            del self._released[next(iter(self._released))]
        await _close(term)
        return f.Empty()

    async def close(self) -> None:
        """The session ends: every terminal still there is killed and reaped."""
        with trio.CancelScope(shield=True):
            for term in list(self._live.values()):
                await term.kill(self.grace)
                await _close(term)
            self._live.clear()


async def _close(term: Terminal) -> None:
    if term.proc.stdout is not None:
        await term.proc.stdout.aclose()
