"""The embedded file backend: an append-only file of CRC-framed msgpack records.

Durability policies (``fsync``):

* ``always`` — an append is acknowledged only after its bytes are fsync'd.
  Concurrent appenders share one write+fsync (group commit): whoever finds no
  flush running becomes the leader and flushes everything queued so far.
* ``batch`` (default) — acknowledged after ``write()`` reaches the OS, so a
  crash of this process (kill -9 included) loses nothing; fsync runs once a
  megabyte or a fifth of a second has accumulated, and on close.
* ``never`` — like ``batch`` without fsync (the OS decides).

Opening scans the file incrementally (:mod:`.scan`; never the whole file in
memory).  A writable open also indexes every record by stream as it scans
(:mod:`.stream_index`), so the sessions of a reopened log read their own events
without scanning everyone else's; a read-only open (``cap log show``, ``cap
replay``: whole-log readers) skips that cost.  A writer cuts only a *provably*
torn final append — reported as ``recovered`` and recorded as a
``log.recovered`` event; any other damage raises :class:`LogCorrupted` and
the file is left untouched.  A read-only
open never cuts: it steps over damage, reports every span in ``damage``, and
reads show ``log.lost`` placeholders for seqs the damage destroyed.

Appends are all-or-nothing: a batch is encoded before its seqs are reserved
(an oversized event raises :class:`EventTooLarge`, the log goes on), and a
failed write raises :class:`LogWriteError` and stops all further appends, so
nothing is ever written after a hole.
"""

from __future__ import annotations

import bisect
import fcntl
import functools
import os
import stat
import time
from array import array
from collections.abc import Iterator
from typing import Literal

import attrs
import trio

from trio_cap.events.clock import Clock
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import LogRecovered
from trio_cap.events.log.base import EventLog
from trio_cap.events.log.errors import LogCorrupted, LogFormatError, LogWriteError
from trio_cap.events.log.records import (
    HEADER_SIZE,
    MAGIC,
    decode_envelopes,
    decode_joined,
    encode_into,
    lost_envelopes,
)
from trio_cap.events.log.scan import END, NEED_DATA, Damage, Finding, Record, Scanner, SeqGap
from trio_cap.events.log.stream_index import index_payload

FsyncPolicy = Literal["always", "batch", "never"]
FSYNC_POLICIES: tuple[str, ...] = ("always", "batch", "never")

_RECENT_KEEP = 65536
_READ_CHUNK = 4 * 1024 * 1024
_HOLE = -1  # an index entry with this offset stands for seqs no record holds


@attrs.frozen
class Recovery:
    dropped_bytes: int
    at_offset: int
    detail: str


class LogLocked(Exception):
    """Another process has this log open for writing."""


def scan_file(fd: int, size: int, scanner: Scanner) -> Iterator[Finding]:
    """Drive ``scanner`` over the file's first ``size`` bytes, reading a few MiB at a time."""
    while True:
        found = scanner.next_event()
        if found is NEED_DATA:
            at = scanner.fed_to
            n = min(max(_READ_CHUNK, scanner.want - at), size - at)
            scanner.feed(os.pread(fd, n, at) if n > 0 else b"")
            continue
        if found is END:
            return
        yield found


