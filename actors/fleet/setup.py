"""Setup steps in a member's new working directory, before its agent starts.

A fresh worktree has the tracked files only: no ``.env``, no ``node_modules``.  An agent
started there fails in ways that look like its own fault, so the fleet file names what
each working directory needs and the fleet does it first — every step an event with its
exit status, and a failing step stops the run before any agent is spent on it.

Commands run with the working directory as cwd, stdin closed, in a process group of
their own (a timeout kills the whole group, grandchildren included), their output kept
in a file and only its tail in the event, so a chatty install cannot fill memory.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from trio_cap.actors.fleet.model import Setup
from trio_cap.events.kinds import FleetSetup

TAIL_LINES = 5
TAIL_CHARS = 2000


async def run_setup(setup: Setup, member: str, source: str, workdir: str,
                    emit: Callable[[FleetSetup], Awaitable[object]]) -> FleetSetup | None:
    """Every step in order, each emitted; the first failed step (then stop), or None."""
    step = 0
    for rel in setup.copy:
        step += 1
        started = trio.current_time()
        detail = await trio.to_thread.run_sync(_copy, Path(source), Path(workdir), rel)
        event = FleetSetup(member=member, step=step, action="copy", what=rel,
                           ok=detail is None, detail=detail or "",
                           duration_ms=_ms(started))
        await emit(event)
        if not event.ok:
            return event
    for argv in setup.run:
        step += 1
        event = await _command(member, step, argv, workdir, setup.timeout_s)
        await emit(event)
        if not event.ok:
            return event
    return None


def _ms(started: float) -> int:
    return int((trio.current_time() - started) * 1000)


def _copy(source: Path, workdir: Path, rel: str) -> str | None:
    """Why ``rel`` could not be copied, or None."""
    src, dst = source / rel, workdir / rel
    if not src.exists():
        return f"{src} does not exist"
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(src, dst)
    except OSError as exc:
        return f"cannot copy {src}: {exc.strerror or exc}"
    return None


async def _command(member: str, step: int, argv: tuple[str, ...], workdir: str,
                   limit_s: float) -> FleetSetup:
    what = shlex.join(argv)
    started = trio.current_time()
    code: int | None = None
    detail = ""
    with tempfile.TemporaryFile() as output:
        try:
            with trio.move_on_after(limit_s) as scope:
                result = await trio.run_process(
                    list(argv), cwd=workdir, check=False, stdin=subprocess.DEVNULL,
                    stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
                    deliver_cancel=_kill_group)
                code = result.returncode
        except OSError as exc:  # not found, not executable
            detail = f"cannot run {argv[0]}: {exc.strerror or exc}"
        else:
            tail = _tail(output)
            if scope.cancelled_caught:
                detail = f"killed after {limit_s:g} s (setup.timeout_s)"
            elif code != 0:
                detail = f"exited with {code}"
            if detail and tail:
                detail += f": {tail}"
    return FleetSetup(member=member, step=step, action="run", what=what,
                      ok=code == 0 and not detail, exit_code=code, detail=detail,
                      duration_ms=_ms(started))


def _tail(output) -> str:
    output.seek(0, os.SEEK_END)
    size = output.tell()
    output.seek(max(0, size - TAIL_CHARS))
    text = output.read().decode("utf-8", errors="replace")
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-TAIL_LINES:])


async def _kill_group(process: trio.Process) -> None:
    """On timeout: the whole group at once — an install that forks must not outlive it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    await process.wait()
