"""Building and damaging .caplog files for the damage tests (library and CLI)."""

from __future__ import annotations

import struct
from pathlib import Path

import msgspec
import trio

from trio_cap.events.kinds import TextChunk
from trio_cap.events.log import FileEventLog
from trio_cap.events.log.records import HEADER, HEADER_SIZE, MAGIC, frame


def chunk(i: int) -> TextChunk:
    return TextChunk(message_id="m", text=f"event number {i}")


def make_log(path: Path, batches: int = 6, per_batch: int = 3) -> list[tuple[int, int]]:
    """A clean log of ``batches`` records; returns each record's (offset, end)."""

    async def write() -> list[tuple[int, int]]:
        spans = []
        log = FileEventLog(path, fsync="never")
        n = 0
        for _ in range(batches):
            start = log.size
            await log.append([chunk(n + k) for k in range(per_batch)], stream="s")
            n += per_batch
            spans.append((start, log.size))
        await log.aclose()
        return spans

    return trio.run(write)


def texts(envs) -> list[str]:
    return [e.event.text for e in envs if isinstance(e.event, TextChunk)]


def all_texts(batches: int = 6, per_batch: int = 3, *, skip: range = range(0)) -> list[str]:
    return [chunk(i).text for i in range(batches * per_batch) if i not in skip]


def flip(path: Path, offset: int, mask: int = 0x01) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= mask
    path.write_bytes(bytes(data))


def record_at(data: bytes, offset: int) -> tuple[int, int, int, int, bytes]:
    length, crc, first, count = HEADER.unpack_from(data, offset)
    return length, crc, first, count, data[offset + HEADER_SIZE : offset + HEADER_SIZE + length]


def replace_record(path: Path, span: tuple[int, int], new: bytes) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: span[0]] + new + data[span[1] :])


def envelope_payload(envelopes: list) -> bytes:
    """A payload from raw envelope lists ``[seq, at, stream, cause, event-map]``."""
    return msgspec.msgpack.encode(envelopes)


def crc_valid_record(first: int, count: int, payload: bytes) -> bytes:
    return frame(first, count, payload)


def set_length(path: Path, offset: int, length: int) -> None:
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, offset, length)
    path.write_bytes(bytes(data))


__all__ = ["HEADER_SIZE", "MAGIC"]
