"""Readers stream: ``cap log show`` and ``cap replay`` on a log far larger than their memory."""

from __future__ import annotations

import subprocess
import sys

import pytest
import trio

from trio_cap.events.kinds import TextChunk
from trio_cap.events.log import FileEventLog

SIZE_MB = 160
BOUND_MB = 110  # an interpreter with trio-cap loaded is ~45 MB; the file alone is 160


async def _write(path) -> None:
    log = FileEventLog(path, fsync="never")
    pad = "y" * 1000
    for b in range(SIZE_MB):
        await log.append([TextChunk(message_id=f"m{b}", text=f"{b} {i} {pad}")
                          for i in range(1000)], stream="s")
    await log.aclose()


def peak_rss_mb(args: list[str]) -> tuple[int, int]:
    """(exit code, peak RSS in MB) of ``cap ARGS``, measured by a fresh parent."""
    probe = ("import resource, subprocess, sys; "
             "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
             "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m",
                          "trio_cap.actors.cli", *args], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    return int(out[0]), int(out[1]) // 1024


@pytest.mark.parametrize("command", [["log", "show"], ["log", "show", "--json"], ["replay"]])
def test_reading_a_large_log_keeps_memory_flat(tmp_path_factory, command):
    path = tmp_path_factory.getbasetemp() / "large.caplog"
    if not path.exists():
        trio.run(_write, path)
    assert path.stat().st_size > SIZE_MB * 1_000_000
    code, peak = peak_rss_mb([*command, str(path)])
    assert code == 0 and peak < BOUND_MB, f"{command}: {peak} MB"
