"""``python -m bench faults``: kill -9 trials against the file log — acknowledged events lost.

The same writer process and the same checks as ``tests/faults`` (which assert zero):
a writer appends numbered events and prints each seq the log acknowledged; it is
killed with SIGKILL after a random number of acknowledgements, the log is reopened
for writing (which may cut a torn tail, never an acknowledged record), and every
acknowledged seq is looked up.  Several generations per file, so recovery itself is
killed too.  Printed, not asserted: kills, events acknowledged, events missing, and
the time a trial takes.  (A killed process, not a power cut: only fsync=always
promises the latter.)
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

from tests.faults.test_kill9 import ROOT, WRITER, _missing, kill_after, reopen_and_read


def trials(policy: str, kills: int, tmp: Path) -> dict[str, float]:
    rng = random.Random(f"bench-{policy}")
    path = tmp / f"{policy}.caplog"
    acknowledged = missing = checked = 0
    start = time.perf_counter()
    for generation in range(kills):
        wanted = rng.choice([0, 1, 2, 5, 30, 80])
        lines = kill_after([*WRITER, str(path), policy, str(generation)], wanted, ROOT)
        acked = [int(ln) for ln in lines if ln.strip().isdigit()]
        acknowledged = max([acknowledged, *acked])
        missing += _missing(reopen_and_read(path, checked + 1), checked + 1, acknowledged)
        checked = max(checked, acknowledged)
    missing += _missing(reopen_and_read(path), 1, acknowledged)
    return {"policy": policy, "kills": kills, "acknowledged": acknowledged,
            "missing": missing, "s_per_kill": (time.perf_counter() - start) / kills}


def run(quick: bool = False) -> list[dict[str, float]]:
    kills = 3 if quick else 10
    print(f"faults: kill -9 of a file-log writer, {kills} generations per fsync policy")
    rows = []
    with tempfile.TemporaryDirectory() as tmpdir:
        for policy in ("always", "batch", "never"):
            r = trials(policy, kills, Path(tmpdir))
            rows.append(r)
            print(f"  fsync={policy:<6}  kills {r['kills']:>3}  acknowledged "
                  f"{r['acknowledged']:>8,}  missing {r['missing']} (target 0)"
                  f"  {r['s_per_kill']:.2f} s per trial")
    return rows
