"""The scripted brain's real tools: files are written and commands run in the cwd."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import trio

OUTPUT_CAP = 64 * 1024


class ToolError(Exception):
    """The tool ran and failed; the message goes back as the tool result."""


def resolve_inside(cwd: str, path: str) -> Path:
    """``path`` relative to ``cwd`` after resolving symlinks; refuses anything outside.

    The refusal does not say whether the outside path exists (coding profile §7.1).
    """
    root = Path(cwd).resolve()
    full = (root / path).resolve()
    if full != root and root not in full.parents:
        raise ToolError(f"cap_scope_violation: {path} is outside the workspace")
    return full


def write_file(cwd: str, path: str, content: str) -> str:
    target = resolve_inside(cwd, path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode()
        target.write_bytes(data)
    except OSError as exc:
        raise ToolError(f"cannot write {path}: {exc.strerror or exc}") from None
    return f"wrote {len(data)} bytes to {path}"


def edit_file(cwd: str, path: str, old: str, new: str) -> str:
    target = resolve_inside(cwd, path)
    try:
        text = target.read_text()
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from None
    if old not in text:
        raise ToolError(f"{path} does not contain the text to replace")
    target.write_text(text.replace(old, new, 1))
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
