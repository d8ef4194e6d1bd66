"""The EventLog interface and the catch-up-then-live subscription shared by backends.

Subscriptions are *pulled*: a subscriber remembers the next seq it wants and
reads it from the log, sleeping on a change signal only when it has caught up.
Because catch-up and live tail are the same read, there is no seam where an
event could be missed or delivered twice, and a slow subscriber costs the
writer nothing (no per-subscriber queue to fill).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence

import trio

from trio_cap.events.clock import Clock, SystemClock
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import Event
from trio_cap.events.log.errors import LogWriteError  # noqa: F401 - re-exported
from trio_cap.events.log.stream_index import StreamIndex

READ_WINDOW = 4096
"""Seqs :meth:`EventLog.read_async` reads between two checkpoints."""


class LogClosed(Exception):
    """Append after close."""


class EventLog(ABC):
    def __init__(self, clock: Clock | None = None) -> None:
        self._clock: Clock = clock or SystemClock()
        self._next_seq = 1
        self._visible_seq = 0
        self._changed = trio.Event()
        self._closed = False
        self._streams = StreamIndex()
        """Per stream, its seqs from :attr:`_indexed_from` on: reading one session costs
        what that session has, not what the whole log has."""
        self._indexed_from = 1
        """The first seq the index covers (a log opened read-only indexes only what it
        reads from then on; a writable file log indexes the whole file when it opens)."""

    # ---- writing -------------------------------------------------------
    @property
    def last_seq(self) -> int:
        """Highest acknowledged seq (0 for an empty log)."""
        return self._visible_seq

    def _envelopes(
        self, events: Iterable[Event], stream: str, cause: int | None
    ) -> list[Envelope]:
        """Number a batch and reserve its seqs — only once the backend accepted it.

        Numbering, :meth:`_accept` and the reservation run without a
        checkpoint between them, so concurrent appenders cannot interleave,
        and a batch the backend refuses leaves no seq gap behind.
        """
        if self._closed:
            raise LogClosed("the event log is closed")
        at = self._clock.now()
        seq = self._next_seq
        envs = [Envelope(seq + i, at, stream, cause, ev) for i, ev in enumerate(events)]
        if envs:
            self._accept(envs)
            self._next_seq = seq + len(envs)
            self._streams.add(stream, seq, seq + len(envs) - 1)
        return envs

    async def append(
        self, events: Iterable[Event], *, stream: str = "", cause: int | None = None
    ) -> int:
        """Store a batch; returns the last seq once the batch is acknowledged.

        An empty batch is a no-op that returns the current last seq.  A batch
        the backend refuses (:class:`~trio_cap.events.log.errors.EventRejected`)
        raises before anything is stored; other write failures raise
        :class:`LogWriteError` and the log takes no further appends.
        """
        envs = self._envelopes(events, stream, cause)
        if not envs:
            await trio.lowlevel.checkpoint()
            return self._visible_seq
        await self._store(envs)
        return envs[-1].seq

    def _accept(self, envs: list[Envelope]) -> None:  # noqa: B027 - optional hook
        """Check (and, for a file, encode) a batch before its seqs are reserved; may raise."""

    @abstractmethod
    async def _store(self, envs: list[Envelope]) -> None: ...

    def _publish(self, seq: int) -> None:
        if seq > self._visible_seq:
            self._visible_seq = seq
            self._changed.set()
            self._changed = trio.Event()

    # ---- reading -------------------------------------------------------
    @abstractmethod
    def _read_range(self, from_seq: int, to_seq: int) -> list[Envelope]:
        """Envelopes with from_seq <= seq <= to_seq, all visible."""

    def read(
        self,
        from_seq: int = 1,
        stream: str | None = None,
        *,
        until: int | None = None,
        limit: int | None = None,
    ) -> list[Envelope]:
        """Acknowledged events from ``from_seq`` on (optionally one stream, up to ``until``).

        ``limit`` bounds how many seqs are scanned, not how many match ``stream``.
        """
        start, end = self._bounds(from_seq, until, limit)
        if start > end:
            return []
        if stream is not None and start >= self._indexed_from:
            return self._read_stream(stream, start, end)
        envs = self._read_range(start, end)
        if stream is not None:
            envs = [e for e in envs if e.stream == stream]
        return envs

    def _bounds(self, from_seq: int, until: int | None, limit: int | None) -> tuple[int, int]:
        start = max(from_seq, 1)
        end = self._visible_seq if until is None else min(until, self._visible_seq)
        if limit is not None:
            end = min(end, start + limit - 1)
        return start, end

    async def read_async(
        self,
        from_seq: int = 1,
        stream: str | None = None,
        *,
        until: int | None = None,
        limit: int | None = None,
    ) -> list[Envelope]:
        """:meth:`read` for code in the event loop: what a backend holds off this process
        (PostgreSQL) is read in a worker thread, one stream through its index, and a long
        range a window at a time with a checkpoint between, so reading the whole log never
        holds the loop for all of it."""
        start, end = self._bounds(from_seq, until, limit)
        out: list[Envelope] = []
        if stream is not None and start <= end and (
                start >= self._indexed_from or self._reads_old_streams):
            if start < self._indexed_from:
                out = await self._read_old_stream_async(
                    stream, start, min(end, self._indexed_from - 1))
                start = self._indexed_from
            if start <= end:
                out.extend(await self._read_stream_async(stream, start, end))
            await trio.lowlevel.checkpoint()
            return out
        seq = start
        while seq <= end:
            last = min(end, seq + READ_WINDOW - 1)
            envs = await self._read_range_async(seq, last)
            out.extend(envs if stream is None else [e for e in envs if e.stream == stream])
            seq = last + 1
            await trio.lowlevel.checkpoint()
        if start > end:
            await trio.lowlevel.checkpoint()
        return out

    def _read_stream(self, stream: str, start: int, end: int) -> list[Envelope]:
        """One stream's events through the index: each run of consecutive seqs is one
        range read (one appended batch is one stream, so a run is whole records, but in a
        file ``cap log copy`` or ``repair`` wrote, whose records may mix streams)."""
        out: list[Envelope] = []
        for lo, hi in self._streams.runs(stream, start, end):
            out.extend(self._read_range(lo, hi))
        return out

    async def _read_range_async(self, from_seq: int, to_seq: int) -> list[Envelope]:
        """:meth:`_read_range` for a subscriber in the event loop: a backend whose older
        events are a network round trip away (PostgreSQL) reads them off the loop."""
        return self._read_range(from_seq, to_seq)

    _reads_old_streams = False
    """The backend can read one stream's events from before this process opened it by an
    index of its own (:meth:`_read_old_stream_async`), not by scanning every stream's."""

    async def _read_old_stream_async(self, stream: str, start: int, end: int
                                     ) -> list[Envelope]:
        raise NotImplementedError

    async def _read_stream_async(self, stream: str, start: int, end: int,
                                 limit: int | None = None) -> list[Envelope]:
        out: list[Envelope] = []
        for lo, hi in self._streams.runs(stream, start, end, limit):
            out.extend(await self._read_range_async(lo, hi))
        return out

    def subscribe(
        self, from_seq: int = 1, stream: str | None = None, *, batch: int = 4096
    ) -> Subscription:
        """Catch up from ``from_seq``, then follow live appends until the log closes."""
        return Subscription(self, from_seq, stream, batch)

    # ---- lifecycle -----------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._close_backend()
            self._changed.set()

    async def _close_backend(self) -> None:
        await trio.lowlevel.checkpoint()

    async def __aenter__(self) -> EventLog:
        return self

    async def __aexit__(self, *exc: object) -> None:
        with trio.CancelScope(shield=True):
            await self.aclose()


