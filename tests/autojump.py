"""The autojump clock, made to wait for worker threads before it leaps.

trio's ``MockClock(autojump_threshold=0)`` jumps to the next deadline as soon as
every task is blocked — also when one is blocked on ``trio.to_thread`` (the file
log's fsync, a workspace snapshot).  That thread's work takes real time the test is
waiting for, and under load the leap landed on a deadline the code under test
never reached: a turn that "waited 100 s", a ``fail_after`` that fired.  So while
a worker thread holds a token of the default limiter the clock holds still (a
bounded while: a thread blocked for good, e.g. on stdin, must not stop time
forever).
"""

from __future__ import annotations

import time

import pytest
import trio
from trio.testing import MockClock

PATIENCE_S = 5.0
"""Real seconds the clock waits for threads before it leaps anyway."""


def thread_aware_clock() -> MockClock:
    """A ``MockClock(autojump_threshold=0)`` whose leap waits for worker threads (trio's
    clock class is final, so the instance's ``_autojump`` is the one replaced)."""
    clock = MockClock(autojump_threshold=0)
    leap = clock._autojump
    held_since: list[float] = []

    def autojump() -> None:
        if trio.to_thread.current_default_thread_limiter().borrowed_tokens:
            now = time.monotonic()
            if not held_since:
                held_since.append(now)
            if now - held_since[0] < PATIENCE_S:
                time.sleep(0.0005)  # the loop comes back at once: do not spin hot
                return
        held_since.clear()
        leap()

    clock._autojump = autojump  # type: ignore[method-assign]
    return clock


@pytest.fixture
def autojump_clock() -> MockClock:
    return thread_aware_clock()
