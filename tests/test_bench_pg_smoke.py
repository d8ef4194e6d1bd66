"""``python -m bench log --backend postgres --quick`` runs end to end against a throwaway
server and prints every figure with its ratio (none asserted: figures are not tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_postgres_log_bench_quick_runs_and_prints_every_figure() -> None:
    out = subprocess.run([sys.executable, "-m", "bench", "log", "--backend", "postgres",
                          "--quick"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines() if line[:6].strip().isdigit()]
    assert [int(r[0]) for r in rows] == [1, 100, 1000]
    assert all(r[4].endswith("x") for r in rows)  # a ratio against eventsourcing on each
    assert "commit floor" in out.stdout
    assert "p50" in out.stdout and "p99" in out.stdout and "replay:" in out.stdout
