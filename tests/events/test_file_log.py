"""Crash safety and durability of the embedded file log."""

import os

import pytest
import trio

from trio_cap.events.kinds import LogRecovered, TextChunk
from trio_cap.events.log import (
    FileEventLog,
    LogCorrupted,
    LogFormatError,
    LogLocked,
    LogWriteError,
)
from trio_cap.events.log.records import HEADER_SIZE, MAGIC


def chunk(i: int) -> TextChunk:
    return TextChunk(message_id="m", text=f"event number {i}")


async def write_log(path, n: int, fsync: str = "batch") -> list[int]:
    """Write n events one batch each; returns each record's end offset."""
    ends = []
    log = FileEventLog(path, fsync=fsync)
    for i in range(n):
        await log.append([chunk(i)], stream="s")
        ends.append(log.size)
    await log.aclose()
    return ends


@pytest.mark.parametrize("policy", ["always", "batch", "never"])
async def test_every_policy_round_trips_and_reopens_at_the_next_seq(tmp_path, policy):
    path = tmp_path / "x.caplog"
    await write_log(path, 5, policy)
    log = FileEventLog(path, fsync=policy)
    assert [e.event for e in log.read()] == [chunk(i) for i in range(5)]
    assert await log.append([chunk(5)]) == 6
    await log.aclose()
    assert FileEventLog(path, readonly=True).read(6)[0].event == chunk(5)


async def test_a_file_cut_at_every_offset_of_its_last_records_keeps_every_complete_one(tmp_path):
    path = tmp_path / "x.caplog"
    ends = await write_log(path, 6)
    original = path.read_bytes()
    start_of_tail = ends[2]  # cut anywhere inside the last three records
    for cut in range(start_of_tail, len(original)):
        path.write_bytes(original[:cut])
        complete = sum(1 for end in ends if end <= cut)
        log = FileEventLog(path)
        events = log.read()
        assert [e.event for e in events[:complete]] == [chunk(i) for i in range(complete)]
        torn = cut - ends[complete - 1]
        if torn:
            assert log.recovered is not None and log.recovered.dropped_bytes == torn
            recovered = LogRecovered(dropped_bytes=torn, at_offset=ends[complete - 1])
            assert events[-1].event == recovered
            assert len(events) == complete + 1
        else:
            assert log.recovered is None and len(events) == complete
        await log.aclose()
        # the repaired file opens cleanly and is appendable
        again = FileEventLog(path)
        assert again.recovered is None
        await again.aclose()


async def test_readonly_open_reports_a_torn_tail_without_cutting_it(tmp_path):
    path = tmp_path / "x.caplog"
    ends = await write_log(path, 3)
    path.write_bytes(path.read_bytes()[:-4])
    size = path.stat().st_size
    log = FileEventLog(path, readonly=True)
    assert log.last_seq == 2
    assert log.recovered.dropped_bytes == size - ends[1]
    await log.aclose()
    assert path.stat().st_size == size


async def test_a_flipped_byte_in_the_last_record_is_refused_not_cut(tmp_path):
    # a complete record with a bad CRC is damage, not a torn append: cutting it drops events
    path = tmp_path / "x.caplog"
    ends = await write_log(path, 4)
    data = bytearray(path.read_bytes())
    data[ends[2] + HEADER_SIZE + 5] ^= 0x40  # inside the body of the 4th record
    path.write_bytes(bytes(data))
    with pytest.raises(LogCorrupted, match="CRC mismatch") as info:
        FileEventLog(path)
    assert (info.value.offset, info.value.seq) == (ends[2], 3)
    assert path.read_bytes() == bytes(data)
    reader = FileEventLog(path, readonly=True)
    assert [e.event for e in reader.read()[:3]] == [chunk(i) for i in range(3)]
    assert reader.recovered is None and reader.damage[0].start == ends[2]


