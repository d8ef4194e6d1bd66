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


def row(label: str, rate: float, baseline: float | None = None, note: str = "") -> None:
    ratio = f"{rate / baseline:6.2f}×" if baseline else "       "
    print(f"  {label:<52} {rate:>12,.0f} /s  {ratio}  {note}")
