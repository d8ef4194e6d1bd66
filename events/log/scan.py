"""Sans-io scanner of a log file: bytes in (in order, any chunking), findings out.

The shell feeds the bytes after the magic header with :meth:`Scanner.feed`
(``b""`` means end of file) and pulls findings with :meth:`Scanner.next_event`
until :data:`END`.  No I/O here; the scanner holds at most about two maximal
records of the file at a time, whatever the file's size.

Findings: :class:`Record` (valid and in seq order), :class:`SeqGap` (seqs no
record holds), :class:`Damage` (a byte range that is not valid records).

States and transitions::

    SCAN    valid record, first_seq == next         -> Record              SCAN
    SCAN    valid record, first_seq >  next         -> SeqGap, Record      SCAN
    SCAN    valid record, first_seq <  next         -> Damage (repeats)    SCAN after it
    SCAN    bad header or CRC, or cut at EOF        ->                     RESYNC from it
    SCAN    at EOF on a record boundary             -> END                 DONE
    RESYNC  valid record at a later offset c        -> Damage [, Record]   SCAN at c
    RESYNC  none up to EOF                          -> Damage (torn?)      DONE
    any     record or search needs more bytes       -> NEED_DATA

Rules:

* RESYNC tries *every* offset after the damage, not only where a damaged
  header says the next record starts (a damaged length points anywhere);
  candidates are found by a fixed byte pattern around the first envelope's
  marker, then fully checked (header, payload prefix, CRC).
* A damaged span that is exactly one record whose CRC matches once its
  length is taken from the span and its count and first seq from its payload
  is that record with damaged header fields: reported as damage, and the
  record is given back too (the CRC covers the payload, so a damaged body
  never passes).
* Only the final damage can be ``torn`` — provably a torn final append — and
  only if all hold: no valid record starts anywhere inside it; it is shorter
  than one maximal record (:data:`MAX_TORN`); every header field it has is
  plausible and continues the seqs (length, first_seq, count, payload prefix);
  the record its header describes does not fit in it (a prefix, not a
  complete record with a bad CRC); and it is not a complete record with a
  damaged length.  Anything else is damage a writer must not cut.
"""

from __future__ import annotations

import heapq
import re
import struct
import zlib
from collections import deque
from collections.abc import Iterator
from typing import Final, NamedTuple

import attrs

from trio_cap.events.log.records import (
    CRC_FROM,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    MAX_BATCH,
    MAX_RECORD,
    MAX_TORN,
    PREFIX_NEEDED,
    header_problem,
    payload_prefix,
)


class Record(NamedTuple):
    """A valid record (a tuple: a scan makes one per record, so it must be cheap)."""

    offset: int
    length: int
    """Payload bytes (taken from the span when the length field was damaged)."""
    first_seq: int
    count: int
    payload: bytes | None = None

    @property
    def end(self) -> int:
        return self.offset + HEADER_SIZE + self.length

    @property
    def last_seq(self) -> int:
        return self.first_seq + self.count - 1


@attrs.frozen
class SeqGap:
    from_seq: int
    to_seq: int
    at_offset: int
    """Where the record after the gap starts."""


@attrs.frozen
class Damage:
    start: int
    end: int
    after_seq: int
    """The last seq before the damage (0: none)."""
    detail: str
    torn: bool = False
    """Provably a torn final append (see the module rules): safe to cut."""
    kept: bool = False
    """The span is one intact record with a damaged length field: it was read all the same."""

    def describe(self) -> str:
        """``bytes A–B (after seq N): detail``."""
        return f"bytes {self.start}–{self.end} (after seq {self.after_seq}): {self.detail}"


class _Sentinel:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


NEED_DATA: Final = _Sentinel("NEED_DATA")
END: Final = _Sentinel("END")

Finding = Record | SeqGap | Damage | _Sentinel

