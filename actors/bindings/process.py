"""The one subprocess shell every process binding (stream-json, ACP, PTY …) stands on.

A binding's machine only sees bytes; this module owns the process that makes
them, so the rules that keep the host clean live in one place:

* every agent is spawned as the leader of a **new process group** (its tools
  spawn children, npm wrappers spawn a native child, several agents ignore
  stdin EOF: only signalling the whole group reliably ends all of them);
* a spawn that fails (missing program, not executable, missing ``cwd``) is a
  :class:`~trio_cap.actors.connection.ConnectError` with a one-line message,
  so the next binding can be tried and the user reads why;
* leaving :func:`spawn_agent` by **any** path — normal close, an error, the
  caller's cancellation — runs :meth:`AgentProcess.terminate` shielded:
  stdin EOF → ``grace`` → SIGTERM to the group → ``grace`` → SIGKILL → reaped;
* while a group is alive it is in a process-wide registry, so a signal handler
  or ``atexit`` (the orchestrator itself receiving SIGTERM/SIGHUP, where no
  ``finally`` may run) can end every agent with :func:`kill_live_groups`;
* writes are serialised and a dead agent's broken pipe is not an error (the
  stdout reader reports the death, once, with the reason);
* stderr is kept within a budget as ``agent.raw`` events, and its last bytes
  explain a crash in :meth:`AgentProcess.describe_exit`.

Lifecycle of one :class:`AgentProcess`::

    spawn ──► running ──(stdout EOF)──► draining ──(exit/reap)──► exited
       │          └──────────── terminate() at any point ──────────────┘
       └─ OSError → ConnectError (nothing left running)
"""

from __future__ import annotations

import atexit
import codecs
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager

import trio

from trio_cap.actors.connection import ConnectError
from trio_cap.events.kinds import AgentRaw, Event

STDERR_BUDGET = 64 * 1024
"""stderr bytes kept in the log per session as ``agent.raw``; the rest is only counted."""
STDERR_TAIL = 2048
"""stderr bytes kept in memory to explain a crash."""
READ_SIZE = 256 * 1024
"""One read from a pipe: large, because every read becomes one batch downstream."""

_LIVE: dict[int, trio.Process] = {}
"""Process groups spawned here and not yet reaped: pgid (= leader pid) → leader."""


# ---- the process-wide registry of live groups --------------------------------------


def live_groups() -> list[int]:
    """The process groups of agents that are running now (for tests and diagnostics)."""
    return list(_LIVE)


def track_group(proc: trio.Process) -> None:
    """Put a group spawned elsewhere (the PTY binding's) in the registry of live groups;
    :func:`kill_process_group` takes it out once reaped."""
    _LIVE[proc.pid] = proc


def kill_live_groups(signum: int = signal.SIGKILL) -> int:
    """Send ``signum`` to every live agent group; returns how many were signalled.

    Safe in a signal handler and in ``atexit``: no await, no lock, only
    ``os.killpg``.  The CLI calls it when the orchestrator itself is told to
    go (SIGTERM/SIGHUP) after its graceful path has had its chance; the normal
    path never needs it because :func:`spawn_agent` reaps on every exit.
    """
    count = 0
    for pgid in list(_LIVE):
        if _signal_group(pgid, signum):
            count += 1
    return count


atexit.register(kill_live_groups)  # an interpreter exiting past our finally blocks


def _signal_group(pgid: int, signum: int) -> bool:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def kill_process_group(proc: trio.Process, grace: float = 5.0) -> None:
    """SIGTERM the group, give the leader ``grace`` seconds, then SIGKILL what is left.

    Also used after a clean exit: it ends children the leader left behind.
    Shielded, because it is what runs when the caller is being cancelled.
    """
    pgid = proc.pid  # start_new_session=True makes the child its group's leader
    with trio.CancelScope(shield=True):
        if proc.returncode is None and _signal_group(pgid, signal.SIGTERM):
            with trio.move_on_after(grace):
                await proc.wait()
        _signal_group(pgid, signal.SIGKILL)
        await proc.wait()
    _LIVE.pop(pgid, None)


# ---- stderr within a budget ---------------------------------------------------------


