"""Sans-io framing of the file log: bytes in, envelopes out, and back.

File layout: an 8-byte magic header, then records of
``u32 length | u32 crc32(payload) | payload`` where the payload is the msgpack
encoding of one :class:`Envelope`.  Scanning stops at the first record that is
short, oversized or fails its CRC; what follows it is the *tail* the caller
decides about.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator

import attrs
import msgspec

from events.envelope import Envelope

MAGIC = b"CAPLOG\x00\x01"
HEADER = struct.Struct("<II")
HEADER_SIZE = HEADER.size
MAX_RECORD = 64 * 1024 * 1024

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Envelope)


class LogFormatError(Exception):
    """The file is not a trio-cap event log (wrong magic)."""


class LogCorrupted(Exception):
    """A bad record sits before valid ones: truncating would drop acknowledged events."""

    def __init__(self, path: str, offset: int, seq: int, detail: str) -> None:
        super().__init__(
            f"{path}: record at byte {offset} (seq {seq}) is corrupt ({detail}) and valid "
            f"records follow it; refusing to truncate acknowledged events"
        )
        self.offset = offset
        self.seq = seq


def encode_into(envelopes: Iterable[Envelope], buf: bytearray) -> list[int]:
    """Append framed records to ``buf``; returns each record's start offset in it."""
    starts = []
    pack_into = HEADER.pack_into
    crc32 = zlib.crc32
    encode_into_ = _encoder.encode_into
    for env in envelopes:
        start = len(buf)
        starts.append(start)
        body = start + HEADER_SIZE
        encode_into_(env, buf, body)
        length = len(buf) - body
        if length > MAX_RECORD:
            del buf[start:]
            raise ValueError(f"event seq {env.seq} encodes to {length} bytes (max {MAX_RECORD})")
        pack_into(buf, start, length, crc32(memoryview(buf)[body:]))
    return starts


@attrs.frozen
class ScanResult:
    offsets: list[int]
    """Start offset of every complete, CRC-valid record (absolute file offsets)."""
    good_end: int
    """Offset just past the last good record: where a torn tail begins."""
    bad_detail: str | None
    """Why scanning stopped before the end, or None when it reached the end cleanly."""


def scan(data: bytes | memoryview, base: int = 0) -> ScanResult:
    """Walk records in ``data`` (which starts at file offset ``base``)."""
    view = memoryview(data)
    size = len(view)
    pos = 0
    offsets: list[int] = []
    unpack_from = HEADER.unpack_from
    crc32 = zlib.crc32
    detail = None
    while pos < size:
        if size - pos < HEADER_SIZE:
            detail = "truncated record header"
            break
        length, crc = unpack_from(view, pos)
        if length == 0 or length > MAX_RECORD:
            detail = f"implausible record length {length}"
            break
        end = pos + HEADER_SIZE + length
        if end > size:
            detail = "truncated record body"
            break
        if crc32(view[pos + HEADER_SIZE : end]) != crc:
            detail = "CRC mismatch"
            break
        offsets.append(base + pos)
        pos = end
    return ScanResult(offsets, base + pos, detail)


def decode_one(data: bytes | memoryview, offset: int = 0) -> Envelope:
    length, _ = HEADER.unpack_from(data, offset)
    return _decoder.decode(memoryview(data)[offset + HEADER_SIZE : offset + HEADER_SIZE + length])


def decode_all(data: bytes | memoryview) -> Iterator[Envelope]:
    """Decode consecutive records already validated by :func:`scan`."""
    view = memoryview(data)
    pos = 0
    size = len(view)
    unpack_from = HEADER.unpack_from
    decode = _decoder.decode
    while pos < size:
        length, _ = unpack_from(view, pos)
        body = pos + HEADER_SIZE
        yield decode(view[body : body + length])
        pos = body + length
