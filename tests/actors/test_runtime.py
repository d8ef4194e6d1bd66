"""The actor runtime: addressing, batching, backpressure, supervision, shutdown."""

import pytest
import trio
import trio.testing

from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.runtime import (
    Actor,
    ActorFailed,
    ActorNotFound,
    ActorSystem,
    Restart,
    open_actor_system,
)

SLOW_CLEANUP = 0.5
"""Virtual seconds (the tests that use it run on the autojump clock): a cleanup that takes
time, to hold it against the grace period — the behaviour under test, not a synchronisation."""


class Recorder(Actor):
    def __init__(self, seen: list, fail_on=None, cleanup: list | None = None) -> None:
        self.seen = seen
        self.fail_on = fail_on
        self.cleanup = cleanup

    async def run(self, ctx):
        try:
            async for batch in ctx.batches():
                self.seen.append(list(batch))
                if self.fail_on is not None and self.fail_on in batch:
                    raise RuntimeError(f"boom on {self.fail_on}")
        finally:
            if self.cleanup is not None:
                with ctx.shielded():
                    await trio.sleep(SLOW_CLEANUP)  # cleanup that takes time while cancelled
                    self.cleanup.append("cleaned")


async def test_messages_arrive_in_order_and_in_batches():
    seen: list = []
    async with open_actor_system(ids=SequentialIds()) as system:
        ref = system.spawn(lambda: Recorder(seen), address="cap://rec")
        assert system.lookup("cap://rec") is ref
        for i in range(5):
            ref.send_nowait(i)
        await trio.testing.wait_all_tasks_blocked()
        await system.stop("cap://rec")
    assert seen == [[0, 1, 2, 3, 4]]
    with pytest.raises(ActorNotFound):
        await ref.send(5)


async def test_a_full_inbox_blocks_the_sender():
    gate = trio.Event()

    class Slow(Actor):
        async def handle(self, message, ctx):
            await gate.wait()

    async with open_actor_system() as system:
        ref = system.spawn(Slow, inbox_size=2)
        sent = []

        async def producer():
            for i in range(10):
                await ref.send(i)
                sent.append(i)

        system.nursery.start_soon(producer)
        await trio.testing.wait_all_tasks_blocked()
        # what the actor took as its batch + two queued: the producer waits on the rest
        assert 2 <= len(sent) <= 5 and sent == list(range(len(sent)))
        gate.set()
        await trio.testing.wait_all_tasks_blocked()
        assert sent == list(range(10))


async def test_restart_policy_replaces_the_behaviour_and_keeps_the_inbox():
    seen: list = []
    async with open_actor_system() as system:
        ref = system.spawn(lambda: Recorder(seen, fail_on="bad"), address="cap://r",
                           policy=Restart(max_restarts=2, window=60))
        await ref.send("bad")
        await trio.testing.wait_all_tasks_blocked()
        await ref.send("good")
        await trio.testing.wait_all_tasks_blocked()
        assert system.restarts("cap://r") == 1
    assert seen == [["bad"], ["good"]]


async def test_too_many_restarts_escalate_to_whoever_opened_the_system():
    seen: list = []
    with pytest.RaisesGroup(pytest.RaisesExc(ActorFailed, match="failed 3 times.*boom on bad")):
        async with open_actor_system() as system:
            ref = system.spawn(lambda: Recorder(seen, fail_on="bad"),
                               policy=Restart(max_restarts=2, window=60))
            for _ in range(3):
                await ref.send("bad")
                await trio.testing.wait_all_tasks_blocked()


async def test_escalate_is_the_default():
    with pytest.RaisesGroup(pytest.RaisesExc(ActorFailed, match="RuntimeError..boom on x")):
        async with open_actor_system() as system:
            ref = system.spawn(lambda: Recorder([], fail_on="x"))
            await ref.send("x")
            await trio.sleep_forever()


async def test_actors_run_in_a_callers_nursery_and_clean_up_within_the_grace_period(
    autojump_clock,
):
    cleanup: list = []
    with trio.CancelScope() as outer:
        async with trio.open_nursery() as nursery:
            system = ActorSystem(nursery, grace=2.0)
            system.spawn(lambda: Recorder([], cleanup=cleanup))
            await trio.testing.wait_all_tasks_blocked()
            outer.cancel()
    assert cleanup == ["cleaned"]  # 0.5 s of shielded cleanup fits in the 2 s grace


async def test_cleanup_longer_than_the_grace_period_is_cut_short(autojump_clock):
    cleanup: list = []
    with trio.CancelScope() as outer:
        async with trio.open_nursery() as nursery:
            system = ActorSystem(nursery, grace=0.1)
            system.spawn(lambda: Recorder([], cleanup=cleanup))
            await trio.testing.wait_all_tasks_blocked()
            outer.cancel()
    assert cleanup == []
