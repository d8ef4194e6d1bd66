"""``python -m bench … --plot DIR``: the two charts the README shows.

* sessions-latency.png — concurrent sessions against append → subscriber latency
  (p50 and p99, each collector setting), from ``bench sessions``;
* decode-ratios.png — each binding machine's speed as a multiple of ``json.loads`` and of
  its official SDK's parse, from the rows ``bench frames`` printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot(results: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []
    sessions = (results.get("sessions") or {}).get("returned") or []
    if sessions:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for mode in dict.fromkeys(r["gc"] for r in sessions):
            rows = sorted((r for r in sessions if r["gc"] == mode), key=lambda r: r["n"])
            ns = [r["n"] for r in rows]
            ax.plot(ns, [r["p99_ms"] for r in rows], marker="o", label=f"p99, gc {mode}")
            ax.plot(ns, [r["p50_ms"] for r in rows], marker=".", linestyle="--",
                    label=f"p50, gc {mode}")
        ax.axhline(20, color="grey", linewidth=0.8, linestyle=":")
        ax.set(xscale="log", yscale="log", xlabel="concurrent in-process sessions",
               ylabel="append → subscriber (ms)", title="Sessions vs event latency")
        ax.legend(fontsize=7)
        fig.tight_layout()
        made.append(out / "sessions-latency.png")
        fig.savefig(made[-1], dpi=110)
        plt.close(fig)
    frames = [r for r in (results.get("frames") or {}).get("rows", []) if r.get("ratio")]
    if frames:
        fig, ax = plt.subplots(figsize=(10, 0.45 * len(frames) + 1.4))
        labels = [f"{r['label'][:48]} ({r['note']})" for r in frames]
        ax.barh(range(len(frames)), [r["ratio"] for r in frames], color="#4a7ab0")
        ax.set_yticks(range(len(frames)), labels, fontsize=7)
        ax.axvline(1, color="grey", linewidth=0.8)
        ax.invert_yaxis()
        ax.set(xlabel="× the peer it is compared with (same run)",
               title="Decode speed per binding machine")
        fig.tight_layout()
        made.append(out / "decode-ratios.png")
        fig.savefig(made[-1], dpi=110)
        plt.close(fig)
    return made
