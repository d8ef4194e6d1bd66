"""``python -m bench replay --quick`` runs end to end and prints its figures (none asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def test_replay_bench_quick_runs_and_prints() -> None:
    out = subprocess.run([sys.executable, "-m", "bench", "replay", "--quick"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "replay --check, end to end" in out.stdout and "target ≥ 300,000/s" in out.stdout
    assert "PTY recording cost" in out.stdout
    assert "--record frames" in out.stdout and "--record off" in out.stdout
