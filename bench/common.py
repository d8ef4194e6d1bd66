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
    return {name: statistics.median(r) for name, r in interleaved_turns(fns, repeat).items()}


def interleaved_turns(fns: dict[str, Callable[[], int]],
                      repeat: int = 5) -> dict[str, list[float]]:
    """:func:`interleaved_rates` turn by turn: each ``fn``'s rate in every turn, in order,
    so a ratio can be read per turn too (its spread says how far the median is to trust)."""
    rates: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.process_time()
            n = fn()
            rates[name].append(n / (time.process_time() - start))
    return rates


def turn_ratios(turns: dict[str, list[float]], ours: str, theirs: str) -> tuple[float, float]:
    """The lowest and highest ratio ``ours / theirs`` among the turns of one run."""
    ratios = [a / b for a, b in zip(turns[ours], turns[theirs], strict=True)]
    return min(ratios), max(ratios)