class Subscription:
    """Async iterator of batches (lists of envelopes), in seq order, gap-free."""

    def __init__(self, log: EventLog, from_seq: int, stream: str | None, batch: int) -> None:
        self._log = log
        self.next_seq = max(from_seq, 1)
        self._stream = stream
        self._batch = batch

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Sequence[Envelope]:
        log = self._log
        while True:
            changed = log._changed
            if (self._stream is not None and self.next_seq <= log._visible_seq and (
                    self.next_seq >= log._indexed_from or log._reads_old_streams)):
                # one session's subscriber must not read every other session's events
                if self.next_seq >= log._indexed_from:
                    end = log._visible_seq
                    envs = await log._read_stream_async(self._stream, self.next_seq, end,
                                                        self._batch)
                else:  # before this process opened the log: the backend's own index
                    end = min(log._indexed_from - 1, log._visible_seq)
                    envs = await log._read_old_stream_async(self._stream, self.next_seq, end)
                envs = envs[: self._batch]
                self.next_seq = envs[-1].seq + 1 if envs else end + 1
                if envs:
                    await trio.lowlevel.checkpoint()
                    return envs
                continue
            if self.next_seq <= log._visible_seq:
                envs = await log._read_range_async(
                    self.next_seq, min(log._visible_seq, self.next_seq + self._batch - 1)
                )
                self.next_seq = envs[-1].seq + 1
                if self._stream is not None:
                    envs = [e for e in envs if e.stream == self._stream]
                if envs:
                    await trio.lowlevel.checkpoint()
                    return envs
                continue
            if log._closed:
                raise StopAsyncIteration
            await changed.wait()
