"""Sans-io framing of the file log: envelopes to record bytes and back.

File layout: an 8-byte magic header, then records.  A record holds one batch
of consecutive envelopes — what one ``append`` acknowledged, split at
:data:`MAX_BATCH` events or :data:`MAX_RECORD` bytes — because every hop in
trio-cap moves batches, and one CRC and one msgpack call per batch cost far
less than one per event::

    u32 length | u32 crc32 | u64 first_seq | u32 count | payload (length bytes)

``payload`` is the msgpack array of the batch's ``count`` envelopes, each a
5-array ``[seq, at, stream, cause, event]`` whose seqs run ``first_seq`` …
``first_seq + count - 1``; the CRC covers ``first_seq``, ``count`` and the
payload.  Integers in the header are little-endian.

Rules this module enforces:

* encoding is all-or-nothing: a batch that cannot be encoded leaves the
  buffer as it was, so no partial record or seq gap can follow;
* a single event larger than :data:`MAX_RECORD` is refused
  (:class:`EventTooLarge`) before any byte is written; a batch that is merely
  large is split into more records;
* a header is *plausible* only if its length and count are in range and the
  payload's first bytes agree with it (array of ``count``, first envelope's
  seq = ``first_seq``) — checked without decoding, so scans stay cheap;
* decoding never raises: a record whose payload does not decode or disagrees
  with its header becomes ``log.lost`` placeholders, an envelope this build
  cannot decode becomes ``log.undecodable``, each with the problem described.
"""

from __future__ import annotations

import operator
import struct
import zlib
from collections.abc import Sequence

import attrs
import msgspec

from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import LogLost, LogUndecodable
from trio_cap.events.log.errors import (  # noqa: F401 - re-exported
    EventRejected,
    EventTooLarge,
    LogCorrupted,
    LogFormatError,
)

MAGIC = b"CAPLOG\x00\x02"
HEADER = struct.Struct("<IIQI")
HEADER_SIZE = HEADER.size
CRC_FROM = 8  # the CRC covers first_seq, count and the payload
MAX_RECORD = 64 * 1024 * 1024
"""Largest payload a record may hold (bytes)."""
MAX_BATCH = 4096
"""Most envelopes in one record."""
MAX_TORN = HEADER_SIZE + MAX_RECORD
"""A torn final append leaves at most one partial record: never this many bytes."""
PREFIX_NEEDED = 13
"""Payload bytes :func:`header_problem` looks at: array header, envelope header, seq."""

_encoder = msgspec.msgpack.Encoder()
_typed = msgspec.msgpack.Decoder(list[Envelope])
_raws = msgspec.msgpack.Decoder(list[msgspec.Raw])
_one = msgspec.msgpack.Decoder(Envelope)
_loose = msgspec.msgpack.Decoder()
_SEQ = operator.attrgetter("seq")


@attrs.frozen
class RecordSpan:
    offset: int
    first_seq: int
    count: int


# ---- encoding ----------------------------------------------------------------


def encode_into(envelopes: Sequence[Envelope], buf: bytearray) -> list[RecordSpan]:
    """Append the batch to ``buf`` as records; offsets are relative to ``buf``.

    All or nothing: on any error ``buf`` is left exactly as it was.
    """
    start = len(buf)
    spans: list[RecordSpan] = []
    try:
        for i in range(0, len(envelopes), MAX_BATCH):
            _encode_record(envelopes[i : i + MAX_BATCH], buf, spans)
    except BaseException:
        del buf[start:]
        raise
    return spans


def _encode_record(chunk: Sequence[Envelope], buf: bytearray, spans: list[RecordSpan]) -> None:
    start = len(buf)
    body = start + HEADER_SIZE
    try:
        _encoder.encode_into(chunk, buf, body)
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as exc:
        del buf[start:]
        first = chunk[0]
        raise EventRejected(
            f"event seq {first.seq}… ({first.kind}) cannot be stored: {exc}"
        ) from None
    length = len(buf) - body
    if length <= MAX_RECORD:
        HEADER.pack_into(buf, start, length, 0, chunk[0].seq, len(chunk))
        crc = zlib.crc32(memoryview(buf)[start + CRC_FROM :])
        struct.pack_into("<I", buf, start + 4, crc)
        spans.append(RecordSpan(start, chunk[0].seq, len(chunk)))
        return
    del buf[start:]
    if len(chunk) == 1:
        env = chunk[0]
        raise EventTooLarge(
            f"one {env.kind} event encodes to {length:,} bytes; a log record holds at most "
            f"{MAX_RECORD:,} bytes, so it was refused and nothing was logged"
        )
    half = len(chunk) // 2
    _encode_record(chunk[:half], buf, spans)
    _encode_record(chunk[half:], buf, spans)