# length < 2**27 (checked exactly later), seq < 2**40, count <= 4096,
# payload = an array of count, then a 5-array (the first envelope).
_CANDIDATE = re.compile(
    rb"(?=[\x00-\xff]{3}[\x00-\x07][\x00-\xff]{9}\x00\x00\x00[\x00-\xff][\x00-\x10]\x00\x00"
    rb"(?:[\x91-\x9f]|\xdc[\x00-\xff]{2})\x95)"
)
_COMPACT = 1 << 20
_ENVELOPE = b"\x95"  # every payload's first envelope starts with it: 21 or 23 bytes in


def _candidates(buf: bytearray, lo: int) -> Iterator[int]:
    """Offsets >= ``lo`` where a record header could start, in increasing order.

    Finding the envelope marker with ``bytes.find`` (memchr) and checking the
    pattern only there keeps a search through megabytes of garbage fast.
    """
    waiting: list[int] = []
    j = buf.find(_ENVELOPE, lo + 21)
    while j != -1:
        while waiting and waiting[0] < j - 23:
            yield heapq.heappop(waiting)
        for c in (j - 23, j - 21):
            if c >= lo and _CANDIDATE.match(buf, c):
                heapq.heappush(waiting, c)
        j = buf.find(_ENVELOPE, j + 1)
    while waiting:
        yield heapq.heappop(waiting)


_ARRAYS = [bytes((0x90 | n,)) + b"\x95" if n < 16 else b"\xdc" + n.to_bytes(2, "big") + b"\x95"
           for n in range(MAX_BATCH + 1)]


def _prefix(first: int, count: int) -> bytes:
    """How msgspec starts a payload of ``count`` envelopes from seq ``first``."""
    if first < 0x80:
        return _ARRAYS[count] + bytes((first,))
    if first < 1 << 16:
        return _ARRAYS[count] + (b"\xcc" + first.to_bytes(1, "big") if first < 1 << 8
                                 else b"\xcd" + first.to_bytes(2, "big"))
    if first < 1 << 32:
        return _ARRAYS[count] + b"\xce" + first.to_bytes(4, "big")
    return _ARRAYS[count] + b"\xcf" + first.to_bytes(8, "big")