async def test_a_flipped_byte_mid_log_refuses_to_drop_the_valid_records_after_it(tmp_path):
    path = tmp_path / "x.caplog"
    ends = await write_log(path, 4)
    data = bytearray(path.read_bytes())
    data[ends[0] + HEADER_SIZE + 3] ^= 0x01  # body of the 2nd record
    path.write_bytes(bytes(data))
    with pytest.raises(LogCorrupted, match="after seq 1") as info:
        FileEventLog(path)
    assert info.value.offset == ends[0]
    assert path.read_bytes() == bytes(data)  # nothing was cut


async def test_not_a_log_and_a_second_writer_are_refused(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("hello, this is not a log")
    with pytest.raises(LogFormatError):
        FileEventLog(other)
    path = tmp_path / "x.caplog"
    log = FileEventLog(path)
    with pytest.raises(LogLocked):
        FileEventLog(path)
    reader = FileEventLog(path, readonly=True)  # readers need no lock
    await reader.aclose()
    await log.aclose()
    with pytest.raises(LogWriteError):
        await FileEventLog(path, readonly=True).append([chunk(0)])


async def test_always_policy_group_commits_concurrent_appends(tmp_path, monkeypatch):
    syncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (syncs.append(fd), real_fsync(fd)))
    log = FileEventLog(tmp_path / "x.caplog", fsync="always")
    acked = []

    async def writer(k):
        for i in range(20):
            acked.append(await log.append([chunk(k * 100 + i)], stream=f"w{k}"))

    async with trio.open_nursery() as nursery:
        for k in range(8):
            nursery.start_soon(writer, k)
    assert sorted(acked) == list(range(1, 161))
    assert len(syncs) < 160  # appends shared fsyncs
    await log.aclose()
    assert FileEventLog(tmp_path / "x.caplog", readonly=True).last_seq == 160


async def test_a_torn_header_is_rewritten(tmp_path):
    path = tmp_path / "x.caplog"
    path.write_bytes(MAGIC[:3])
    log = FileEventLog(path)
    assert log.recovered.dropped_bytes == 3
    await log.aclose()
    assert path.read_bytes().startswith(MAGIC)


async def test_reading_far_back_goes_to_the_file_not_only_the_recent_cache(tmp_path):
    path = tmp_path / "x.caplog"
    log = FileEventLog(path)
    for start in range(0, 140_000, 20_000):
        await log.append([chunk(i) for i in range(start, start + 20_000)])
    assert log.read(5, until=6)[0].event == chunk(4)
    got = log.read(1)
    assert len(got) == 140_000 and got[-1].seq == 140_000
    assert [e.seq for e in log.read(69_999, until=70_002)] == [69_999, 70_000, 70_001, 70_002]
    await log.aclose()


async def test_a_batch_is_one_record_kept_or_dropped_whole(tmp_path):
    path = tmp_path / "x.caplog"
    log = FileEventLog(path)
    await log.append([chunk(i) for i in range(3)])
    kept = log.size
    await log.append([chunk(i) for i in range(3, 10)])
    await log.aclose()
    full = path.read_bytes()
    for cut in (kept + 1, kept + HEADER_SIZE, len(full) - 1):
        path.write_bytes(full[:cut])
        reopened = FileEventLog(path, readonly=True)
        assert [e.event for e in reopened.read()] == [chunk(i) for i in range(3)]
        assert reopened.recovered.dropped_bytes == cut - kept
        await reopened.aclose()


async def test_records_out_of_seq_order_are_not_a_log(tmp_path):
    first, second = tmp_path / "a.caplog", tmp_path / "b.caplog"
    for path in (first, second):
        log = FileEventLog(path)
        await log.append([chunk(0), chunk(1)])
        await log.aclose()
    # graft b's record (seqs 1-2) after a's: valid CRC, repeated seqs
    data = first.read_bytes() + second.read_bytes()[len(MAGIC):]
    first.write_bytes(data)
    with pytest.raises(LogCorrupted, match="repeats seqs 1–2"):
        FileEventLog(first)
    log = FileEventLog(first, readonly=True)
    assert log.last_seq == 2 and log.recovered is None
    assert "repeats seqs 1–2" in log.damage[0].detail