def frame(first: int, count: int, payload: bytes | memoryview) -> bytes:
    """A record around an already encoded payload (``cap log repair`` copies payloads verbatim)."""
    header = bytearray(HEADER.pack(len(payload), 0, first, count))
    crc = zlib.crc32(payload, zlib.crc32(memoryview(header)[CRC_FROM:]))
    struct.pack_into("<I", header, 4, crc)
    return bytes(header) + bytes(payload)


# ---- header checks -----------------------------------------------------------


def _msgpack_uint(view: memoryview, i: int) -> tuple[int, int] | None:
    """(value, size) of the msgpack unsigned int at ``i``, None if it is not one or is cut."""
    if i >= len(view):
        return None
    b = view[i]
    if b < 0x80:
        return b, 1
    width = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}.get(b)
    if width is None or i + 1 + width > len(view):
        return None
    return int.from_bytes(view[i + 1 : i + 1 + width], "big"), 1 + width


def payload_prefix(prefix: memoryview) -> tuple[int, int] | None:
    """(count, first seq) as the payload itself says, or None if it does not start as one."""
    if not prefix:
        return None
    b = prefix[0]
    if 0x90 <= b <= 0x9F:
        count, pos = b & 0x0F, 1
    elif b == 0xDC and len(prefix) >= 3:
        count, pos = int.from_bytes(prefix[1:3], "big"), 3
    else:
        return None
    if len(prefix) <= pos or prefix[pos] != 0x95:
        return None
    seq = _msgpack_uint(prefix, pos + 1)
    return None if seq is None else (count, seq[0])


def header_problem(length: int, first: int, count: int, prefix: memoryview) -> str | None:
    """Why this header cannot start a record, or None.

    ``prefix`` is the payload's first bytes (up to :data:`PREFIX_NEEDED`).
    """
    if not 0 < length <= MAX_RECORD:
        return f"implausible record length {length}"
    if not 0 < count <= MAX_BATCH:
        return f"implausible event count {count}"
    if first < 1:
        return f"implausible first seq {first}"
    if count < 16:
        array, pos = (0x90 | count).to_bytes(1, "big"), 1
    else:
        array, pos = b"\xdc" + count.to_bytes(2, "big"), 3
    if bytes(prefix[:pos]) != array[: len(prefix)]:
        return f"the payload does not hold the {count} events its header says"
    if len(prefix) > pos and prefix[pos] != 0x95:
        return "the payload does not start with an envelope"
    seq = _msgpack_uint(prefix, pos + 1)
    if seq is not None and seq[0] != first:
        return f"the header says seq {first} but the payload starts at seq {seq[0]}"
    if seq is None and len(prefix) >= PREFIX_NEEDED:
        return "the payload's first seq is not a number"
    return None


def record_problem(view: memoryview, i: int) -> str | None:
    """Why the complete record at ``i`` of ``view`` is not valid (None: it is)."""
    length, crc, first, count = HEADER.unpack_from(view, i)
    body = i + HEADER_SIZE
    problem = header_problem(length, first, count, view[body : body + min(length, PREFIX_NEEDED)])
    if problem:
        return problem
    if body + length > len(view):
        return "truncated record body"
    if zlib.crc32(view[i + CRC_FROM : body + length]) != crc:
        return "CRC mismatch"
    return None


# ---- decoding ----------------------------------------------------------------


@attrs.frozen
class Decoded:
    envs: list[Envelope]
    """Exactly seqs ``first`` … ``first + count - 1``, placeholders included."""
    problem: str | None = None
    """What was wrong (None: nothing)."""
    lost: bool = False
    """The whole record is placeholders: its payload is unusable."""


def decode_payload(payload: bytes | memoryview, first: int, count: int) -> Decoded:
    """The record's envelopes; never raises (see the module rules)."""
    try:
        envs = _typed.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        try:
            return _decode_leniently(payload, first, count)
        except (msgspec.MsgspecError, RecursionError, TypeError, ValueError) as exc:
            return _lost(first, count, f"the payload cannot be read ({exc})")
    if len(envs) == count and list(map(_SEQ, envs)) == list(range(first, first + count)):
        return Decoded(envs)
    return _lost(first, count, _mismatch(first, count, [e.seq for e in envs]))


def decode_envelopes(payload: bytes | memoryview, first: int, count: int) -> list[Envelope]:
    """:func:`decode_payload`'s envelopes, the plain case first: a reader calls this once
    per record, so an intact one costs one decode and one seq check in C."""
    try:
        envs = _typed.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return decode_payload(payload, first, count).envs
    if len(envs) == count and list(map(_SEQ, envs)) == list(range(first, first + count)):
        return envs
    return decode_payload(payload, first, count).envs


