"""``python -m bench pty --quick`` runs end to end and prints its figures (none asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_pty_bench_quick_runs_and_prints_every_figure() -> None:
    out = subprocess.run([sys.executable, "-m", "bench", "pty", "--quick"], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.count("pyte HistoryScreen, 10,000 lines history (peer)") == 2
    assert text.count("TuiVtScreen, 10,000 lines scrollback") == 2
    assert text.count("target ≥ 3×") == 2
    assert "identical" in text and "DIFFERENT" not in text  # same text as the peer keeps
    assert "settle overhead beyond the 200 ms idle window" in text and "target < 20 ms" in text
    assert "one settle decision" in text
