"""Shared bits of the replay tests: the CLI as a real process, and logs read back."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from trio_cap.actors.replay.check import group_sessions
from trio_cap.events.envelope import Envelope
from trio_cap.events.log import FileEventLog

CAP = [sys.executable, "-m", "trio_cap.actors.cli"]
BOUND = 120.0
VENV_BIN = str(Path(sys.executable).parent)
WITH_CAP = {**os.environ, "PATH": os.pathsep.join([VENV_BIN, os.environ.get("PATH", "")])}
NO_AGENTS = {**os.environ, "PATH": "/usr/bin:/bin"}
"""No agent on PATH (no ``cap``, no ``claude``): what the --check machine has."""


def cap(*args: str, cwd: Path, env: dict | None = None, timeout: float = BOUND,
        **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*CAP, *args], cwd=cwd, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout, env=env or WITH_CAP, **kw)


def read_log(path: Path) -> list[Envelope]:
    log = FileEventLog(path, readonly=True)
    try:
        return log.read()
    finally:
        log.close()


def sessions_of(path: Path) -> dict[str, list[Envelope]]:
    return group_sessions([read_log(path)])


def assert_clean(result: subprocess.CompletedProcess, code: int, message: str = "") -> None:
    both = result.stdout + result.stderr
    assert result.returncode == code, both
    assert message in both, both
    assert "Traceback" not in both and "ExceptionGroup" not in both, both


def until_printed(proc: subprocess.Popen, wanted: Callable[[dict], bool], what: str) -> dict:
    """The first event a ``cap run --json`` child printed that ``wanted`` accepts.

    The child prints an event only once its log has stored it, so this waits on the
    writer itself instead of polling its log file; bounded by ``BOUND``.  It reads the
    raw descriptor (``os.read``): a buffered ``readline`` could keep the wanted line in
    its buffer while ``select`` waits for bytes the child may never write."""
    fd = proc.stdout.fileno()  # type: ignore[union-attr]
    deadline = time.monotonic() + BOUND
    pending = b""
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break  # the child closed its stdout: it ended without printing it
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            event = json.loads(line)
            if wanted(event):
                return event
    raise AssertionError(f"the run never printed {what} (exit {proc.poll()})")
