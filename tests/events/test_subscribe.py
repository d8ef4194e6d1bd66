"""Subscriptions: catch-up then live, with no gap and no duplicate at the seam."""

import random

import pytest
import trio
import trio.testing

from trio_cap.events.kinds import TextChunk
from trio_cap.events.log import FileEventLog, MemoryEventLog


def make_log(kind, tmp_path):
    return MemoryEventLog() if kind == "memory" else FileEventLog(tmp_path / "s.caplog")


@pytest.mark.parametrize("kind", ["memory", "file"])
async def test_subscribers_joining_while_appends_race_see_every_event_once(kind, tmp_path):
    log = make_log(kind, tmp_path)
    rng = random.Random(7)
    total = 3000
    seen: dict[int, list[int]] = {}

    async def writer(k: int) -> None:
        for i in range(total // 3 // 10):
            await log.append([TextChunk(message_id=f"w{k}", text=str(i))] * rng.randint(5, 15))
            if rng.random() < 0.5:
                await trio.lowlevel.checkpoint()

    async def subscriber(n: int, start: int) -> None:
        got = seen.setdefault(n, [])
        async for batch in log.subscribe(start, batch=rng.randint(1, 64)):
            got.extend(env.seq for env in batch)

    async with trio.open_nursery() as nursery:
        for k in range(3):
            nursery.start_soon(writer, k)
        for n in range(12):
            await trio.lowlevel.checkpoint()
            nursery.start_soon(subscriber, n, rng.randint(1, max(1, log.last_seq)))
        # writers end; closing the log ends the subscriptions once they have drained
        while len(nursery.child_tasks) > 12:
            await trio.testing.wait_all_tasks_blocked()
            await trio.lowlevel.checkpoint()
        await log.aclose()
    last = log.last_seq
    for got in seen.values():
        assert got == list(range(got[0], last + 1)), "gap or duplicate"


async def test_a_subscription_filters_by_stream_and_waits_for_live_events():
    log = MemoryEventLog()
    await log.append([TextChunk(message_id="a", text="1")], stream="a")
    await log.append([TextChunk(message_id="b", text="2")], stream="b")
    received = []

    async def follow():
        async for batch in log.subscribe(1, "b"):
            received.extend(e.seq for e in batch)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow)
        await trio.testing.wait_all_tasks_blocked()
        assert received == [2]
        await log.append([TextChunk(message_id="b", text="3")], stream="b")
        await log.append([TextChunk(message_id="a", text="4")], stream="a")
        await trio.testing.wait_all_tasks_blocked()
        assert received == [2, 3]
        await log.aclose()