def decode_joined(payloads: Sequence[memoryview], first: int, count: int
                  ) -> list[Envelope] | None:
    """The envelopes of adjacent records in one decode (their arrays' items joined under
    one array header), or None when that is not plainly possible — a record with any
    problem is then decoded on its own by :func:`decode_envelopes`, which says what.
    A whole-log reader decodes ~250,000 records per million events: one call for a few
    MiB of them saves a decode call and a seq check per record."""
    joined = bytearray(b"\xdd" + count.to_bytes(4, "big"))
    for payload in payloads:
        b = payload[0] if payload else 0
        skip = 1 if 0x90 <= b <= 0x9F else 3 if b == 0xDC else 5 if b == 0xDD else 0
        if not skip:
            return None
        joined += payload[skip:]
    try:
        envs = _typed.decode(joined)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    if len(envs) == count and list(map(_SEQ, envs)) == list(range(first, first + count)):
        return envs
    return None


def _decode_leniently(payload, first: int, count: int) -> Decoded:
    try:
        raws = _raws.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return _lost(first, count, f"the payload does not decode ({exc})")
    envs: list[Envelope] = []
    problems: list[str] = []
    for raw in raws:
        try:
            envs.append(_one.decode(raw))
            continue
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            error = str(exc)
        env = _raw_envelope(raw, error)
        if env is None:
            return _lost(first, count, f"an envelope does not decode ({error})")
        envs.append(env)
        kind = env.event.original_kind  # type: ignore[union-attr]
        problems.append(f"seq {env.seq}: {kind or 'event'} not readable by this build ({error})")
    seqs = [e.seq for e in envs]
    if len(envs) != count or seqs != list(range(first, first + count)):
        return _lost(first, count, _mismatch(first, count, seqs))
    return Decoded(envs, "; ".join(problems) or None)


def _raw_envelope(raw: msgspec.Raw, error: str) -> Envelope | None:
    """An envelope whose event this build cannot type, kept raw; None if not even an envelope."""
    try:
        value = _loose.decode(raw)
    except msgspec.DecodeError:
        return None
    if not (isinstance(value, list) and len(value) == 5 and type(value[0]) is int):
        return None
    seq, at, stream, cause, event = value
    kind = event.get("kind") if isinstance(event, dict) else None
    undecodable = LogUndecodable(
        original_kind=kind if isinstance(kind, str) else None,
        payload=_json_able(event),
        error=error,
        meta={MADE_ON_READ: True},
    )
    return Envelope(
        seq,
        float(at) if isinstance(at, int | float) else 0.0,
        stream if isinstance(stream, str) else "",
        cause if type(cause) is int else None,
        undecodable,
    )


def _json_able(value: object) -> object:
    """The raw event as JSON-able data (a msgpack extension value as its code and hex)."""

    def hook(v: object) -> object:
        if isinstance(v, msgspec.msgpack.Ext):
            return {"msgpack_ext": v.code, "hex": bytes(v.data).hex()}
        return repr(v)

    try:
        return msgspec.to_builtins(value, str_keys=True, enc_hook=hook)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"<not showable: {exc}>"


def _mismatch(first: int, count: int, seqs: list[int]) -> str:
    if not seqs:
        held = "none"
    elif seqs == list(range(seqs[0], seqs[0] + len(seqs))):
        held = f"{seqs[0]}–{seqs[-1]}"
    else:
        held = ", ".join(map(str, seqs[:6])) + ("…" if len(seqs) > 6 else "")
    return (f"the header says {count} events from seq {first} but the payload holds "
            f"{len(seqs)} (seqs {held})")


def _lost(first: int, count: int, reason: str) -> Decoded:
    return Decoded(lost_envelopes(first, first + count - 1, reason), reason, lost=True)


MADE_ON_READ = "trio_cap.made_on_read"
"""``_meta`` key on placeholders a reader made for damage it met (never stored):
they tell a reader's report from ``log.lost`` events a repair wrote."""


def lost_envelopes(from_seq: int, to_seq: int, reason: str, *, at: float = 0.0,
                   only: tuple[int, int] | None = None, stored: bool = False) -> list[Envelope]:
    """One ``log.lost`` placeholder per seq of the range (or of ``only``, a part of it),
    each naming the whole range; ``stored``: for writing (``cap log repair``)."""
    meta = None if stored else {MADE_ON_READ: True}
    event = LogLost(from_seq=from_seq, to_seq=to_seq, reason=reason, meta=meta)
    lo, hi = only or (from_seq, to_seq)
    return [Envelope(seq, at, "", None, event) for seq in range(lo, hi + 1)]
