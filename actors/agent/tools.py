"""The scripted brain's real tools: files are written and commands run in the cwd."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
from pathlib import Path

import trio

from trio_cap.events.errors import NUMERIC_CODES

OUTPUT_CAP = 64 * 1024


class ToolError(Exception):
    """The tool ran and failed; the message goes back as the tool result."""


class ScopeViolation(ToolError):
    """A path that leaves the workspace once symlinks are followed: the coding profile's
    ``cap_scope_violation``.  The risk rating refuses such requests before they run; this
    is the second line, at the point of use, for what changed in between or was approved
    by hand."""

    code = NUMERIC_CODES["cap_scope_violation"].symbol
    number = NUMERIC_CODES["cap_scope_violation"].code

    def __init__(self, path: str) -> None:
        super().__init__(f"{self.code} ({self.number}): {path} is outside the workspace")


def resolve_inside(cwd: str, path: str) -> Path:
    """``path`` relative to ``cwd`` after resolving symlinks; refuses anything outside.

    The refusal is the same whether or not the outside path exists (coding profile §7.1),
    and a path that cannot be resolved (a symlink loop, a NUL byte) is refused too.
    """
    try:
        root = Path(cwd).resolve()
        full = (root / path).resolve()
    except (OSError, RuntimeError, ValueError):
        raise ScopeViolation(path) from None
    if full != root and root not in full.parents:
        raise ScopeViolation(path)
    return full


def write_file(cwd: str, path: str, content: str) -> str:
    target = resolve_inside(cwd, path)
    data = content.encode()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target = resolve_inside(cwd, path)  # mkdir may have raced with a new symlink
        _write_no_follow(target, data)
    except ScopeViolation:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ScopeViolation(path) from None
        raise ToolError(f"cannot write {path}: {exc.strerror or exc}") from None
    return f"wrote {len(data)} bytes to {path}"


def _write_no_follow(target: Path, data: bytes) -> None:
    """Write without following a symlink put in place after the check (O_NOFOLLOW)."""
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def edit_file(cwd: str, path: str, old: str, new: str) -> str:
    target = resolve_inside(cwd, path)
    try:
        text = target.read_text()
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from None
    if old not in text:
        raise ToolError(f"{path} does not contain the text to replace")
    try:
        _write_no_follow(target, text.replace(old, new, 1).encode())
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ScopeViolation(path) from None
        raise ToolError(f"cannot write {path}: {exc.strerror or exc}") from None
    return f"edited {path}"


async def run_command(cwd: str, command: str, seconds: float) -> tuple[int | None, str]:
    """Exit code (None on timeout) and combined output, capped; the process group dies on cancel."""

    async def kill_group(proc: trio.Process) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    with trio.move_on_after(seconds) as scope:
        result = await trio.run_process(
            ["/bin/sh", "-c", command],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            stderr=subprocess.STDOUT,
            check=False,
            start_new_session=True,
            deliver_cancel=kill_group,
        )
    if scope.cancelled_caught:
        return None, f"timed out after {seconds:g}s"
    output = result.stdout.decode(errors="replace")
    if len(output) > OUTPUT_CAP:
        output = output[:OUTPUT_CAP] + f"\n… ({len(output) - OUTPUT_CAP} more characters cut)"
    return result.returncode, output


class LocalTools:
    """The tools run here, in the agent's own process (the default tool host)."""

    async def write_file(self, cwd: str, path: str, content: str) -> str:
        return write_file(cwd, path, content)

    async def edit_file(self, cwd: str, path: str, old: str, new: str) -> str:
        return edit_file(cwd, path, old, new)

    async def run_command(self, cwd: str, command: str,
                          seconds: float) -> tuple[int | None, str]:
        return await run_command(cwd, command, seconds)
