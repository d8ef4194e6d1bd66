"""Reading one stream through the per-stream index gives what a filtered scan gives.

``Session.run_turn`` reads its own session's events back after every turn; with
thousands of sessions a scan of every later event made that quadratic.  The
index must never change an answer, and must not read other streams' records.
"""

from __future__ import annotations

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_cap.events.kinds import TextChunk
from trio_cap.events.log import FileEventLog, MemoryEventLog

STREAMS = ("a", "b", "c")
batches = st.lists(st.tuples(st.sampled_from(STREAMS), st.integers(1, 4)), max_size=25)


def _scan(log, from_seq: int, stream: str, until: int | None = None):
    return [e for e in log.read(1, until=until) if e.seq >= from_seq and e.stream == stream]


async def _fill(log, plan) -> None:
    for n, (stream, size) in enumerate(plan):
        events = [TextChunk(message_id=f"m{n}", text=f"{stream}{n}.{i}") for i in range(size)]
        await log.append(events, stream=stream)


def _check(log, plan) -> None:
    last = log.last_seq
    for stream in STREAMS:
        for from_seq in range(1, last + 2):
            assert log.read(from_seq, stream) == _scan(log, from_seq, stream)
        assert log.read(1, stream, until=last // 2) == _scan(log, 1, stream, last // 2)


@settings(max_examples=60, deadline=None)
@given(plan=batches)
def test_memory_log_stream_reads_match_a_scan(plan):
    async def main():
        log = MemoryEventLog()
        await _fill(log, plan)
        _check(log, plan)

    trio.run(main)


@settings(max_examples=25, deadline=None)
@given(plan=batches, more=batches)
def test_file_log_stream_reads_match_a_scan_before_and_after_reopen(tmp_path_factory, plan,
                                                                   more):
    path = tmp_path_factory.mktemp("idx") / "x.caplog"

    async def main():
        log = FileEventLog(path, fsync="never")
        await _fill(log, plan)
        _check(log, plan)
        await log.aclose()
        again = FileEventLog(path, fsync="never")  # old events unindexed, new ones indexed
        await _fill(again, more)
        _check(again, plan + more)
        await again.aclose()

    trio.run(main)


async def test_a_stream_read_touches_only_that_streams_records():
    log = MemoryEventLog()
    ranges: list[tuple[int, int]] = []
    inner = log._read_range

    def counting(start: int, end: int):
        ranges.append((start, end))
        return inner(start, end)

    log._read_range = counting  # type: ignore[method-assign]
    for n in range(300):
        stream = "mine" if n % 100 == 0 else f"other{n}"
        await log.append([TextChunk(message_id="m", text="x")] * 3, stream=stream)
    got = log.read(1, "mine")
    assert [e.stream for e in got] == ["mine"] * 9
    assert sum(end - start + 1 for start, end in ranges) == 9  # not the 900 in the log


async def _follow(log, stream: str, into: list, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    task_status.started()
    async for batch in log.subscribe(1, stream, batch=3):
        into.extend(batch)


@settings(max_examples=25, deadline=None)
@given(before=batches, after=batches)
def test_a_stream_subscription_matches_a_scan_across_catch_up_and_live_tail(before, after):
    async def main():
        log = MemoryEventLog()
        await _fill(log, before)  # caught up from the log ...
        seen: dict[str, list] = {s: [] for s in STREAMS}
        async with trio.open_nursery() as nursery:
            for stream in STREAMS:
                await nursery.start(_follow, log, stream, seen[stream])
            await _fill(log, after)  # ... then followed live
            await log.aclose()
        for stream in STREAMS:
            assert seen[stream] == _scan(log, 1, stream)

    trio.run(main)


async def test_a_file_log_stream_read_decodes_only_that_streams_records(tmp_path):
    path = tmp_path / "x.caplog"
    log = FileEventLog(path, fsync="never")
    for n in range(300):
        stream = "mine" if n % 100 == 0 else f"other{n}"
        await log.append([TextChunk(message_id="m", text="x")] * 3, stream=stream)
    log._recent.clear()  # force reads from the file, as for events long past
    log._recent_base = log._next_seq
    ranges: list[tuple[int, int]] = []
    inner = log._iter_file

    def counting(start: int, end: int):
        ranges.append((start, end))
        return inner(start, end)

    log._iter_file = counting  # type: ignore[method-assign]
    got = log.read(1, "mine")
    assert [e.seq for e in got] == [1, 2, 3, 301, 302, 303, 601, 602, 603]
    assert sum(end - start + 1 for start, end in ranges) == 9
    await log.aclose()


def _count_file_reads(log) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    inner = log._iter_file

    def counting(start: int, end: int):
        ranges.append((start, end))
        return inner(start, end)

    log._iter_file = counting  # type: ignore[method-assign]
    return ranges


async def test_a_reopened_file_log_reads_one_stream_from_its_own_records_only(tmp_path):
    """The open-time scan of a writable log indexes every record by stream: after a
    reopen, one session's read decodes its records, not every later one of every stream."""
    path = tmp_path / "x.caplog"
    log = FileEventLog(path, fsync="never")
    for n in range(300):
        stream = "mine" if n % 100 == 0 else f"other{n}"
        await log.append([TextChunk(message_id="m", text="x")] * 3, stream=stream)
    await log.aclose()
    again = await FileEventLog.open(path, fsync="never")  # the scan runs in a worker thread
    ranges = _count_file_reads(again)
    want = [1, 2, 3, 301, 302, 303, 601, 602, 603]
    assert [e.seq for e in again.read(1, "mine")] == want
    assert [e.seq for e in await again.read_async(1, "mine")] == want
    assert [e.seq for e in again.read(302, "mine", until=601)] == [302, 303, 601]
    assert sum(end - start + 1 for start, end in ranges) == 9 + 9 + 3  # not the 900 in the log
    assert again.read(1, "nobody") == []
    await again.append([TextChunk(message_id="m", text="new")], stream="mine")
    assert [e.seq for e in again.read(600, "mine")] == [601, 602, 603, 901]
    await again.aclose()


async def test_a_read_only_open_does_not_index_and_still_reads_one_stream_right(tmp_path):
    path = tmp_path / "x.caplog"
    async with FileEventLog(path, fsync="never") as log:
        await _fill(log, [("a", 2), ("b", 3), ("a", 1)])
    reader = FileEventLog(path, readonly=True)
    try:
        assert "a" not in reader._streams  # whole-log readers skip the index's cost
        assert [e.seq for e in reader.read(1, "a")] == [1, 2, 6]
    finally:
        reader.close()


@settings(max_examples=25, deadline=None)
@given(plan=st.lists(st.sampled_from(STREAMS), min_size=1, max_size=40))
def test_a_copied_log_whose_records_mix_streams_is_indexed_per_event(tmp_path_factory, plan):
    """``cap log copy`` writes windows of events whatever their stream, so one record may
    hold several streams: reopened for writing, each stream still reads as a scan does."""
    from trio_cap.events.log.copy import copy_to_file

    out = tmp_path_factory.mktemp("copy") / "copy.caplog"

    async def main():
        source = MemoryEventLog()
        for n, stream in enumerate(plan):  # one event per append: streams interleave
            await source.append([TextChunk(message_id="m", text=str(n))], stream=stream)
        copy_to_file(source, "memory", out)
        log = FileEventLog(out, fsync="never")
        assert len(log._firsts) == 1  # one record holds every stream
        _check(log, plan)
        await log.aclose()

    trio.run(main)


async def test_a_record_whose_envelopes_do_not_decode_is_indexed_as_a_read_shows_it(tmp_path):
    """An envelope this build cannot read (here: its time is a string, its stream a
    number) reads as log.undecodable on stream "": the index puts it there too."""
    import msgspec

    from trio_cap.events.log.records import MAGIC, frame

    bad = msgspec.msgpack.encode([[1, "noon", 7, None, {"kind": "text.chunk"}]])
    good = msgspec.msgpack.encode([[2, 0.0, "a", None, {"kind": "text.chunk",
                                                         "message_id": "m", "text": "x"}]])
    path = tmp_path / "x.caplog"
    path.write_bytes(MAGIC + frame(1, 1, bad) + frame(2, 1, good))
    log = FileEventLog(path, fsync="never")
    assert [(e.seq, e.kind) for e in log.read(1, "")] == [(1, "log.undecodable")]
    assert [e.seq for e in log.read(1, "a")] == [2]
    assert log.read(1, "7") == []
    await log.aclose()


async def test_a_stream_subscriber_catching_up_reads_only_what_it_delivers():
    """Each batch reads its own seqs, not the whole rest of the stream (which made catching
    up on a long session quadratic)."""
    log = MemoryEventLog()
    for _ in range(50):
        await log.append([TextChunk(message_id="m", text="x")] * 3, stream="mine")
        await log.append([TextChunk(message_id="m", text="y")], stream="other")
    ranges = []
    inner = log._read_range

    def counting(start: int, end: int):
        ranges.append((start, end))
        return inner(start, end)

    log._read_range = counting  # type: ignore[method-assign]
    got = []
    async for batch in log.subscribe(1, "mine", batch=4):
        assert len(batch) <= 4
        got.extend(batch)
        if len(got) == 150:
            break
    assert [e.seq for e in got] == [s for s in range(1, 201) if s % 4]
    assert sum(end - start + 1 for start, end in ranges) == 150
