"""Per stream, which seqs it holds: the index that makes reading one session cost what
that session has, not what the whole log has.

A stream's seqs are kept as runs of consecutive seqs (two ``array('q')``: starts and
ends), because one append is one stream and one run: a session of a few hundred events
costs a few hundred bytes, however long the log.  Runs are added in seq order (appends,
a backend's read-back, an open-time scan of a file), so a lookup is a bisection.

:func:`index_payload` indexes a stored file-log record without decoding its events: the
open-time scan of a writable file log calls it for every record, so a reopened log
reads one session as cheaply as one it wrote itself.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from operator import attrgetter

import msgspec

from trio_cap.events.log.records import decode_payload


class StreamIndex:
    __slots__ = ("_runs",)

    def __init__(self) -> None:
        self._runs: dict[str, tuple[array, array]] = {}

    def add(self, stream: str, first: int, last: int) -> None:
        """Seqs ``first`` … ``last`` belong to ``stream`` (after every seq added before)."""
        runs = self._runs.get(stream)
        if runs is None:
            self._runs[stream] = (array("q", (first,)), array("q", (last,)))
            return
        starts, ends = runs
        if ends[-1] == first - 1:
            ends[-1] = last
        else:
            starts.append(first)
            ends.append(last)

    def runs(self, stream: str, start: int, end: int, limit: int | None = None
             ) -> list[tuple[int, int]]:
        """The runs of ``stream``'s seqs within ``start`` … ``end``, clipped to it; with
        ``limit``, only the first ``limit`` seqs (a subscriber's batch: catching up on a
        long stream then costs what it delivers, not the whole rest of the stream)."""
        runs = self._runs.get(stream)
        if runs is None:
            return []
        starts, ends = runs
        i = bisect_left(ends, start)  # the first run that ends at or after start
        out: list[tuple[int, int]] = []
        left = end - start + 1 if limit is None else limit
        while i < len(starts) and starts[i] <= end and left > 0:
            lo = max(starts[i], start)
            hi = min(ends[i], end, lo + left - 1)
            out.append((lo, hi))
            left -= hi - lo + 1
            i += 1
        return out

    def __contains__(self, stream: str) -> bool:
        return stream in self._runs


class _Where(msgspec.Struct, array_like=True, gc=False):
    """An envelope's first three fields; msgspec skips the cause and the event unread."""

    seq: int
    at: float
    stream: str


_where = msgspec.msgpack.Decoder(list[_Where])
_seq, _stream = attrgetter("seq"), attrgetter("stream")


def index_payload(index: StreamIndex, payload: bytes, first: int, count: int) -> None:
    """Add one record's seqs under the streams a read of it would show.

    A record ``append`` wrote is one stream; one ``cap log copy`` or ``cap log repair``
    wrote may hold several, each run added in order.  A payload the quick decode does
    not take is indexed from the full decode, placeholders and all, so the index
    never disagrees with a read.
    """
    try:
        wheres = _where.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        wheres = None
    if wheres is None or list(map(_seq, wheres)) != list(range(first, first + count)):
        _index_decoded(index, payload, first, count)  # a read shows placeholders: index those
        return
    streams = list(map(_stream, wheres))
    if streams.count(streams[0]) == count:  # what append wrote: one run, no loop in Python
        index.add(streams[0], first, first + count - 1)
        return
    start = 0
    for k in range(1, count):
        if streams[k] != streams[start]:
            index.add(streams[start], first + start, first + k - 1)
            start = k
    index.add(streams[start], first + start, first + count - 1)


def _index_decoded(index: StreamIndex, payload: bytes, first: int, count: int) -> None:
    for env in decode_payload(payload, first, count).envs:
        index.add(env.stream, env.seq, env.seq)
