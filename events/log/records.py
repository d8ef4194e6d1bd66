"""Sans-io framing of the file log: bytes in, envelopes out, and back.

File layout: an 8-byte magic header, then records.  A record holds one batch
of consecutive envelopes — what one ``append`` acknowledged, split at
:data:`MAX_BATCH` — because every hop in trio-cap moves batches, and one CRC
and one msgpack call per batch cost far less than one per event::

    u32 length | u32 crc32 | u64 first_seq | u32 count | payload (length bytes)

``payload`` is the msgpack array of the batch's envelopes; the CRC covers
``first_seq``, ``count`` and the payload, so the index can be rebuilt from
headers alone.  Scanning stops at the first record that is short, oversized,
fails its CRC or does not continue the previous record's seqs; what follows
is the *tail* the caller decides about.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence

import attrs
import msgspec

from trio_cap.events.envelope import Envelope

MAGIC = b"CAPLOG\x00\x02"
HEADER = struct.Struct("<IIQI")
HEADER_SIZE = HEADER.size
_CRC_FROM = 8  # the CRC covers first_seq, count and the payload
MAX_RECORD = 64 * 1024 * 1024
MAX_BATCH = 4096

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[Envelope])


class LogFormatError(Exception):
    """The file is not a trio-cap event log (wrong magic)."""


class LogCorrupted(Exception):
    """A bad record sits before valid ones: truncating would drop acknowledged events."""

    def __init__(self, path: str, offset: int, seq: int, detail: str) -> None:
        super().__init__(
            f"{path}: record at byte {offset} (from seq {seq}) is corrupt ({detail}) and "
            f"valid records follow it; refusing to truncate acknowledged events"
        )
        self.offset = offset
        self.seq = seq


@attrs.frozen
class RecordSpan:
    offset: int
    first_seq: int
    count: int


def encode_into(envelopes: Sequence[Envelope], buf: bytearray) -> list[RecordSpan]:
    """Append the batch to ``buf`` as records; offsets are relative to ``buf``."""
    spans = []
    for i in range(0, len(envelopes), MAX_BATCH):
        chunk = envelopes[i : i + MAX_BATCH]
        start = len(buf)
        body = start + HEADER_SIZE
        _encoder.encode_into(chunk, buf, body)
        length = len(buf) - body
        if length > MAX_RECORD:
            del buf[start:]
            raise ValueError(f"a batch from seq {chunk[0].seq} encodes to {length} bytes "
                             f"(max {MAX_RECORD})")
        HEADER.pack_into(buf, start, length, 0, chunk[0].seq, len(chunk))
        crc = zlib.crc32(memoryview(buf)[start + _CRC_FROM :])
        struct.pack_into("<I", buf, start + 4, crc)
        spans.append(RecordSpan(start, chunk[0].seq, len(chunk)))
    return spans


@attrs.frozen
class ScanResult:
    spans: list[RecordSpan]
    """Every complete, CRC-valid record, with absolute file offsets."""
    good_end: int
    """Offset just past the last good record: where a torn tail begins."""
    bad_detail: str | None
    """Why scanning stopped before the end, or None when it reached the end cleanly."""


def scan(data: bytes | memoryview, base: int = 0, next_seq: int | None = 1) -> ScanResult:
    """Walk records in ``data`` (which starts at file offset ``base``).

    ``next_seq`` is the seq the first record must start at (None: any).
    """
    view = memoryview(data)
    size = len(view)
    pos = 0
    spans: list[RecordSpan] = []
    unpack_from = HEADER.unpack_from
    crc32 = zlib.crc32
    detail = None
    while pos < size:
        if size - pos < HEADER_SIZE:
            detail = "truncated record header"
            break
        length, crc, first, count = unpack_from(view, pos)
        if length == 0 or length > MAX_RECORD or count == 0:
            detail = f"implausible record header (length {length}, count {count})"
            break
        end = pos + HEADER_SIZE + length
        if end > size:
            detail = "truncated record body"
            break
        if crc32(view[pos + _CRC_FROM : end]) != crc:
            detail = "CRC mismatch"
            break
        if next_seq is not None and first != next_seq:
            detail = f"record starts at seq {first}, expected {next_seq}"
            break
        spans.append(RecordSpan(base + pos, first, count))
        next_seq = first + count
        pos = end
    return ScanResult(spans, base + pos, detail)


def record_length(data: bytes | memoryview, offset: int) -> int:
    return HEADER.unpack_from(data, offset)[0]


def decode_records(data: bytes | memoryview) -> Iterator[list[Envelope]]:
    """Decode consecutive records already validated by :func:`scan`, a batch at a time."""
    view = memoryview(data)
    pos = 0
    size = len(view)
    unpack_from = HEADER.unpack_from
    decode = _decoder.decode
    while pos < size:
        length = unpack_from(view, pos)[0]
        body = pos + HEADER_SIZE
        yield decode(view[body : body + length])
        pos = body + length


def decode_all(data: bytes | memoryview) -> list[Envelope]:
    out: list[Envelope] = []
    for batch in decode_records(data):
        out.extend(batch)
    return out


def flatten(batches: Iterable[list[Envelope]]) -> list[Envelope]:
    out: list[Envelope] = []
    for batch in batches:
        out.extend(batch)
    return out