def describe_gap(gap: SeqGap) -> str:
    return f"seqs {gap.from_seq}–{gap.to_seq} are missing (the next record starts at byte " \
           f"{gap.at_offset})"


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
        self._offsets = array("q")  # start of each record (_HOLE: a gap in the seqs)
        self._lengths = array("q")  # payload bytes of each record
        self._firsts = array("q")  # first seq in each record
        self._hole_reasons: dict[int, str] = {}  # first seq of a hole -> why it is lost
        self._recent: list[Envelope] = []
        self._recent_base = 1  # seq of self._recent[0]
        self._pending = bytearray()
        self._pending_last_seq = 0
        self._in_flight = 0  # bytes a group commit is writing, not yet in _end
        self._flushing = False
        self._flushed = trio.Event()
        self._unsynced = 0
        self._last_sync = time.monotonic()
        self._failed: BaseException | None = None
        self._end = 0
        self.recovered: Recovery | None = None
        """The torn final append a writer cut (or a reader would cut)."""
        self.damage: list[Damage | SeqGap] = []
        """Everything a read-only open stepped over, in file order."""
        self._fd = self._open()

    @classmethod
    async def open(cls, path: str | os.PathLike[str], **options) -> FileEventLog:
        """Open in a worker thread: the open-time scan reads the whole file."""
        return await trio.to_thread.run_sync(functools.partial(cls, path, **options))

    # ---- opening -------------------------------------------------------
    def _open(self) -> int:
        flags = os.O_RDONLY if self.readonly else os.O_RDWR | os.O_CREAT
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below)
        fd = os.open(self.path, flags | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
        self._fd = fd
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                message = f"{self.path} is not a regular file, so it cannot hold an event log"
                raise LogFormatError(message) if self.readonly else LogWriteError(message)
            if not self.readonly:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise LogLocked(
                        f"{self.path} is open for writing by another process"
                    ) from None
            self._load(fd)
        except OSError as exc:
            os.close(fd)
            if self.readonly:
                raise
            raise LogWriteError(f"{self.path}: cannot prepare the log: {exc}") from exc
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _load(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        head = os.pread(fd, len(MAGIC), 0)
        if size == 0 or (len(head) < len(MAGIC) and MAGIC.startswith(head)):
            self._end = len(MAGIC)
            if not self.readonly:
                os.ftruncate(fd, 0)
                os.pwrite(fd, MAGIC, 0)
                if size:
                    self._note_recovery(size, 0, len(MAGIC), "torn file header")
            elif size:
                torn = Damage(0, size, 0, "torn file header", torn=True)
                self.damage.append(torn)
                self.recovered = Recovery(size, 0, torn.detail)
            return
        if head != MAGIC:
            close = sum(a == b for a, b in zip(head, MAGIC, strict=False)) >= 5
            hint = f"; if it is a damaged log: cap log repair {self.path} --out NEW" if close \
                else ""
            raise LogFormatError(
                f"{self.path} is not a trio-cap event log (bad magic header){hint}")
        torn: Damage | None = None
        offsets, lengths, firsts = self._offsets.append, self._lengths.append, self._firsts.append
        streams = None if self.readonly else self._streams  # a writer's sessions read their own
        for found in scan_file(fd, size, Scanner(keep_payload=streams is not None)):
            if type(found) is Record:
                offset, length, first, count, payload = found
                offsets(offset)
                lengths(length)
                firsts(first)
                self._end = offset + HEADER_SIZE + length
                self._visible_seq = first + count - 1
                if streams is not None:
                    index_payload(streams, payload, first, count)
            elif isinstance(found, SeqGap):
                self.damage.append(found)
                self._index(_HOLE, 0, found.from_seq)
                self._hole_reasons[found.from_seq] = self._hole_reason(found)
            elif found.torn:
                torn = found
            else:
                self.damage.append(found)
        if self._end < len(MAGIC):
            self._end = len(MAGIC)
        self._next_seq = self._recent_base = self._visible_seq + 1
        if self.readonly:
            self._indexed_from = self._next_seq  # older events: one stream read by scanning
        if self.damage and not self.readonly:
            self._refuse(self.damage)
        if torn is not None:
            if self.readonly:
                self.damage.append(torn)
                self.recovered = Recovery(size - torn.start, torn.start, torn.detail)
            else:
                self._note_recovery(size - torn.start, torn.start, torn.start, torn.detail)

    def _hole_reason(self, gap: SeqGap) -> str:
        cause = [d for d in self.damage if isinstance(d, Damage) and d.end == gap.at_offset]
        if cause:
            return f"lost to damage in {self.path} (bytes {cause[-1].start}–{cause[-1].end})"
        return f"no record of {self.path} holds them (the next record starts at byte " \
               f"{gap.at_offset})"

    def _refuse(self, problems: list[Damage | SeqGap]) -> None:
        # a gap right after a damaged span is that span's loss, not more damage
        ends = {d.end for d in problems if isinstance(d, Damage)}
        more = sum(1 for d in problems if isinstance(d, Damage) or d.at_offset not in ends) - 1
        first = problems[0]
        if isinstance(first, SeqGap):
            raise LogCorrupted(self.path, first.at_offset, first.from_seq - 1,
                               describe_gap(first), more=more)
        raise LogCorrupted(self.path, first.start, first.after_seq, first.detail, more=more)

    def _index(self, offset: int, length: int, first: int) -> None:
        self._offsets.append(offset)
        self._lengths.append(length)
        self._firsts.append(first)

    def _note_recovery(self, dropped: int, at_offset: int, keep: int, detail: str) -> None:
        """Cut the file to ``keep`` bytes and record the cut as the log's next event."""
        os.ftruncate(self._fd, keep)
        self._end = keep
        self.recovered = Recovery(dropped, at_offset, detail)
        env = self._envelopes([LogRecovered(dropped_bytes=dropped, at_offset=at_offset)], "", None)
        self._write_pending_sync()
        os.fsync(self._fd)
        self._publish(env[-1].seq)

    # ---- writing -------------------------------------------------------
    def _accept(self, envs: list[Envelope]) -> None:
        """Encode the batch first: a refused batch changes nothing and reserves no seq."""
        if self._failed is not None:
            raise LogWriteError(f"{self.path}: the log takes no more appends after an earlier "
                                f"write failure ({self._failed})")
        if self.readonly:
            raise LogWriteError(f"{self.path} was opened read-only")
        pending = self._pending
        spans = encode_into(envs, pending)  # all or nothing: on error pending is as it was
        base = self._end + self._in_flight  # the file offset of pending[0]
        for span, nxt in zip(spans, [*spans[1:], None], strict=True):
            end = nxt.offset if nxt else len(pending)
            self._index(base + span.offset, end - span.offset - HEADER_SIZE, span.first_seq)
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
            self._fail(exc)  # the log is dead: what stays pending is never written
        self._end += len(data)
        self._unsynced += len(data)
        data.clear()

    def _fail(self, exc: BaseException, what: str = "write") -> None:
        """A failed write leaves the file at its last good end and refuses more appends."""
        self._failed = exc
        try:
            os.ftruncate(self._fd, self._end)
        except OSError:
            pass  # a partial record left behind is a torn final append: cut on reopen
        raise LogWriteError(f"{self.path}: {what} failed: {_reason(exc)}; the log takes no "
                            "more appends") from exc

    async def _sync(self) -> None:
        try:
            await trio.to_thread.run_sync(os.fsync, self._fd)
        except OSError as exc:
            self._fail(exc, "fsync")

    async def _store(self, envs: list[Envelope]) -> None:
        if self.fsync_policy != "always":
            self._write_pending_sync()
            self._publish(envs[-1].seq)
            if self.fsync_policy == "batch" and (
                self._unsynced >= self._batch_bytes
                or time.monotonic() - self._last_sync >= self._batch_seconds
            ):
                self._unsynced = 0
                self._last_sync = time.monotonic()
                await self._sync()
            else:
                await trio.lowlevel.checkpoint()
            return
        target = envs[-1].seq
        while self._visible_seq < target:
            if self._failed is not None:
                raise LogWriteError(f"{self.path}: write failed: {_reason(self._failed)}; "
                                    "the log takes no more appends")
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
        self._in_flight = len(data)
        start = self._end
        try:
            await trio.to_thread.run_sync(_write_and_sync, self._fd, data, start)
        except trio.Cancelled:
            # Cancelled before the thread started: nothing was written.
            self._pending[:0] = data
            self._in_flight = 0
            raise
        except _SyncFailed as exc:
            self._fail(exc.error, "fsync")
        except OSError as exc:
            self._fail(exc)
        finally:
            self._flushing = False
            flushed, self._flushed = self._flushed, trio.Event()
            flushed.set()
        self._end = start + len(data)
        self._in_flight = 0
        self._publish(last_seq)

    async def _close_backend(self) -> None:
        try:
            if not self.readonly and self._failed is None:
                if self._pending:
                    self._write_pending_sync()
                if self.fsync_policy != "never":
                    await self._sync()
                self._publish(self._next_seq - 1)
        finally:
            os.close(self._fd)

    # ---- reading -------------------------------------------------------
    def _read_range(self, from_seq: int, to_seq: int) -> list[Envelope]:
        if from_seq >= self._recent_base:
            i = from_seq - self._recent_base
            return self._recent[i : i + (to_seq - from_seq + 1)]
        out: list[Envelope] = []
        for batch in self._iter_file(from_seq, min(to_seq, self._recent_base - 1)):
            out.extend(batch)
        if to_seq >= self._recent_base:
            out.extend(self._recent[: to_seq - self._recent_base + 1])
        return out

    def _iter_file(self, from_seq: int, to_seq: int) -> Iterator[list[Envelope]]:
        """Envelopes from_seq..to_seq, a record's batch at a time (whole-log readers take
        a million events: per-envelope steps here were a third of their time), reading a
        few MiB of adjacent whole records at once."""
        firsts, offsets, lengths = self._firsts, self._offsets, self._lengths
        records = len(firsts)
        i = bisect.bisect_right(firsts, from_seq) - 1
        last = bisect.bisect_right(firsts, to_seq) - 1
        while i <= last:
            if offsets[i] == _HOLE:
                to = firsts[i + 1] - 1 if i + 1 < records else self._visible_seq
                reason = self._hole_reasons.get(firsts[i], "lost")
                yield lost_envelopes(firsts[i], to, reason,
                                     only=(max(firsts[i], from_seq), min(to, to_seq)))
                i += 1
                continue
            start = offsets[i]
            end = start + HEADER_SIZE + lengths[i]
            k = i
            while k < last and offsets[k + 1] == end:
                after = end + HEADER_SIZE + lengths[k + 1]
                if after - start > _READ_CHUNK:
                    break
                end = after
                k += 1
            data = memoryview(_read_all(self._fd, start, end - start))
            first = firsts[i]
            count = (firsts[k + 1] if k + 1 < records else self._next_seq) - first
            joined = decode_joined([data[offsets[j] - start + HEADER_SIZE :
                                         offsets[j] - start + HEADER_SIZE + lengths[j]]
                                    for j in range(i, k + 1)], first, count) if k > i else None
            if joined is not None:
                if first < from_seq or first + count - 1 > to_seq:
                    joined = joined[max(from_seq - first, 0) : to_seq - first + 1]
                yield joined
                i = k + 1
                continue
            for j in range(i, k + 1):
                body = offsets[j] - start + HEADER_SIZE
                first = firsts[j]
                count = (firsts[j + 1] if j + 1 < records else self._next_seq) - first
                batch = decode_envelopes(data[body : body + lengths[j]], first, count)
                if first < from_seq or first + count - 1 > to_seq:
                    batch = batch[max(from_seq - first, 0) : to_seq - first + 1]
                yield batch  # seqs first … first + count - 1 exactly (decode_envelopes)
            i = k + 1

    def refresh(self) -> int:
        """A read-only log: take in the whole records another process appended since it was
        opened (``cap log show --follow``); returns the last seq.  A partial record at the
        end (an append being written) or damage is left for a later call to look at again."""
        if not self.readonly or self._closed:
            return self._visible_seq
        size = os.fstat(self._fd).st_size
        if size <= self._end:
            return self._visible_seq
        last = self._visible_seq
        for found in scan_file(self._fd, size, Scanner(self._end, last + 1)):
            if type(found) is not Record:
                break
            offset, length, first, count, _ = found
            self._index(offset, length, first)
            self._end = offset + HEADER_SIZE + length
            last = first + count - 1
            self._next_seq = self._recent_base = self._indexed_from = last + 1
        self._publish(last)
        return last

    def close(self) -> None:
        """Close a read-only log without Trio (command-line readers)."""
        if not self.readonly:
            raise RuntimeError("a writable log is closed with aclose(), which flushes it")
        if not self._closed:
            self._closed = True
            os.close(self._fd)

    @property
    def size(self) -> int:
        return self._end


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


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


class _SyncFailed(Exception):
    def __init__(self, error: OSError) -> None:
        self.error = error


def _write_and_sync(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    written = 0
    while written < len(data):
        written += os.pwrite(fd, view[written:], offset + written)
    try:
        os.fsync(fd)
    except OSError as exc:
        raise _SyncFailed(exc) from exc
