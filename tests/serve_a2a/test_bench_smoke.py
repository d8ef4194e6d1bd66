"""``python -m bench a2a --quick`` runs end to end and prints its figures (none asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def test_a2a_bench_quick_runs_and_prints() -> None:
    out = subprocess.run([sys.executable, "-m", "bench", "a2a", "--quick"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert [(row[0], row[1]) for row in rows] == [("1", "trio-cap"), ("1", "a2a-sdk"),
                                                  ("4", "trio-cap"), ("4", "a2a-sdk")]
    assert all(row[-1] == "501" for row in rows)  # every subscriber got every event
