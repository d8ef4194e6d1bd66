"""Adjacent records decoded in one call give what decoding each gives, or nothing."""

import msgspec

from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import TextChunk
from trio_cap.events.log.records import decode_envelopes, decode_joined

_enc = msgspec.msgpack.Encoder()


def _payload(first: int, count: int) -> memoryview:
    return memoryview(_enc.encode([Envelope(first + k, 0.0, "s", None,
                                            TextChunk(message_id="m", text=f"{first + k}"))
                                   for k in range(count)]))


def test_joined_records_decode_as_each_does():
    sizes = [1, 15, 16, 300, 2]  # fixarray and array16 headers both
    parts, first = [], 1
    for n in sizes:
        parts.append(_payload(first, n))
        first += n
    joined = decode_joined(parts, 1, first - 1)
    assert joined is not None
    each, seq = [], 1
    for part, n in zip(parts, sizes, strict=True):
        each += decode_envelopes(part, seq, n)
        seq += n
    assert joined == each


def test_a_run_that_is_not_plain_is_left_to_the_record_by_record_path():
    assert decode_joined([_payload(1, 2), _payload(4, 2)], 1, 4) is None  # seq 3 missing
    odd = memoryview(_enc.encode([[3, 0.0, "s", None, {"kind": "no.such.kind"}]]))
    assert decode_joined([_payload(1, 2), odd], 1, 3) is None
    assert decode_joined([_payload(1, 2), memoryview(b"\x00")], 1, 3) is None