class StderrBudget:
    """Turns stderr chunks into ``agent.raw`` events up to a byte budget, keeping a tail.

    Pure (no I/O), so the budget arithmetic is tested without a process.  The
    decoder is incremental: a UTF-8 character cut between two reads is not
    turned into two replacement characters.
    """

    def __init__(self, binding: str, budget: int = STDERR_BUDGET,
                 tail: int = STDERR_TAIL) -> None:
        self.binding = binding
        self.budget = budget
        self.kept = 0
        self.dropped = 0
        self._tail_size = tail
        self._tail = b""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    @property
    def tail(self) -> str:
        """The last bytes of stderr, decoded and stripped (for the exit description)."""
        return self._tail.decode("utf-8", errors="replace").strip()

    def feed(self, data: bytes) -> list[Event]:
        self._tail = (self._tail + data)[-self._tail_size:]
        room = self.budget - self.kept
        if room <= 0:
            self.dropped += len(data)
            return []
        piece = data[:room]
        self.kept += len(piece)
        self.dropped += len(data) - len(piece)
        text = self._decoder.decode(piece, final=len(piece) < len(data))
        if not text:
            return []
        return [AgentRaw(binding=self.binding, reason="stderr", source="stderr", text=text)]

    def finish(self) -> list[Event]:
        out: list[Event] = []
        rest = self._decoder.decode(b"", final=True)
        if rest:
            out.append(AgentRaw(binding=self.binding, reason="stderr", source="stderr",
                                text=rest))
        if self.dropped:
            out.append(AgentRaw(
                binding=self.binding, reason="stderr_truncated", source="stderr",
                text=f"{self.dropped} more bytes of stderr were not kept",
                truncated=self.dropped))
        return out


# ---- one agent process ----------------------------------------------------------------


class AgentProcess:
    """A spawned agent with its three pipes; created by :func:`spawn_agent` only."""

    def __init__(self, proc: trio.Process, *, binding: str, grace: float,
                 stderr_budget: int = STDERR_BUDGET) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.grace = grace
        self.stderr = StderrBudget(binding, stderr_budget)
        self.stderr_done = trio.Event()
        """Set when stderr reached EOF (or its reader stopped): the tail is complete."""
        self._write_lock = trio.Lock()
        self._terminated = False

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    # ---- stdin ----------------------------------------------------------------
    async def write(self, data: bytes) -> bool:
        """Write ``data`` whole, in order with other writers; False if the agent is gone."""
        stdin = self.proc.stdin
        if not data or stdin is None:
            return stdin is not None
        async with self._write_lock:
            try:
                await stdin.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return False  # the agent is gone; the stdout reader reports why
        return True

    async def close_stdin(self) -> None:
        """EOF to the agent.  Not under the write lock: a writer blocked on a full
        pipe (an agent that stopped reading) is woken with ClosedResourceError
        instead of holding up the close forever."""
        if self.proc.stdin is not None:
            try:
                await self.proc.stdin.aclose()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

    # ---- stdout / stderr --------------------------------------------------------
    async def pump_stdout(self, feed: Callable[[bytes], Awaitable[None]],
                          read_size: int = READ_SIZE) -> None:
        """Hand every chunk read from stdout to ``feed`` until EOF (chunk = one batch).

        EOF is guaranteed to come once the agent has exited: a child it left
        behind that still holds the pipe (a tool's background process) gets
        ``grace`` seconds, then the group is killed, so a dead agent is always
        reported instead of a session waiting forever on an orphan.
        """
        stdout = self.proc.stdout
        assert stdout is not None
        async with open_task_group() as tasks:
            tasks.start_soon(self._end_leftovers_after_exit)
            while data := await stdout.receive_some(read_size):
                await feed(data)

    async def _end_leftovers_after_exit(self) -> None:
        await self.proc.wait()
        await trio.sleep(self.grace)  # still reading: something else holds the pipe
        # The group outlives its reaped leader only while members are left, so its
        # id cannot have been reused: this signals the leftovers and no one else.
        _signal_group(self.pid, signal.SIGKILL)

    async def pump_stderr(self, emit: Callable[[list[Event]], Awaitable[None]],
                          read_size: int = READ_SIZE) -> None:
        """Read stderr to EOF: budgeted ``agent.raw`` events to ``emit``, the tail kept."""
        stderr = self.proc.stderr
        assert stderr is not None
        try:
            while data := await stderr.receive_some(read_size):
                if events := self.stderr.feed(data):
                    await emit(events)
            if events := self.stderr.finish():
                await emit(events)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # our pipe end was closed (terminate) or nobody listens any more
        finally:
            self.stderr_done.set()

    # ---- waiting on the agent -----------------------------------------------------
    async def wait_for(self, done: trio.Event, seconds: float) -> None:
        """Wait up to ``seconds`` for ``done`` (a handshake's answer), but not for an agent
        that has exited: an exit ends the wait after a moment for its last output (at most
        1 s), even while a child it left behind holds its stdout open.  The caller then
        reads ``returncode`` / :meth:`describe_exit` to say which it was."""
        async def exited() -> None:
            await self.proc.wait()
            with trio.move_on_after(min(1.0, self.grace)):
                await done.wait()
            nursery.cancel_scope.cancel()

        with trio.move_on_after(seconds):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(exited)
                await done.wait()
                nursery.cancel_scope.cancel()

    # ---- exit -------------------------------------------------------------------
    async def wait_exit(self, within: float | None = None) -> int | None:
        """Wait (at most ``within`` s, default ``grace``) for exit and the stderr tail."""
        with trio.move_on_after(self.grace if within is None else within):
            await self.stderr_done.wait()
            await self.proc.wait()
        return self.proc.returncode

    def describe_exit(self) -> str:
        """Why the agent is gone, in one line: exit code or signal name, then stderr."""
        code = self.proc.returncode
        if code is None:
            what = "the agent closed its output but did not exit"
        elif code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            what = f"the agent was killed by {name}"
        else:
            what = f"the agent exited with code {code}"
        tail = " ".join(self.stderr.tail.split())
        return f"{what}; stderr: {tail[-500:]}" if tail else what

    async def terminate(self, *, graceful: bool = True) -> None:
        """stdin EOF → ``grace`` → SIGTERM to the group → ``grace`` → SIGKILL; reaped.

        ``graceful=False`` skips the first wait (an agent that failed its
        handshake owes us no orderly exit).

        Shielded: it is what runs while the caller is being cancelled, and an
        agent left running would outlive the orchestrator.  Idempotent: the group
        is signalled once, never again after its leader was reaped (its pid may
        be reused).
        """
        if self._terminated:
            return
        self._terminated = True
        with trio.CancelScope(shield=True):
            await self.close_stdin()
            if graceful and self.proc.returncode is None:
                with trio.move_on_after(self.grace):
                    await self.proc.wait()
            await kill_process_group(self.proc, self.grace)


