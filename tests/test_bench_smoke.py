"""``python -m bench all --quick --json F --plot D`` runs every bench end to end and prints
its figures (none asserted: benches measure, tests do not time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.__main__ import BENCHES

ROOT = Path(__file__).resolve().parent.parent


def test_bench_all_quick_runs_every_bench_and_writes_figures_and_charts(tmp_path) -> None:
    figures, charts = tmp_path / "figures.json", tmp_path / "charts"
    out = subprocess.run([sys.executable, "-m", "bench", "all", "--quick", "--json",
                          str(figures), "--plot", str(charts)], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    assert "cores" in out.stdout and "Python" in out.stdout
    for name in BENCHES:
        assert f"  ({name}: " in out.stdout, name  # every bench ran to its end
    data = json.loads(figures.read_text())
    assert set(data["benches"]) == set(BENCHES) and data["machine"]["cores"] >= 1
    sessions = data["benches"]["sessions"]["returned"]
    assert {r["gc"] for r in sessions} == {"tuned", "default", "tuned-postgres"}
    assert all(r["errors"] == 0 for r in sessions)  # every turn of every size completed
    assert "target < 20" in out.stdout and "target within 20 %" in out.stdout
    assert data["benches"]["frames"]["rows"], "frames printed no rows"
    assert "missing 0" in out.stdout  # faults: kill -9 trials ran
    for png in ("sessions-latency.png", "decode-ratios.png"):
        assert (charts / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
