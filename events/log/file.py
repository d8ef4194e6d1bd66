"""The embedded file backend: an append-only file of CRC-framed msgpack records.

Durability policies (``fsync``):

* ``always`` — an append is acknowledged only after its bytes are fsync'd.
  Concurrent appenders share one write+fsync (group commit): whoever finds no
  flush running becomes the leader and flushes everything queued so far.
* ``batch`` (default) — acknowledged after ``write()`` reaches the OS, so a
  crash of this process loses nothing; fsync runs once a megabyte or a fifth of
  a second has accumulated, and on close.
* ``never`` — like ``batch`` without fsync (the OS decides).

On open the file is scanned; a torn or corrupt tail is cut off and reported
(``recovered``), and a ``log.recovered`` event records the cut in the log
itself.  A bad record with good records after it is not a tail: the log
refuses to open rather than drop acknowledged events.
"""

from __future__ import annotations

import bisect
import fcntl
import os
import time
from array import array
from collections.abc import Iterator
from typing import Literal

import attrs
import trio

from trio_cap.events.clock import Clock
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import LogRecovered
from trio_cap.events.log.base import EventLog, LogWriteError
from trio_cap.events.log.records import (
    HEADER_SIZE,
    MAGIC,
    LogCorrupted,
    LogFormatError,
    decode_records,
    encode_into,
    record_length,
    scan,
)

FsyncPolicy = Literal["always", "batch", "never"]
FSYNC_POLICIES: tuple[str, ...] = ("always", "batch", "never")

_RECENT_KEEP = 65536
_READ_CHUNK = 4 * 1024 * 1024


@attrs.frozen
class Recovery:
    dropped_bytes: int
    at_offset: int
    detail: str


class LogLocked(Exception):
    """Another process has this log open for writing."""