class Scanner:
    """The machine of the module docstring; one per pass over a file.

    ``next_seq`` is the seq the first record should start at; with
    ``keep_payload`` each :class:`Record` carries its payload bytes (repair
    copies them), otherwise only where it is (a reader decodes lazily).
    """

    def __init__(self, base: int = len(MAGIC), next_seq: int = 1, *,
                 keep_payload: bool = False) -> None:
        self._buf = bytearray()
        self._base = base  # file offset of _buf[0]
        self._pos = base  # SCAN: where the next record starts
        self._eof = False
        self._next_seq = next_seq
        self._keep = keep_payload
        self._damage: int | None = None  # RESYNC: first damaged byte
        self._detail = ""
        self._search = 0  # RESYNC: next offset to try
        self._out: deque[Finding] = deque()
        self._done = False
        self.want = base
        """File offset the scanner needs data up to (a hint for the read size)."""

    # ---- input ---------------------------------------------------------------
    @property
    def fed_to(self) -> int:
        """File offset of the next byte to feed."""
        return self._base + len(self._buf)

    @property
    def next_seq(self) -> int:
        return self._next_seq

    def feed(self, data: bytes) -> None:
        if self._eof:
            raise RuntimeError("data fed after end of file")
        if not data:
            self._eof = True
        self._buf += data

    # ---- output --------------------------------------------------------------
    def next_event(self) -> Finding:
        while not self._out:
            if self._done:
                return END
            step = self._resync() if self._damage is not None else self._scan()
            if step is NEED_DATA:
                return NEED_DATA
        return self._out.popleft()

    # ---- SCAN ----------------------------------------------------------------
    def _scan(self) -> _Sentinel | None:
        if self._run_of_records():
            self._compact(self._pos)
            return None
        pos, end = self._pos, self.fed_to
        if pos == end and self._eof:
            self._done = True
            return None
        if end - pos < HEADER_SIZE:
            return self._more(pos + HEADER_SIZE, cut_at=pos)
        i = pos - self._base
        length, crc, first, count = HEADER.unpack_from(self._buf, i)
        body = i + HEADER_SIZE
        prefix_end = pos + HEADER_SIZE + min(length, PREFIX_NEEDED)
        if prefix_end > end and not self._eof and length <= MAX_RECORD:
            return self._more(prefix_end, cut_at=pos)
        problem = header_problem(length, first, count, memoryview(self._buf)[body : body + min(
            length, PREFIX_NEEDED)])
        if problem:
            return self._start_resync(pos, problem)
        if pos + HEADER_SIZE + length > end:
            return self._more(pos + HEADER_SIZE + length, cut_at=pos, detail="truncated record")
        if zlib.crc32(memoryview(self._buf)[i + CRC_FROM : body + length]) != crc:
            return self._start_resync(pos, "CRC mismatch")
        self._accept(Record(pos, length, first, count, self._payload(body, length)))
        self._pos = pos + HEADER_SIZE + length
        self._compact(self._pos)
        return None

    def _run_of_records(self) -> bool:
        """The fast path: every complete, plainly valid, in-order record in the buffer.

        Stops at the first record it is not sure of; the checks of
        :meth:`_scan` then decide about that one.  True if it took any.
        """
        buf, base, out, keep = self._buf, self._base, self._out, self._keep
        pos, end, nxt = self._pos, self.fed_to, self._next_seq
        unpack, crc32 = HEADER.unpack_from, zlib.crc32
        with memoryview(buf) as view:
            while end - pos >= HEADER_SIZE:
                i = pos - base
                length, crc, first, count = unpack(buf, i)
                body = i + HEADER_SIZE
                stop = body + length
                if (first != nxt or not 0 < length <= MAX_RECORD or not 0 < count <= MAX_BATCH
                        or stop > end - base):
                    break
                prefix = _prefix(first, count)
                if view[body : body + len(prefix)] != prefix or \
                        crc32(view[i + CRC_FROM : stop]) != crc:
                    break
                out.append(Record(pos, length, first, count,
                                  bytes(view[body:stop]) if keep else None))
                nxt = first + count
                pos = base + stop
        took = pos != self._pos
        self._pos, self._next_seq = pos, nxt
        return took

    def _more(self, want: int, *, cut_at: int, detail: str = "truncated record header"
              ) -> _Sentinel | None:
        if self._eof:
            return self._start_resync(cut_at, detail)
        self.want = want
        return NEED_DATA

    def _accept(self, rec: Record) -> None:
        """Seq rules for a valid record: continue, jump (a gap), or repeat (skipped)."""
        nxt = self._next_seq
        if rec.first_seq < nxt:
            self._out.append(Damage(rec.offset, rec.end, nxt - 1,
                                    f"a valid record repeats seqs {rec.first_seq}–{rec.last_seq}"))
            return
        if rec.first_seq > nxt:
            self._out.append(SeqGap(nxt, rec.first_seq - 1, rec.offset))
        self._out.append(rec)
        self._next_seq = rec.last_seq + 1

    def _payload(self, body: int, length: int) -> bytes | None:
        return bytes(self._buf[body : body + length]) if self._keep else None

    # ---- RESYNC --------------------------------------------------------------
    def _start_resync(self, at: int, detail: str) -> None:
        self._damage = at
        self._detail = detail
        self._search = at + 1
        return None

    def _resync(self) -> _Sentinel | None:
        start = self._damage
        assert start is not None
        buf = self._buf
        for index in _candidates(buf, max(self._search - self._base, 0)):
            c = self._base + index
            found = self._candidate(c)
            if found is NEED_DATA:
                return NEED_DATA
            if found:
                self._end_damage(start, c)
                self._damage = None
                self._pos = c
                return None
            self._search = c + 1
        if not self._eof:
            # keep enough to match a header that straddles the next chunk
            self._search = max(self._search, self.fed_to - HEADER_SIZE - PREFIX_NEEDED)
            keep = start if self._search - start < MAX_TORN else self._search
            self._compact(keep, force=True)
            self.want = self.fed_to + 1
            return NEED_DATA
        self._end_damage(start, self.fed_to)
        self._done = True
        return None

    def _candidate(self, c: int) -> bool | _Sentinel:
        """Is a valid record at ``c``?  NEED_DATA when its bytes are not all here yet."""
        i = c - self._base
        length, crc, first, count = HEADER.unpack_from(self._buf, i)
        body = i + HEADER_SIZE
        if header_problem(length, first, count, memoryview(self._buf)[body : body + min(
                length, PREFIX_NEEDED)]):
            return False
        if c + HEADER_SIZE + length > self.fed_to:
            if self._eof:
                return False
            self.want = c + HEADER_SIZE + length
            return NEED_DATA
        return zlib.crc32(memoryview(self._buf)[i + CRC_FROM : body + length]) == crc

    def _end_damage(self, start: int, end: int) -> None:
        """Report the span; recover a record whose length field alone is damaged."""
        after = self._next_seq - 1
        fixed = self._header_fixed(start, end)
        final = end == self.fed_to and self._eof
        if fixed is not None:
            record, fields = fixed
            self._out.append(Damage(start, end, after, f"{self._detail}: the record's {fields} "
                                    f"damaged; the record itself is intact and was read",
                                    kept=True))
            self._accept(record)
            return
        torn = final and self._torn(start, end)
        self._out.append(Damage(start, end, after, self._detail, torn))

    def _span(self, start: int, end: int) -> memoryview | None:
        if start < self._base:
            return None
        return memoryview(self._buf)[start - self._base : end - self._base]

    def _header_fixed(self, start: int, end: int) -> tuple[Record, str] | None:
        """The span as one intact record whose length, count or first seq field is damaged.

        The length is the span's; count and first seq are read from the
        payload itself.  Only a CRC match over the payload with those fields
        makes it a record, so a damaged body is never taken.
        """
        span = self._span(start, end)
        if span is None or len(span) <= HEADER_SIZE or len(span) > MAX_TORN:
            return None
        stored_length, crc, stored_first, stored_count = HEADER.unpack_from(span, 0)
        length = len(span) - HEADER_SIZE
        payload = span[HEADER_SIZE:]
        found = payload_prefix(payload[:PREFIX_NEEDED])
        if found is None:
            return None
        count, first = found
        if not 0 < count <= MAX_BATCH or header_problem(length, first, count,
                                                         payload[:PREFIX_NEEDED]):
            return None
        fields = struct.pack("<QI", first, count)
        if zlib.crc32(payload, zlib.crc32(fields)) != crc:
            return None
        damaged = [name for name, ok in (("length", stored_length == length),
                                         ("count", stored_count == count),
                                         ("first seq", stored_first == first)) if not ok]
        what = " and ".join(damaged) + (" field is" if len(damaged) == 1 else " fields are")
        return Record(start, length, first, count, bytes(payload) if self._keep else None), what

    def _torn(self, start: int, end: int) -> bool:
        if end - start >= MAX_TORN:
            return False
        span = self._span(start, end)
        if span is None:
            return False
        n = len(span)
        if n >= 4:
            length = int.from_bytes(span[0:4], "little")
            if not 0 < length <= MAX_RECORD or n >= HEADER_SIZE + length:
                return False
        if n >= 16 and int.from_bytes(span[8:16], "little") != self._next_seq:
            return False
        if n >= 20 and not 0 < int.from_bytes(span[16:20], "little") <= MAX_BATCH:
            return False
        if n >= HEADER_SIZE:
            length, _, first, count = HEADER.unpack_from(span, 0)
            prefix = span[HEADER_SIZE : HEADER_SIZE + PREFIX_NEEDED]
            if header_problem(length, first, count, prefix):
                return False
        return True

    # ---- buffer --------------------------------------------------------------
    def _compact(self, keep_from: int, *, force: bool = False) -> None:
        drop = keep_from - self._base
        if drop > 0 and (force or drop >= _COMPACT):
            del self._buf[:drop]
            self._base = keep_from
