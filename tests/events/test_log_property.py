"""Any sequence of events round-trips through both backends unchanged."""

import itertools
import tempfile
from pathlib import Path

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import events
from trio_cap.events.clock import StepClock
from trio_cap.events.log import FileEventLog, MemoryEventLog

batches = st.lists(st.lists(events(), min_size=1, max_size=5), min_size=1, max_size=6)


async def _round_trip(log_factory, reopen, event_batches):
    log = log_factory()
    for i, batch in enumerate(event_batches):
        await log.append(batch, stream=f"s{i % 2}", cause=i or None)
    expected = [ev for batch in event_batches for ev in batch]
    await log.aclose()
    stored = reopen().read()
    assert [env.event for env in stored] == expected
    seqs = [env.seq for env in stored]
    assert seqs == list(range(1, len(expected) + 1))
    assert all(a.at <= b.at for a, b in itertools.pairwise(stored))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_batches=batches, policy=st.sampled_from(["always", "batch", "never"]))
def test_events_round_trip_through_the_file_log(event_batches, policy):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.caplog"
        trio.run(
            _round_trip,
            lambda: FileEventLog(path, fsync=policy, clock=StepClock()),
            lambda: FileEventLog(path, readonly=True),
            event_batches,
        )


@settings(max_examples=60, deadline=None)
@given(event_batches=batches)
def test_events_round_trip_through_the_memory_log(event_batches):
    holder = {}

    def make():
        holder["log"] = MemoryEventLog(StepClock())
        return holder["log"]

    trio.run(_round_trip, make, lambda: holder["log"], event_batches)
