"""A program on a pseudo-terminal: the PTY binding's process and terminal, for Trio.

The process rules are :mod:`..process`'s (one registry of live groups, the
same SIGTERM → grace → SIGKILL of the whole group, always reaped); what
differs is the plumbing:

* the child gets a new session with the PTY's slave as its **controlling
  terminal** (``setsid`` by ``start_new_session``, then ``TIOCSCTTY`` in a
  one-line ``preexec_fn``), stdin/stdout/stderr all on the slave, the window
  size set before it starts and ``TERM=xterm-256color``;
* the master is read through Trio's ``wait_readable`` (no threads): a read
  returns what is there, and ``EIO`` (Linux's answer once every slave
  descriptor is closed) is an end of output, **not** a death: liveness is the
  child's exit status, which :meth:`PtyProcess.wait` reaps;
* writes go through the same master, in order, under a lock; a write to a
  program that is gone returns False (the exit is reported once, elsewhere);
* :meth:`resize` sets the window size (``TIOCSWINSZ``) and sends SIGWINCH to
  the foreground group (the kernel does too; this covers programs that look
  only at the signal);
* ending: SIGHUP to the group first (what closing a terminal does: an
  interactive bash ignores SIGTERM but not SIGHUP), then :func:`kill_process_group`.
  Leaving :func:`spawn_pty` by any path ends the group and closes the master.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import struct
import termios
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

import trio

from trio_cap.actors.bindings.process import (
    describe_spawn_error,
    kill_process_group,
    track_group,
)
from trio_cap.actors.connection import ConnectError

READ_SIZE = 64 * 1024
TERM = "xterm-256color"


def _set_size(fd: int, cols: int, rows: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _take_controlling_tty() -> None:  # runs in the child, after setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def describe_status(code: int | None) -> str:
    """An exit status in words: ``exited with code 3`` / ``was killed by SIGKILL``."""
    if code is None:
        return "is still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with code {code}"


def _session_members(sid: int) -> list[int]:
    """Pids still in session ``sid`` (Linux ``/proc``; elsewhere none are found)."""
    members = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 3 and int(fields[3]) == sid:
            members.append(int(name))
    return members


def _kill_session(sid: int) -> None:
    """SIGKILL what is left of the program's session: an interactive shell puts each job
    in a process group of its own, and a running background job in an orphaned group gets
    no SIGHUP from the kernel, so ending the leader's group alone would leave it running."""
    for pid in _session_members(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class PtyProcess:
    """A spawned program and the master side of its terminal; made by :func:`spawn_pty`."""

    def __init__(self, proc: trio.Process, master: int, *, grace: float) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.master = master
        self.grace = grace
        self._write_lock = trio.Lock()
        self._closed = False
        self._terminated = False

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    async def read(self, size: int = READ_SIZE) -> bytes:
        """The next bytes from the terminal; ``b""`` once output has ended (EOF or EIO)."""
        while not self._closed:
            try:
                data = os.read(self.master, size)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(self.master)
                continue
            except OSError as exc:
                if exc.errno in (errno.EIO, errno.EBADF):
                    return b""  # every slave descriptor is closed: output ended
                raise
            return data
        return b""

    async def write(self, data: bytes) -> bool:
        """Write ``data`` whole and in order; False when the program can no longer take it."""
        view = memoryview(data)
        async with self._write_lock:
            while view and not self._closed:
                try:
                    n = os.write(self.master, view)
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(self.master)
                    continue
                except OSError:
                    return False  # gone (EIO) or closed: the exit watcher reports it
                view = view[n:]
        return not view

    def resize(self, cols: int, rows: int) -> None:
        if self._closed:
            return
        _set_size(self.master, cols, rows)
        try:
            os.killpg(os.tcgetpgrp(self.master), signal.SIGWINCH)
        except OSError:
            pass  # no foreground group (the program is exiting)

    def signal_group(self, signum: int) -> bool:
        if self.proc.returncode is not None:
            return False
        try:
            os.killpg(self.pid, signum)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    async def wait(self) -> int:
        return await self.proc.wait()

    async def terminate(self, *, graceful: bool = True) -> None:
        """SIGHUP → ``grace`` → SIGTERM → ``grace`` → SIGKILL to the group; reaped. Shielded,
        idempotent; ``graceful=False`` starts at SIGTERM (a hard cancel)."""
        if self._terminated:
            return
        self._terminated = True
        with trio.CancelScope(shield=True):
            if graceful and self.signal_group(signal.SIGHUP):
                with trio.move_on_after(self.grace):
                    await self.proc.wait()
            await kill_process_group(self.proc, self.grace)
            _kill_session(self.pid)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        trio.lowlevel.notify_closing(self.master)
        os.close(self.master)


@asynccontextmanager
async def spawn_pty(
    argv: Sequence[str | os.PathLike[str]], *, cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None, cols: int, rows: int, grace: float = 5.0,
) -> AsyncIterator[PtyProcess]:
    """Start ``argv`` on a new pseudo-terminal (see the module rules); ended on every exit.

    Raises :class:`ConnectError` (one line, nothing left running) when the program
    cannot be started.
    """
    args = [os.fspath(a) for a in argv]
    if not args:
        raise ConnectError("cannot start the agent: its command is empty")
    environ = dict(os.environ if env is None else env)
    environ["TERM"] = TERM
    environ["COLUMNS"], environ["LINES"] = str(cols), str(rows)
    master, slave = os.openpty()
    try:
        _set_size(slave, cols, rows)
        proc = await trio.lowlevel.open_process(
            args, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=environ,
            start_new_session=True, preexec_fn=_take_controlling_tty)
    except OSError as exc:
        os.close(master)
        raise ConnectError(describe_spawn_error(args[0], cwd, exc)) from None
    finally:
        os.close(slave)
    os.set_blocking(master, False)
    track_group(proc)
    pty = PtyProcess(proc, master, grace=grace)
    try:
        yield pty
    finally:
        await pty.terminate()
        pty.close()
