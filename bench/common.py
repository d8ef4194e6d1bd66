"""Timing helpers: medians of repeated runs, printed as aligned rows."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_rate(fn: Callable[[], int], repeat: int = 3) -> float:
    """Items per second: ``fn`` does the work and returns how many items it handled."""
    rates = []
    for _ in range(repeat):
        start = time.perf_counter()
        n = fn()
        rates.append(n / (time.perf_counter() - start))
    return statistics.median(rates)


RECORDED: list[dict[str, object]] = []
"""Every :func:`row` printed since the bench runner last cleared it (``--json``)."""


def row(label: str, rate: float, baseline: float | None = None, note: str = "") -> None:
    RECORDED.append({"label": label, "rate": rate, "note": note,
                     "ratio": rate / baseline if baseline else None})
    ratio = f"{rate / baseline:6.2f}×" if baseline else "       "
    print(f"  {label:<52} {rate:>12,.0f} /s  {ratio}  {note}")


def interleaved_rates(fns: dict[str, Callable[[], int]], repeat: int = 5) -> dict[str, float]:
    """Items per second of each ``fn``, run in turns (a, b, c, a, b, c, …), medians.

    Turns, and CPU time rather than wall time, so that other work on the
    machine weighs on every contender alike: the ratios between them are
    what the figures are for.
    """
    times: dict[str, list[float]] = {name: [] for name in fns}
    counts: dict[str, int] = {}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.process_time()
            counts[name] = fn()
            times[name].append(time.process_time() - start)
    return {name: counts[name] / statistics.median(t) for name, t in times.items()}
