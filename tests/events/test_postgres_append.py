"""The PostgreSQL append path's encoding: a batch's payloads go to the database as one
buffer built in place (``encode_batch``), and the three ways a batch can travel — alone
(``cap_append``), queued into a group (``cap_append_many``), and sent again on the blocking
driver after its connection was lost — must all store exactly the events and kinds given."""

from __future__ import annotations

import psycopg
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trio.testing import wait_all_tasks_blocked

from tests.pg_fixture import fresh_url
from tests.strategies import events
from trio_cap.events.clock import StepClock
from trio_cap.events.kinds import TextChunk
from trio_cap.events.log.errors import EventRejected, EventTooLarge
from trio_cap.events.log.postgres import PostgresEventLog
from trio_cap.events.log.postgres_rows import (
    encode_batch,
    encode_events,
    kind_of,
    split_elements,
)
from trio_cap.events.log.postgres_writer import MANY
from trio_cap.events.log.records import MAX_RECORD

batches = st.lists(st.lists(events(), min_size=1, max_size=6), min_size=4, max_size=8)


@settings(max_examples=200, deadline=None)
@given(batch=st.lists(events(), max_size=12))
def test_the_in_place_buffer_holds_what_one_encode_per_event_gives(batch):
    kinds, payloads = encode_batch(batch)
    assert ([k.decode() for k in split_elements(kinds)], split_elements(payloads)) == \
        encode_events(batch)


def test_the_in_place_buffer_refuses_what_one_encode_per_event_refuses():
    ok = TextChunk(message_id="m", text="fine")
    with pytest.raises(EventTooLarge, match="text_chunk"):
        encode_batch([ok, TextChunk(message_id="m", text="x" * (MAX_RECORD + 1)), ok])
    with pytest.raises(EventRejected, match="cannot be stored"):
        encode_batch([ok, TextChunk(message_id="m", text="t", meta={"x": object()})])
    sized = TextChunk(message_id="m", text="y" * 70_000)  # the same str32 header
    room = MAX_RECORD - (len(encode_events([sized])[1][0]) - 70_000)
    at_limit = TextChunk(message_id="m", text="y" * room)
    assert len(split := encode_events([at_limit])[1][0]) == MAX_RECORD
    assert encode_batch([at_limit])[1][4:] == split


def _lose_next(log: PostgresEventLog, *, many: bool) -> None:
    """The writer's next single (or group) call loses its connection before anything is
    sent: the batch must go again, on the blocking driver, from its encoded buffers."""
    writer = log._writer
    real = writer.append
    state = {"armed": True}

    async def lose(params, answer_within, name=None):
        if state["armed"] and (name == MANY) == many:
            state["armed"] = False
            writer.close()
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        if name is None:
            return await real(params, answer_within)
        return await real(params, answer_within, name)

    writer.append = lose


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(event_batches=batches)
def test_batches_stored_alone_grouped_or_sent_again_read_back_unchanged(pg_server,
                                                                         event_batches):
    url = fresh_url(pg_server)
    streams = ["", "sess-ü", "s" * 300]

    async def main() -> None:
        log = await PostgresEventLog.open(url, clock=StepClock(), listen=False,
                                          notices=lambda _: None)
        first, *rest = event_batches
        resent_alone, *grouped, last = rest
        assert await log.append(first, stream=streams[0]) == len(first)
        _lose_next(log, many=False)
        await log.append(resent_alone, stream=streams[1], cause=1)
        await log.append([TextChunk(message_id="m", text="reopened")])  # a new writer
        # the head row held: every later append queues, and they go as one group
        blocker = await trio.to_thread.run_sync(psycopg.connect, url)
        blocker.execute("SELECT last_seq FROM cap_head FOR UPDATE")
        acked: dict[int, int] = {}

        async def append(i: int, batch, stream: str = "", cause: int | None = None) -> None:
            acked[i] = await log.append(batch, stream=stream, cause=cause)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(append, -1, [TextChunk(message_id="m", text="in flight")])
            await wait_all_tasks_blocked()
            for i, batch in enumerate(grouped):
                nursery.start_soon(append, i, batch, streams[i % 3], None if i % 2 else 2**62)
            await wait_all_tasks_blocked()
            _lose_next(log, many=True)  # the group loses its connection: each batch again
            await trio.to_thread.run_sync(blocker.rollback)
        blocker.close()
        await log.append(last, stream=streams[2], cause=-5)
        mine = log.read()
        await log.aclose()

        stored = PostgresEventLog(url, readonly=True)
        envs = stored.read()
        stored.close()
        assert envs == mine
        assert [e.seq for e in envs] == list(range(1, len(envs) + 1))
        want = [*first, *resent_alone, *(TextChunk(message_id="m", text=t)
                                         for t in ("reopened", "in flight")),
                *(ev for batch in grouped for ev in batch), *last]
        assert sorted(map(repr, (e.event for e in envs))) == sorted(map(repr, want))
        for i, batch in enumerate(grouped):  # each batch contiguous, under its own seqs
            got = envs[acked[i] - len(batch) : acked[i]]
            assert [e.event for e in got] == batch
            assert {(e.stream, e.cause) for e in got} == {(streams[i % 3],
                                                           None if i % 2 else 2**62)}
        with psycopg.connect(url) as conn:
            kinds = [k for (k,) in conn.execute("SELECT kind FROM cap_events ORDER BY seq")]
        assert kinds == [kind_of(e.event) for e in envs]

    trio.run(main)