class FileEventLog(EventLog):
    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fsync: FsyncPolicy = "batch",
        clock: Clock | None = None,
        readonly: bool = False,
        batch_bytes: int = 1 << 20,
        batch_seconds: float = 0.2,
    ) -> None:
        super().__init__(clock)
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync policy must be one of {FSYNC_POLICIES}, not {fsync!r}")
        self.path = os.fspath(path)
        self.fsync_policy = fsync
        self.readonly = readonly
        self._batch_bytes = batch_bytes
        self._batch_seconds = batch_seconds
        self._offsets = array("q")  # start of each record
        self._firsts = array("q")  # first seq in each record
        self._recent: list[Envelope] = []
        self._recent_base = 1  # seq of self._recent[0]
        self._pending = bytearray()
        self._pending_last_seq = 0
        self._flushing = False
        self._flushed = trio.Event()
        self._unsynced = 0
        self._last_sync = time.monotonic()
        self._failed: BaseException | None = None
        self.recovered: Recovery | None = None
        self._fd = self._open()

    # ---- opening -------------------------------------------------------
    def _open(self) -> int:
        flags = os.O_RDONLY if self.readonly else os.O_RDWR | os.O_CREAT
        fd = os.open(self.path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        self._fd = fd
        try:
            if not self.readonly:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise LogLocked(
                        f"{self.path} is open for writing by another process"
                    ) from None
            self._load(fd)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _load(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        head = os.pread(fd, len(MAGIC), 0)
        if size == 0 or (len(head) < len(MAGIC) and MAGIC.startswith(head)):
            if not self.readonly:
                os.ftruncate(fd, 0)
                os.pwrite(fd, MAGIC, 0)
                self._end = len(MAGIC)
                if size:
                    self._note_recovery(size, 0, len(MAGIC), "torn file header")
            else:
                self._end = len(MAGIC)
            return
        if head != MAGIC:
            raise LogFormatError(f"{self.path} is not a trio-cap event log (bad magic header)")
        data = _read_all(fd, len(MAGIC), size - len(MAGIC))
        result = scan(data, base=len(MAGIC))
        self._offsets.extend(span.offset for span in result.spans)
        self._firsts.extend(span.first_seq for span in result.spans)
        self._end = result.good_end
        count = result.spans[-1].first_seq + result.spans[-1].count - 1 if result.spans else 0
        if count:
            self._next_seq = self._recent_base = count + 1
            self._visible_seq = count
        if result.bad_detail is not None:
            self._check_tail_is_tail(data, result.good_end - len(MAGIC), count + 1, result)
            if self.readonly:
                dropped = size - result.good_end
                self.recovered = Recovery(dropped, result.good_end, result.bad_detail)
            else:
                dropped = size - result.good_end
                self._note_recovery(dropped, result.good_end, result.good_end, result.bad_detail)

    def _check_tail_is_tail(self, data: bytes, rel: int, seq: int, result) -> None:
        """A corrupt record followed by a clean run of records to EOF is mid-log damage."""
        if len(data) - rel < HEADER_SIZE:
            return
        length = record_length(data, rel)
        nxt = rel + HEADER_SIZE + length
        if length > 0 and nxt < len(data):
            rest = scan(memoryview(data)[nxt:], next_seq=None)
            if rest.spans and rest.bad_detail is None:
                raise LogCorrupted(self.path, result.good_end, seq, result.bad_detail)

    def _note_recovery(self, dropped: int, at_offset: int, keep: int, detail: str) -> None:
        """Cut the file to ``keep`` bytes and record the cut as the log's next event."""
        os.ftruncate(self._fd, keep)
        self._end = keep
        self.recovered = Recovery(dropped, at_offset, detail)
        env = self._envelopes([LogRecovered(dropped_bytes=dropped, at_offset=at_offset)], "", None)
        self._buffer(env)
        self._write_pending_sync()
        os.fsync(self._fd)
        self._publish(env[-1].seq)

    # ---- writing -------------------------------------------------------
    def _buffer(self, envs: list[Envelope]) -> None:
        base = self._end + len(self._pending)
        for span in encode_into(envs, self._pending):
            self._offsets.append(base + span.offset)
            self._firsts.append(span.first_seq)
        self._pending_last_seq = envs[-1].seq
        self._recent.extend(envs)
        if len(self._recent) > 2 * _RECENT_KEEP:
            drop = len(self._recent) - _RECENT_KEEP
            del self._recent[:drop]
            self._recent_base += drop

    def _write_pending_sync(self) -> None:
        data = self._pending
        written = 0
        try:
            with memoryview(data) as view:
                while written < len(data):
                    written += os.pwrite(self._fd, view[written:], self._end + written)
        except OSError as exc:
            data.clear()
            self._fail(exc)
        self._end += len(data)
        self._unsynced += len(data)
        data.clear()

    def _fail(self, exc: BaseException) -> None:
        """A failed write leaves the file at its last good end and refuses more appends."""
        self._failed = exc
        try:
            os.ftruncate(self._fd, self._end)
        except OSError:
            pass
        raise LogWriteError(f"{self.path}: write failed: {exc}") from exc

    async def _store(self, envs: list[Envelope]) -> None:
        if self._failed is not None:
            raise LogWriteError(f"{self.path}: log failed earlier: {self._failed}")
        if self.readonly:
            raise LogWriteError(f"{self.path} was opened read-only")
        self._buffer(envs)
        if self.fsync_policy != "always":
            self._write_pending_sync()
            self._publish(envs[-1].seq)
            if self.fsync_policy == "batch" and (
                self._unsynced >= self._batch_bytes
                or time.monotonic() - self._last_sync >= self._batch_seconds
            ):
                self._unsynced = 0
                self._last_sync = time.monotonic()
                await trio.to_thread.run_sync(os.fsync, self._fd)
            else:
                await trio.lowlevel.checkpoint()
            return
        target = envs[-1].seq
        while self._visible_seq < target:
            if self._flushing:
                await self._flushed.wait()
                continue
            await self._flush_group()

    async def _flush_group(self) -> None:
        """Leader of one group commit: write and fsync everything queued so far."""
        self._flushing = True
        data = bytes(self._pending)
        last_seq = self._pending_last_seq
        self._pending.clear()
        start = self._end
        try:
            await trio.to_thread.run_sync(_write_and_sync, self._fd, data, start)
        except trio.Cancelled:
            # Cancelled before the thread started: nothing was written.
            self._pending[:0] = data
            raise
        except OSError as exc:
            self._fail(exc)
        finally:
            self._flushing = False
            flushed, self._flushed = self._flushed, trio.Event()
            flushed.set()
        self._end = start + len(data)
        self._publish(last_seq)

    async def _close_backend(self) -> None:
        try:
            if not self.readonly and self._failed is None:
                if self._pending:
                    self._write_pending_sync()
                if self.fsync_policy != "never":
                    await trio.to_thread.run_sync(os.fsync, self._fd)
                self._publish(self._next_seq - 1)
        finally:
            os.close(self._fd)

    # ---- reading -------------------------------------------------------
    def _read_range(self, from_seq: int, to_seq: int) -> list[Envelope]:
        if from_seq >= self._recent_base:
            i = from_seq - self._recent_base
            return self._recent[i : i + (to_seq - from_seq + 1)]
        out = list(self._iter_file(from_seq, min(to_seq, self._recent_base - 1)))
        if to_seq >= self._recent_base:
            out.extend(self._recent[: to_seq - self._recent_base + 1])
        return out

    def _record_end(self, index: int) -> int:
        """File offset just past record ``index``."""
        nxt = index + 1
        return self._offsets[nxt] if nxt < len(self._offsets) else self._end

    def _iter_file(self, from_seq: int, to_seq: int) -> Iterator[Envelope]:
        """Envelopes from_seq..to_seq, read a few MiB of whole records at a time."""
        first = bisect.bisect_right(self._firsts, from_seq) - 1
        last = bisect.bisect_right(self._firsts, to_seq) - 1
        i = first
        while i <= last:
            start = self._offsets[i]
            k = bisect.bisect_left(self._offsets, start + _READ_CHUNK, lo=i + 1) - 1
            k = max(i, min(k, last))
            data = _read_all(self._fd, start, self._record_end(k) - start)
            for batch in decode_records(data):
                if batch[0].seq >= from_seq and batch[-1].seq <= to_seq:
                    yield from batch
                else:
                    yield from (env for env in batch if from_seq <= env.seq <= to_seq)
            i = k + 1

    @property
    def size(self) -> int:
        return self._end


def _read_all(fd: int, offset: int, length: int) -> bytes:
    chunks = []
    while length > 0:
        chunk = os.pread(fd, length, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return b"".join(chunks)


def _write_and_sync(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    written = 0
    while written < len(data):
        written += os.pwrite(fd, view[written:], offset + written)
    os.fsync(fd)
