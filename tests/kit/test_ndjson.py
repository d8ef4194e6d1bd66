"""The kit's NDJSON framer and reader: their rules as a table, and hypothesis on any input.

The decoders here are a tiny binding of their own (objects with a ``type``),
so the tests say what the framer and reader promise to every NDJSON binding,
not what stream-json does with the lines.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_cap.actors.bindings.ndjson import (
    NEVER_COMPLETED,
    NOT_JSON,
    BadLine,
    LineFramer,
    NdjsonReader,
    NoRecovery,
    Overlong,
    SpliceRecovery,
    Unknown,
)


class Obj(msgspec.Struct, frozen=True):
    type: str
    n: int = 0


_one = msgspec.json.Decoder(Obj)
_many = msgspec.json.Decoder(list[Obj])


def decode_line(line: bytes) -> Obj | Unknown:
    try:
        return _one.decode(line)
    except msgspec.ValidationError:
        if not isinstance(msgspec.json.decode(line), dict):  # DecodeError when not JSON
            raise msgspec.DecodeError("not an object") from None
        return Unknown(line, "no type")


def reader(max_line: int = 1 << 20, recovery: Any = None, batch: bool = True
           ) -> NdjsonReader[Obj]:
    return NdjsonReader(decode_line, _many.decode if batch else None, max_line=max_line,
                        recovery=recovery)


def obj(kind: str, n: int = 0) -> bytes:
    return msgspec.json.encode(Obj(kind, n))


def feed_all(r: NdjsonReader[Obj], chunks: list[bytes]) -> list[tuple[Any, bytes]]:
    """Every item with its raw line, over all reads and the end."""
    out = []
    for lines in [*(r.feed(c) for c in chunks), r.eof()]:
        out += [(item, lines.raw(i)) for i, item in enumerate(lines.items)]
    return out


# ---- the framer's rules (module doc, rules 1-4 and the table) --------------------------

FRAMER_RULES = [
    # (rule, reads, limit, pieces from all reads then eof)
    ("1: a line ends at newline", [b"a\nb\n"], 100, [b"a\nb"]),
    ("1: \\r stays", [b"a\r\nb\r\n"], 100, [b"a\r\nb\r"]),
    ("2: the tail waits", [b"ab", b"c\nd"], 100, [b"abc", b"d"]),
    ("2: one byte at a time", [b"a", b"\n", b"b", b"\n"], 100, [b"a", b"b"]),
    ("2: several lines in one read", [b"x\ny\nz"], 100, [b"x\ny", b"z"]),
    ("3: overlong inside one read", [b"ok\n" + b"x" * 11 + b"\nok2\n"], 10,
     [b"ok", Overlong(b"x" * 10, 11), b"ok2"]),
    ("3: overlong across reads, dropped as it comes", [b"x" * 6, b"x" * 6, b"x" * 6 + b"\nok\n"],
     10, [Overlong(b"x" * 10, 18), b"ok"]),
    ("3: exactly the limit is kept", [b"x" * 10 + b"\n"], 10, [b"x" * 10]),
    ("4: eof flushes the tail", [b"a\nlast"], 100, [b"a", b"last"]),
    ("4: eof in SKIP is one Overlong", [b"y" * 30], 10, [Overlong(b"y" * 10, 30)]),
    ("4: nothing at all", [], 100, []),
]


@pytest.mark.parametrize(("rule", "reads", "limit", "pieces"), FRAMER_RULES,
                         ids=[r[0] for r in FRAMER_RULES])
def test_framer_rules(rule: str, reads: list[bytes], limit: int, pieces: list[Any]) -> None:
    framer = LineFramer(limit)
    got = [p for data in reads for p in framer.feed(data)] + framer.eof()
    assert got == pieces


def test_wrapped_blocks_carry_the_wrapping_and_overlong_lines_still_leave() -> None:
    framer = LineFramer(10, wrap=(b"[", b"]"))
    got = framer.feed(b"ab\n" + b"x" * 11 + b"\ncd\nef")
    assert got == [b"[ab]", Overlong(b"x" * 10, 11), b"[cd]"]
    assert framer.eof() == [b"[ef]"]


def test_an_overlong_line_is_never_buffered() -> None:
    framer = LineFramer(1000)
    for _ in range(1000):
        assert framer.feed(b"z" * 1000) == []
        assert len(framer._tail) <= 1000  # the tail never holds more than the limit
    (overlong,) = framer.feed(b"\n")
    assert overlong.size == 1_000_000 and len(overlong.head) == 1000


# ---- the reader's rules (5-8) ---------------------------------------------------------------

def test_5_a_block_decodes_in_one_call_and_raw_lines_come_on_demand() -> None:
    lines = reader().feed(obj("a", 1) + b"\n" + obj("b", 2) + b"\r\n")
    assert lines.items == [Obj("a", 1), Obj("b", 2)]
    assert lines.raw(1) == obj("b", 2) and lines.raw(0) == obj("a", 1)


def test_5_one_bad_line_does_not_cost_its_neighbours() -> None:
    got = feed_all(reader(), [obj("a") + b"\nnot json\n" + obj("b") + b"\n"])
    assert got == [(Obj("a"), obj("a")), (BadLine(b"not json", NOT_JSON), b"not json"),
                   (Obj("b"), obj("b"))]


def test_6_unknown_json_and_blank_lines() -> None:
    got = feed_all(reader(), [b'{"x":1}\n\n   \n' + obj("a") + b"\n"])
    assert got == [(Unknown(b'{"x":1}', "no type"), b'{"x":1}'), (Obj("a"), obj("a"))]


@pytest.mark.parametrize("line", [
    b'{"type":"a"},{"type":"b"}',  # two values on one line: not one item per line
    b'[{"type":"a"}]', b"1", b'"s"',
])
def test_6_a_line_is_one_object_or_nothing(line: bytes) -> None:
    got = feed_all(reader(recovery=NoRecovery()), [line + b"\n" + obj("z") + b"\n"])
    assert got == [(BadLine(line, NOT_JSON), line), (Obj("z"), obj("z"))]


def test_6_two_lines_never_join_into_one_value() -> None:
    # joined by a comma they would make one valid object; they are two broken lines
    got = feed_all(reader(recovery=NoRecovery()), [b'{"type":"a","n":[1\n2]}\n'])
    assert [item for item, _ in got] == [BadLine(b'{"type":"a","n":[1', NOT_JSON),
                                         BadLine(b"2]}", NOT_JSON)]


@pytest.mark.parametrize("lines", [
    [b"", obj("a") + obj("b"), b""],  # a blank line and two glued frames in one read
    [obj("a", 1)[:-3], obj("a", 1)[-3:], obj("b") + obj("c")],  # a cut and a glue
    [obj("r")[:6] + obj("b"), obj("r")[6:]],  # the writer race: A-head B / A-tail
])
def test_5_faults_that_could_balance_out_still_go_line_by_line(lines: list[bytes]) -> None:
    data = b"\n".join(lines) + b"\n"
    bytewise = feed_all(reader(), [data[i:i + 1] for i in range(len(data))])
    assert feed_all(reader(), [data]) == bytewise
    assert feed_all(reader(batch=False), [data]) == bytewise


def test_7_a_frame_spliced_into_another_line_is_recovered() -> None:
    a, b = obj("long", 12345), obj("async")
    cut = len(a) // 2
    got = feed_all(reader(), [a[:cut] + b + b"\n" + a[cut:] + b"\n"])
    assert [item for item, _ in got] == [Obj("async"), Obj("long", 12345)]
    assert [raw for _, raw in got] == [b, a]


def test_7_glued_frames_are_split_and_a_never_completed_head_is_reported() -> None:
    got = feed_all(reader(), [obj("a") + obj("b") + b"\n"])
    assert [item for item, _ in got] == [Obj("a"), Obj("b")]
    head = obj("x", 7)[:5]
    got = feed_all(reader(), [head + obj("b") + b"\n" + obj("c") + b"\n"])
    assert [item for item, _ in got] == [Obj("b"), BadLine(head, NEVER_COMPLETED), Obj("c")]
    got = feed_all(reader(), [head + obj("b") + b"\n"])  # and at the end of input
    assert got[-1][0] == BadLine(head, "incomplete line at end of output")


def test_7_without_recovery_broken_lines_are_only_reported() -> None:
    got = feed_all(reader(recovery=NoRecovery()), [obj("a") + obj("b") + b"\n"])
    assert [type(item) for item, _ in got] == [BadLine]


def test_8_overlong_lines_are_bad_lines_with_their_size() -> None:
    got = feed_all(reader(max_line=20), [obj("a") + b"\n" + b"q" * 50 + b"\n" + obj("b")])
    assert [item for item, _ in got] == [Obj("a"), BadLine(b"q" * 20, "line longer than 20 bytes",
                                                           50), Obj("b")]


def test_the_splice_search_is_bounded() -> None:
    line = b'x{"' * 10_000  # many candidate starts, none a frame
    (item,) = [item for item, _ in feed_all(reader(), [line + b"\n"])]
    assert item == BadLine(line, NOT_JSON)


# ---- hypothesis: any bytes, any chunking --------------------------------------------------

FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "200")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

good = st.builds(obj, st.text(max_size=8), st.integers(-3, 3))
lines_st = st.lists(st.one_of(
    good, good, good,
    st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")),
    st.sampled_from([b"", b" ", b"\r", b'{"x":1}', b"[1]", b'{"type":', b'"n":1}']),
    st.tuples(good, good).map(lambda p: p[0] + p[1]),
    st.tuples(good, good, st.integers(0, 20)).map(lambda p: p[0][:p[2]] + p[1] + p[0][p[2]:]),
), max_size=20)


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    cuts = sorted(c % (len(data) + 1) for c in cuts)
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


@FUZZ
@given(lines_st, st.lists(st.integers(0, 10_000), max_size=10), st.integers(4, 60),
       st.booleans())
def test_any_input_in_any_chunks_gives_the_same_items(lines: list[bytes], cuts: list[int],
                                                      limit: int, end_newline: bool) -> None:
    data = b"\n".join(lines) + (b"\n" if end_newline else b"")
    whole = feed_all(reader(limit), [data])
    assert feed_all(reader(limit), _chunks(data, cuts)) == whole
    assert feed_all(reader(limit), [data[i:i + 1] for i in range(len(data))]) == whole
    assert feed_all(reader(limit, batch=False), [data]) == whole  # batching changes nothing
    for item, raw in whole:
        assert type(item) in (Obj, Unknown, BadLine)
        if type(item) is Obj:
            assert decode_line(raw) == item  # raw is the line the item came from
        assert len(raw) <= 2 * limit


@FUZZ
@given(st.binary(max_size=300), st.lists(st.integers(0, 300), max_size=8))
def test_random_bytes_never_raise(data: bytes, cuts: list[int]) -> None:
    for recovery in (SpliceRecovery(), NoRecovery()):
        r = reader(16, recovery=recovery)
        for piece in _chunks(data, cuts):
            r.feed(piece)
        r.eof()
