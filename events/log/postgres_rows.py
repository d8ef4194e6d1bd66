"""Sans-io conversion between events and ``cap_events`` rows (no database here).

A row's ``payload`` is the event as msgpack — byte for byte what the file log
stores inside its envelope — so ``cap log copy`` moves payloads between the
two forms without re-encoding anything, and a row this build cannot decode
(a newer trio-cap's kind) is shown raw exactly as the file log shows it.

Rows decode in one msgspec call per batch: the rows are framed as a msgpack
array of envelopes around the stored payloads (a copy, no re-encoding) and
decoded like a file record; only if that fails is each row decoded alone
through the file log's lenient path.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import msgspec

from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import Event
from trio_cap.events.log.errors import EventRejected, EventTooLarge
from trio_cap.events.log.records import MAX_RECORD, decode_payload

Row = tuple[int, float, str, int | None, bytes]
"""``(seq, at, stream, cause, payload)`` as the reader's query returns them."""

_encoder = msgspec.msgpack.Encoder()
_envelopes = msgspec.msgpack.Decoder(list[Envelope])
_int4 = struct.Struct(">i")
_kind_elements: dict[type, bytes] = {}
"""An event type's kind as an array element (length, UTF-8): one per type, built once."""


def kind_of(event: Event) -> str:
    return event.__struct_config__.tag  # type: ignore[return-value]


def encode_events(events: Sequence[Event]) -> tuple[list[str], list[bytes]]:
    """Kinds and payloads of a batch; raises before anything is sent if one cannot be stored."""
    kinds: list[str] = []
    payloads: list[bytes] = []
    for event in events:
        try:
            payload = _encoder.encode(event)
        except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as exc:
            raise EventRejected(f"a {kind_of(event)} event cannot be stored: {exc}") from None
        if len(payload) > MAX_RECORD:
            raise EventTooLarge(
                f"one {kind_of(event)} event encodes to {len(payload):,} bytes; a log record "
                f"holds at most {MAX_RECORD:,} bytes, so it was refused and nothing was logged")
        kinds.append(kind_of(event))
        payloads.append(payload)
    return kinds, payloads


def encode_batch(events: Sequence[Event]) -> tuple[bytes, bytearray]:
    """A batch's kinds and payloads as the elements of a binary ``text[]`` and ``bytea[]``
    parameter (each an int4 length and the bytes), ready to be framed as arrays.

    The payloads are encoded into one growing buffer, each behind a length patched in
    after it: no bytes object and no list entry per event, which cost a 1,000-event batch
    more than msgpack itself.  Refuses exactly what :func:`encode_events` refuses, before
    anything is sent (it is run for the message when something cannot be stored)."""
    buf = bytearray()
    kinds: list[bytes] = []
    elements = _kind_elements
    encode_into = _encoder.encode_into
    length_at = _int4.pack_into
    try:
        for event in events:
            start = len(buf)
            encode_into(event, buf, start + 4)
            size = len(buf) - start - 4
            if size > MAX_RECORD:
                break
            length_at(buf, start, size)
            kind = elements.get(type(event))
            if kind is None:
                tag = kind_of(event).encode()
                kind = elements[type(event)] = _int4.pack(len(tag)) + tag
            kinds.append(kind)
        else:
            return b"".join(kinds), buf
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        pass
    encode_events(events)  # raises the error that names the event
    raise EventRejected("a batch could not be encoded")  # pragma: no cover - raised above


def split_elements(body: bytes | bytearray) -> list[bytes]:
    """The elements of an array body :func:`encode_batch` built (the rare retry path)."""
    out: list[bytes] = []
    view, at = memoryview(body), 0
    while at < len(body):
        (size,) = _int4.unpack_from(view, at)
        out.append(bytes(view[at + 4 : at + 4 + size]))
        at += 4 + size
    return out


def encode_envelope_rows(envs: Iterable[Envelope]) -> list[Row]:
    """Rows for envelopes that already have seqs (``cap log copy`` into PostgreSQL)."""
    return [(e.seq, e.at, e.stream, e.cause, _encoder.encode(e.event)) for e in envs]


def _frame(rows: Sequence[Row]) -> bytes:
    return _encoder.encode([[seq, at, stream, cause, msgspec.Raw(payload)]
                            for seq, at, stream, cause, payload in rows])


def decode_rows(rows: Sequence[Row]) -> list[Envelope]:
    """Envelopes of the rows, in their order; never raises (undecodable rows come back as
    ``log.undecodable``, as the file log reads them)."""
    if not rows:
        return []
    try:
        return _envelopes.decode(_frame(rows))
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        pass
    out: list[Envelope] = []
    for row in rows:
        out.extend(decode_payload(_frame([row]), row[0], 1).envs)
    return out
