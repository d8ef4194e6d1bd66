"""``python -m bench sessions --quick`` runs end to end and prints its figures (none asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_sessions_bench_quick_runs_and_prints() -> None:
    out = subprocess.run([sys.executable, "-m", "bench", "sessions", "--quick"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "cores" in out.stdout and "Python" in out.stdout
    assert "N=   100" in out.stdout and "N= 1,000" in out.stdout
    assert out.stdout.count("errors 0") == 4  # both sizes, both collector settings
    assert "gc tuned" in out.stdout and "gc default" in out.stdout
    assert "target < 20" in out.stdout and "target within 20 %" in out.stdout
