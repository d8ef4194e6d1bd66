"""Process-group hygiene: peers and everything they spawn die together."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import trio

from trio_cap.actors.peers.process import run_peer, spawn_peer

ENV = {"PATH": os.environ.get("PATH", os.defpath)}


async def wait_exited(pid: int) -> None:
    """Block until ``pid`` has exited (zombie or gone), via a pidfd: no polling."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        with trio.fail_after(10):
            await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)


async def test_orphan_holding_stdout_is_killed(tmp_path: Path) -> None:
    # The leader exits at once; its background child keeps stdout open and would
    # hang a plain reader forever.
    result = await run_peer(["sh", "-c", "sleep 300 & echo $!"], env=ENV, cwd=tmp_path,
                            seconds=60)
    assert result.returncode == 0 and not result.timed_out
    orphan = int(result.stdout.strip())
    await wait_exited(orphan)


async def test_timeout_keeps_partial_output(tmp_path: Path) -> None:
    result = await run_peer(["sh", "-c", "echo started; exec sleep 300"], env=ENV,
                            cwd=tmp_path, seconds=1)
    assert result.timed_out and result.returncode is None
    assert result.stdout == "started\n"
    assert "timed out" in result.describe()


async def test_stdin_data_and_exit_code(tmp_path: Path) -> None:
    result = await run_peer([sys.executable, "-c", "import sys; d=sys.stdin.read(); "
                             "print(d.upper()); sys.exit(3)"],
                            env=ENV, cwd=tmp_path, seconds=60, stdin_data=b"abc")
    assert (result.returncode, result.stdout) == (3, "ABC\n")


async def test_spawn_peer_escalates_to_sigkill(tmp_path: Path) -> None:
    script = "trap '' TERM; sleep 300 & echo $!; wait"
    async with spawn_peer(["sh", "-c", script], env=ENV, cwd=tmp_path, grace=0.2) as proc:
        assert proc.stdout is not None
        line = b""
        while not line.endswith(b"\n"):
            line += await proc.stdout.receive_some(100)
        child = int(line)
    # SIGTERM was ignored by the shell; after the grace period the group got SIGKILL.
    assert proc.returncode == -9
    await wait_exited(child)
