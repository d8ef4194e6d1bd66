"""A real ``cap model serve`` process for tests: start it, find its URL, stop it, inspect it."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import trio

SERVE = [sys.executable, "-m", "trio_cap.actors.cli", "model", "serve"]
_EXCEPTION_LINE = re.compile(r"^\s*(\w+\.)*\w*(Error|Exception|ExceptionGroup)\b[:(]",
                             re.MULTILINE)
BOUND = 60  # seconds any single command may take on a loaded 2-core machine


def run_serve(args: Sequence[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a ``cap model serve`` that must fail by itself, within the bound."""
    return subprocess.run([*SERVE, *args], capture_output=True, text=True, timeout=BOUND,
                          cwd=cwd, stdin=subprocess.DEVNULL)


def assert_one_line_failure(result: subprocess.CompletedProcess[str], code: int,
                            *needles: str) -> str:
    """Exit ``code``, exactly one line on stderr, nothing resembling a traceback."""
    everything = result.stdout + result.stderr
    assert "Traceback" not in everything, everything
    assert not _EXCEPTION_LINE.search(everything), everything
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert result.returncode == code, (result.returncode, result.stderr)
    assert lines[0].startswith("cap model serve: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@attrs.define
class Served:
    """A running server process and its address."""

    proc: trio.Process
    url: str
    host: str
    port: int
    stderr: bytearray = attrs.field(factory=bytearray)
    stderr_closed: trio.Event = attrs.field(factory=trio.Event)

    async def stop(self, signum: int = signal.SIGTERM, within: float = 15.0) -> tuple[int, float]:
        """Send ``signum``; the exit code and the seconds it took to exit."""
        start = trio.current_time()
        self.proc.send_signal(signum)
        with trio.fail_after(within):
            code = await self.proc.wait()
        return code, trio.current_time() - start


async def _drain(stream: trio.abc.ReceiveStream, served: Served) -> None:
    while chunk := await stream.receive_some(65536):
        served.stderr += chunk
    served.stderr_closed.set()


@asynccontextmanager
async def serving(args: Sequence[str] = ()) -> AsyncIterator[Served]:
    """Start the server, wait (bounded) for its URL line, kill it on every way out."""
    proc = await trio.lowlevel.open_process(
        [*SERVE, "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        out = b""
        with trio.fail_after(BOUND):
            while b"\n" not in out:
                chunk = await proc.stdout.receive_some(1000)
                assert chunk, "server exited before printing its URL"
                out += chunk
        first = out.decode().splitlines()[0]
        assert first.startswith("cap model serve: listening on http://127.0.0.1:"), first
        url = first.rsplit(" ", 1)[1]
        port = int(url.rsplit(":", 1)[1])
        served = Served(proc, url, "127.0.0.1", port)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, proc.stderr, served)
            yield served
            nursery.cancel_scope.cancel()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def rss_kib(pid: int) -> int:
    """Resident memory of a process, from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS line")


async def http_head(stream: trio.SocketStream, within: float = 15.0,
                    read_body: bool = True) -> tuple[int, bytes]:
    """Read one response: its status and its bytes (head, and body when it is sized)."""
    data = b""
    with trio.fail_after(within):
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some(65536)
            assert chunk, f"connection closed before a response: {data!r}"
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        for line in head.lower().split(b"\r\n") if read_body else []:
            if line.startswith(b"content-length:"):
                while len(body) < int(line.split(b":")[1]):
                    chunk = await stream.receive_some(65536)
                    assert chunk, f"connection closed mid-body: {data!r}"
                    body += chunk
                    data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data


def peak_rss_kib(pid: int) -> int:
    """The most memory the process ever held (VmHWM), from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM line")
