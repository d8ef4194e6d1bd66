"""Peers run in their own process group and die as a group.

npm bin wrappers (codex, codex-acp) are node scripts that spawn a native child,
and several agents ignore stdin EOF (peers.md), so killing the direct child is
not enough: an orphan keeps running and keeps our output pipes open.  Starting
each peer in a new session and signalling the whole group fixes both; the
group killing itself is the binding kit's (``bindings/process.py``), which
must not import this test-peers package.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import trio

from trio_cap.actors.bindings.process import kill_process_group


@asynccontextmanager
async def spawn_peer(
    argv: Sequence[str | os.PathLike[str]], *, env: Mapping[str, str], cwd: Path,
    grace: float = 5.0, stdin: int = subprocess.PIPE,
) -> AsyncIterator[trio.Process]:
    """A long-lived peer with pipes (for bindings); its group is killed on exit."""
    proc = await trio.lowlevel.open_process(
        [os.fspath(a) for a in argv], stdin=stdin, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=dict(env), cwd=cwd, start_new_session=True,
    )
    try:
        yield proc
    finally:
        await kill_process_group(proc, grace)


@attrs.frozen
class PeerRun:
    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool

    def describe(self) -> str:
        """Everything a failing test should show about the run."""
        state = "timed out" if self.timed_out else f"exit {self.returncode}"
        return (f"$ {' '.join(self.argv)}\n[{state}]\n--- stdout ---\n{self.stdout[-6000:]}\n"
                f"--- stderr ---\n{self.stderr[-6000:]}")


async def _drain(stream: trio.abc.ReceiveStream | None, sink: bytearray) -> None:
    if stream is None:
        return
    while chunk := await stream.receive_some(65536):
        sink.extend(chunk)


async def run_peer(
    argv: Sequence[str | os.PathLike[str]], *, env: Mapping[str, str], cwd: Path,
    seconds: float, stdin_data: bytes | None = None, grace: float = 5.0,
) -> PeerRun:
    """Run a one-shot peer to completion (or for ``seconds`` at most), output captured.

    Unlike ``trio.run_process`` a timeout keeps what was printed so far, which
    is what explains a hung agent.  stdin is /dev/null unless ``stdin_data`` is given.
    """
    args = tuple(os.fspath(a) for a in argv)
    proc = await trio.lowlevel.open_process(
        list(args), stdin=subprocess.DEVNULL if stdin_data is None else subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(env), cwd=cwd,
        start_new_session=True,
    )
    out, err = bytearray(), bytearray()
    timed_out = False
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, proc.stdout, out)
            nursery.start_soon(_drain, proc.stderr, err)
            with trio.move_on_after(seconds) as scope:
                if stdin_data is not None and proc.stdin is not None:
                    async with proc.stdin:
                        await proc.stdin.send_all(stdin_data)
                await proc.wait()
            timed_out = scope.cancelled_caught
            # Leftover children would hold the pipes open; end the group first.
            await kill_process_group(proc, grace)
    finally:
        await kill_process_group(proc, grace)
    return PeerRun(args, None if timed_out else proc.returncode,
                   out.decode(errors="replace"), err.decode(errors="replace"), timed_out)
