"""The ACP rows of ``python -m bench frames`` run end to end and print (no figure asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_acp_bench_quick_runs_and_compares_with_the_sdk() -> None:
    out = subprocess.run([sys.executable, "-c", "from bench import acp_bench; "
                          "acp_bench.run(quick=True)"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert "json.loads of each line" in out.stdout
    assert "ACP Python SDK 0.12.1" in out.stdout
    assert "× the official SDK" in out.stdout
