"""``python -m bench acp-agent --quick`` runs end to end (its figures are printed, never
asserted) and its built-in check — trio-cap's lines decode to the SDK's updates — passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def test_acp_agent_bench_quick_runs_and_prints() -> None:
    out = subprocess.run([sys.executable, "-m", "bench", "acp-agent", "--quick"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "official Python SDK" in out.stdout and "× the SDK" in out.stdout
    assert "5,300 session/update lines" in out.stdout
