"""Appends are all-or-nothing: a refused or failed batch leaves no seq gap and no partial record."""

from __future__ import annotations

import errno
import os

import pytest
import trio

from tests.events.logfiles import chunk, texts
from trio_cap.events.kinds import TextChunk
from trio_cap.events.log import FileEventLog, LogWriteError
from trio_cap.events.log.errors import EventRejected, EventTooLarge
from trio_cap.events.log.records import MAX_RECORD

POLICIES = ["always", "batch", "never"]


def big(n: int) -> TextChunk:
    return TextChunk(message_id="m", text="x" * n)


def reopened(path) -> list:
    envs = FileEventLog(path, readonly=True).read()
    assert [e.seq for e in envs] == list(range(1, len(envs) + 1))
    return envs


@pytest.mark.parametrize("policy", POLICIES)
async def test_an_event_larger_than_a_record_is_refused_before_anything_is_written(
        tmp_path, policy):
    path = tmp_path / "x.caplog"
    log = FileEventLog(path, fsync=policy)
    await log.append([chunk(0), chunk(1), chunk(2)])
    size = log.size
    with pytest.raises(EventTooLarge, match="at most 67,108,864 bytes"):
        await log.append([chunk(3), big(MAX_RECORD + 10), chunk(4)])
    assert log.last_seq == 3 and log.size == size == path.stat().st_size
    assert await log.append([chunk(5)]) == 4  # no seq was spent on the refused batch
    await log.aclose()
    assert texts(reopened(path)) == [chunk(i).text for i in (0, 1, 2, 5)]


async def test_a_batch_larger_than_a_record_is_split_not_refused(tmp_path):
    path = tmp_path / "x.caplog"
    log = FileEventLog(path)
    third = MAX_RECORD // 3 + 1000
    assert await log.append([big(third), big(third), big(third), chunk(0)]) == 4
    await log.aclose()
    envs = reopened(path)
    assert [len(e.event.text) for e in envs] == [third, third, third, len(chunk(0).text)]


async def test_an_event_that_cannot_be_encoded_is_refused_and_the_log_goes_on(tmp_path):
    path = tmp_path / "x.caplog"
    log = FileEventLog(path)
    await log.append([chunk(0)])
    with pytest.raises(EventRejected, match="cannot be stored"):
        await log.append([chunk(1), TextChunk(message_id="m", text="t", meta={"x": object()})])
    assert await log.append([chunk(2)]) == 2
    await log.aclose()
    assert texts(reopened(path)) == [chunk(0).text, chunk(2).text]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("partial", [False, True])
async def test_a_failed_write_raises_one_typed_error_and_stops_further_appends(
        tmp_path, monkeypatch, policy, partial):
    path = tmp_path / "x.caplog"
    log = FileEventLog(path, fsync=policy)
    acked = [await log.append([chunk(i)]) for i in range(5)]
    real = os.pwrite

    def full_disk(fd, data, offset):
        if partial and len(data) > 10:
            real(fd, bytes(data[:10]), offset)  # a partial record reaches the file
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "pwrite", full_disk)
    with pytest.raises(LogWriteError, match="No space left on device") as info:
        await log.append([chunk(5)])
    assert not isinstance(info.value, EventRejected)
    monkeypatch.setattr(os, "pwrite", real)
    with pytest.raises(LogWriteError, match="no more appends"):
        await log.append([chunk(6)])  # never written after a hole
    await log.aclose()
    envs = reopened(path)
    assert [e.seq for e in envs][:5] == acked
    assert texts(envs) == [chunk(i).text for i in range(5)]
    again = FileEventLog(path)  # nothing torn or corrupt was left behind
    assert again.recovered is None and again.last_seq == 5
    await again.aclose()


async def test_a_failed_fsync_is_a_typed_error(tmp_path, monkeypatch):
    path = tmp_path / "x.caplog"
    log = FileEventLog(path, fsync="always")

    def broken(fd):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(LogWriteError, match="fsync failed: Input/output error"):
        await log.append([chunk(0)])
    with pytest.raises(LogWriteError):
        await log.append([chunk(1)])
    await log.aclose()


async def test_a_closed_descriptor_is_a_typed_error(tmp_path):
    log = FileEventLog(tmp_path / "x.caplog", fsync="never")
    await log.append([chunk(0)])
    os.close(log._fd)
    with pytest.raises(LogWriteError, match="Bad file descriptor"):
        await log.append([chunk(1)])
    log._fd = os.open(os.devnull, os.O_RDONLY)  # let aclose close something
    await log.aclose()


@pytest.mark.parametrize("device", ["/dev/full", "/dev/null"])
def test_a_device_is_not_a_log(device):
    with pytest.raises(LogWriteError, match="not a regular file"):
        FileEventLog(device)


async def test_concurrent_appenders_after_a_failure_all_fail_and_nothing_follows_the_hole(
        tmp_path, monkeypatch):
    path = tmp_path / "x.caplog"
    log = FileEventLog(path, fsync="always")
    await log.append([chunk(0)])
    real = os.pwrite
    calls = []

    def fail_once(fd, data, offset):
        calls.append(offset)
        if len(calls) == 1:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", fail_once)
    errors = []

    async def writer(i):
        try:
            await log.append([chunk(i)])
        except LogWriteError as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        for i in range(1, 6):
            nursery.start_soon(writer, i)
    assert len(errors) == 5
    await log.aclose()
    assert texts(reopened(path)) == [chunk(0).text]


async def test_records_appended_during_a_group_commit_are_indexed_where_they_are(tmp_path):
    # appends that arrive while a group commit writes must be indexed after its bytes:
    # reading them back from the file (past the recent cache) finds every event
    log = FileEventLog(tmp_path / "x.caplog", fsync="always")

    async def writer(k):
        for i in range(60):
            await log.append([chunk(k * 100_000 + i * 1000 + j) for j in range(300)],
                             stream=f"w{k}")

    async with trio.open_nursery() as nursery:
        for k in range(8):
            nursery.start_soon(writer, k)
    assert log.last_seq == 144_000 and log._recent_base > 1  # the oldest are read from file
    live = log.read()
    assert [e.seq for e in live] == list(range(1, 144_001))
    await log.aclose()
    assert [e.event for e in reopened(tmp_path / "x.caplog")] == [e.event for e in live]
