"""Garbage-collector settings for processes that run many sessions at once.

Events are gc-untracked msgspec structs, but every live session still owns tracked
objects (its tasks, channels, machine state).  With a thousand sessions alive, CPython's
default thresholds (700 allocations per young collection) run a full collection every
few hundred milliseconds, and each one walks every live object: a ~200 ms stop of the
event loop that lands, as it must, on some event's way to its subscribers.  Measured in
``python -m bench sessions`` (1,000 sessions): append → subscriber p99 ~230 ms with the
defaults, ~20 ms with these settings.

This changes the whole process, so the library never calls it by itself: the ``cap``
commands do, and an embedding application may (``trio_cap.tune_gc()``), once its
long-lived setup is done.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 50_000
"""Allocations between young collections (CPython's default: 700)."""


def tune_gc(young: int = YOUNG_THRESHOLD) -> tuple[int, int, int]:
    """Move what exists now out of the collector's sight and collect the young
    generation less often; returns the thresholds that were in force before."""
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(before[0], young), before[1], before[2])
    return before
