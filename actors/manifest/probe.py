"""``<binary> --cap-manifest``: ask a program for its own manifest, carefully.

Probing runs a program the user may never have meant to run, so it is fenced:
only plain names or absolute paths are probed (no shell, no metacharacters),
stdin is empty, output is capped, and the whole probe has a deadline after
which its entire process group is killed and reaped — a probe never leaves a
process behind.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
from collections.abc import Mapping

import trio

from trio_cap.actors.manifest.checks import PROGRAM_RULE, is_safe_program

DEFAULT_TIME_LIMIT = 5.0
DEFAULT_MAX_BYTES = 256 * 1024
FLAG = "--cap-manifest"


class ProbeFailed(Exception):
    """The program did not produce a manifest; ``reason`` says why, for the resolver's log."""

    def __init__(self, program: str, reason: str) -> None:
        self.program = program
        self.reason = reason
        super().__init__(f"{program} {FLAG}: {reason}")


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def probe_text(
    program: str,
    *,
    time_limit: float = DEFAULT_TIME_LIMIT,
    max_bytes: int = DEFAULT_MAX_BYTES,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run ``program --cap-manifest`` and return what it printed (UTF-8 text).

    ``program`` must already be a path or a plain name (it is exec'd, never
    given to a shell).  Raises :class:`ProbeFailed` on a spawn error, a
    non-zero exit, running past ``time_limit`` seconds, output over
    ``max_bytes``, or output that is not UTF-8.
    """
    if not is_safe_program(program):
        raise ProbeFailed(program, f"not probed: {PROGRAM_RULE}")
    try:
        proc = await trio.lowlevel.open_process(
            [program, FLAG],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group, so it can be killed whole
            env=dict(env) if env is not None else None,
        )
    except OSError as exc:
        raise ProbeFailed(program, f"cannot start: {exc.strerror or exc}") from None
    chunks: list[bytes] = []
    size = 0
    failure: str | None = None
    try:
        with trio.move_on_after(time_limit) as scope:
            assert proc.stdout is not None
            while True:
                chunk = await proc.stdout.receive_some(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > max_bytes:
                    failure = f"output exceeds {max_bytes} bytes"
                    break
                chunks.append(chunk)
            if failure is None:
                await proc.wait()
        if scope.cancelled_caught:
            failure = f"no answer within {_seconds(time_limit)}"
    finally:
        with trio.CancelScope(shield=True):
            if proc.returncode is None:
                _kill_group(proc.pid)  # not reaped yet: the group id is still ours
            await proc.wait()
            _kill_group(proc.pid)  # anything it left running in its group
            if proc.stdout is not None:
                await proc.stdout.aclose()
    if failure:
        raise ProbeFailed(program, failure)
    if proc.returncode != 0:
        raise ProbeFailed(program, f"exited with status {proc.returncode}")
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise ProbeFailed(program, "printed something that is not UTF-8 text") from None


def _seconds(value: float) -> str:
    return f"{value:g} s" if math.isfinite(value) else "forever"
