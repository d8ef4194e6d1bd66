"""The tests' autojump clock holds still while a worker thread works (tests/autojump.py)."""

from __future__ import annotations

import time

import trio


async def test_a_worker_thread_is_waited_for_before_the_clock_leaps(autojump_clock):
    leaped: list[float] = []

    async def far_deadline() -> None:
        await trio.sleep(100)
        leaped.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(far_deadline)
        await trio.to_thread.run_sync(time.sleep, 0.2)  # real work, real time
        assert trio.current_time() < 100 and not leaped  # trio's own clock leaps to 100 here
        nursery.cancel_scope.cancel()


async def test_with_no_thread_it_still_leaps_at_once(autojump_clock):
    before = time.monotonic()
    await trio.sleep(3600)
    assert trio.current_time() >= 3600 and time.monotonic() - before < 30