@asynccontextmanager
async def open_task_group() -> AsyncIterator[trio.Nursery]:
    """A nursery for a connection's reader tasks, safe to ``yield`` a connection inside.

    Two trio traps every connector would otherwise meet: the caller's own
    exception, thrown in at the connector's ``yield``, comes out of a nursery
    wrapped in an ExceptionGroup (here it comes out as itself when it is the
    only one); and a checkpoint after cancelling the nursery while an
    exception propagates replaces that exception with a Cancelled the nursery
    then swallows (here the cancel is the very last step).  The tasks are
    cancelled when the block ends.
    """
    thrown: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            try:
                yield nursery
            except BaseException as exc:
                thrown = exc
                raise
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The tasks' Cancelled are our own cancel's (an outer one is re-delivered at the
        # caller's next checkpoint): what matters is whether the caller's error is alone.
        _, rest = group.split(trio.Cancelled)
        if thrown is not None and rest is not None and list(rest.exceptions) == [thrown]:
            raise thrown  # noqa: B904 - the caller's exception, as it was thrown
        raise


def describe_spawn_error(argv0: str, cwd: str | os.PathLike[str] | None, exc: OSError) -> str:
    """One readable line for a failed spawn, with what to do about it."""
    reason = exc.strerror or str(exc)
    if isinstance(exc, FileNotFoundError):
        if cwd is not None and exc.filename is not None and os.fspath(exc.filename) == os.fspath(
                cwd):
            return f"cannot start {argv0!r}: the working directory {os.fspath(cwd)!r} " \
                   "does not exist"
        return (f"cannot start {argv0!r}: program not found (install it, or put it on PATH; "
                "for a real agent `cap peers install NAME` installs it)")
    if isinstance(exc, PermissionError):
        return f"cannot start {argv0!r}: permission denied (is it an executable file?)"
    return f"cannot start {argv0!r}: {reason}"


@asynccontextmanager
async def spawn_agent(
    argv: Sequence[str | os.PathLike[str]], *, cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None, binding: str, grace: float = 5.0,
    stderr_budget: int = STDERR_BUDGET,
) -> AsyncIterator[AgentProcess]:
    """Spawn ``argv`` with pipes in a new process group; ended and reaped on every exit.

    Raises :class:`ConnectError` (one line, nothing left running) when the
    program cannot be started.
    """
    args = [os.fspath(a) for a in argv]
    if not args:
        raise ConnectError("cannot start the agent: its command is empty")
    try:
        proc = await trio.lowlevel.open_process(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=cwd, env=None if env is None else dict(env), start_new_session=True)
    except OSError as exc:
        raise ConnectError(describe_spawn_error(args[0], cwd, exc)) from None
    _LIVE[proc.pid] = proc
    agent = AgentProcess(proc, binding=binding, grace=grace, stderr_budget=stderr_budget)
    try:
        yield agent
    finally:
        await agent.terminate()
        with trio.CancelScope(shield=True):
            for stream in (proc.stdout, proc.stderr):  # the readers are done by now
                if stream is not None:
                    await stream.aclose()
