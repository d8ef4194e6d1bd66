"""a2a-sdk's SSE framing split in C (``_sse_split.c``) gives what the Python reference gives.

The C split finds line breaks with memchr instead of splitting, joining and searching,
so it is checked against :func:`machine_sse.split_py` on generated reads (a2a-sdk's
framing cut anywhere, a held start, stray CR / LF, partial separators at the end,
empty data, non-ASCII bytes) and on the shared corpus read as the bench reads it and
in small reads, both through :class:`SseReader` and call by call.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.a2a_frames_bench import _sse_chunks, corpus
from trio_cap.actors.bindings.a2a import machine_sse
from trio_cap.actors.bindings.a2a.machine_sse import SseReader, split_py

Split = Callable[[bytes, bytes], "tuple[list[bytes], bytes] | None"]


def native() -> ModuleType:
    try:
        from trio_cap.actors.bindings.a2a import _sse_split  # type: ignore[attr-defined]
    except ImportError:
        pytest.fail("the C split (trio_cap.actors.bindings.a2a._sse_split) was not built: "
                    "reinstall with a C compiler (pip install -e .)")
    return _sse_split


def c_split(held: bytes, chunk: bytes) -> tuple[list[bytes], bytes] | None:
    """The C split's answer with its Payloads as the list of bytes they stand for."""
    got = native().split(held, chunk)
    return None if got is None else (list(got[0]), got[1])


def test_the_reader_runs_the_c_split() -> None:
    native()
    assert machine_sse.NATIVE and machine_sse.split is native().split


# Data bytes as a2a-sdk's JSON holds them, non-ASCII too; line breaks are rare so that most
# reads take the split, and the rest send it back to the general rules.
_data_tokens = st.sampled_from([b"a", b"{", b'"', b" ", b":", b"data: ", b"\\n",
                                "é".encode(), "€".encode()[:2], b"\xff", b"\x00"])
_datas = st.lists(_data_tokens, max_size=8).map(b"".join)
_noise = st.sampled_from([b"\r", b"\n", b"\r\n", b"\n\r", b"\r\n\r\n", b"\r\n\r\ndata:",
                          b"\r\r\n\r\ndata: "])
_ends = st.just(b"") | st.sampled_from([b"\r", b"\r\n", b"\r\n\r", b"\r\n\r\n", b"\r\n\r\nd",
                         b"\r\n\r\nda", b"\r\n\r\ndata:", b"\r\n\r\ndata: "])
_helds = st.one_of(st.just(b""), _datas.map(lambda d: b"data: " + d.replace(b"\r", b"")
                                            .replace(b"\n", b"")),
                   st.sampled_from([b"d", b"data:", b"data: ", b"xy"]))


@st.composite
def reads(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """(held, chunk): a slice of an a2a-sdk stream, noise put in now and then, an end."""
    stream = bytearray(b"".join(b"data: " + d + b"\r\n\r\n"
                                for d in draw(st.lists(_datas, min_size=2, max_size=10))))
    for _ in range(draw(st.just(0) | st.integers(1, 2))):
        at = draw(st.integers(0, len(stream)))
        stream[at:at] = draw(_noise)
    n = len(stream)
    if draw(st.booleans()):  # cut anywhere
        start = draw(st.integers(0, n))
        stop = draw(st.integers(start, n))
    else:  # cut near the ends: most such reads hold a separator
        start, stop = draw(st.integers(0, n // 4)), draw(st.integers(n - n // 4, n))
    return draw(_helds), bytes(stream[start:stop]) + draw(_ends)


@settings(max_examples=500, deadline=None)
@given(reads())
def test_any_read_splits_the_same(read: tuple[bytes, bytes]) -> None:
    held, chunk = read
    assert c_split(held, chunk) == split_py(held, chunk)


def test_many_plain_reads_split_the_same() -> None:
    """Hypothesis dwells on the edges; uniform draws add many reads the split takes."""
    rng = random.Random(5)
    tokens = [b"a", b"{", b'"', b" ", b":", b"data: ", "é".encode(), b"\xff", b"\x00"]
    taken = 0
    for _ in range(3000):
        stream = b"".join(b"data: " + b"".join(rng.choices(tokens, k=rng.randrange(12)))
                          + b"\r\n\r\n" for _ in range(rng.randrange(2, 12)))
        if rng.random() < 0.2:
            at = rng.randrange(len(stream))
            stream = stream[:at] + rng.choice([b"\r", b"\n", b"\r\n"]) + stream[at:]
        start = rng.randrange(len(stream))
        chunk = stream[start:rng.randrange(start, len(stream) + 1)]
        held = b"" if rng.random() < 0.5 else b"data: " + rng.choice(tokens)
        got = c_split(held, chunk)
        assert got == split_py(held, chunk)
        taken += got is not None
    assert taken > 500


@pytest.mark.parametrize(("held", "chunk", "expected"), [
    (b"", b"data: a\r\n\r\ndata: b\r\n\r\n", ([b"a", b"b"], b"")),
    (b"", b"data: a\r\n\r\ndata: b", ([b"a"], b"data: b")),
    (b"data: x", b"y\r\n\r\ndata: \r\n\r\n", ([b"xy", b""], b"")),  # empty data
    (b"", b"data: a\r\n\r\ndata: ", ([b"a"], b"data: ")),  # a separator at the very end
    (b"", b"data: a\r\n\r\n", None),  # no separator
    (b"", b"data: a", None),
    (b"", b"", None),
    (b"data: x", b"\r\n\r\ndata: a", ([b"x"], b"data: a")),
    (b"", b"\r\n\r\ndata: a", ([b""], b"data: a")),
    (b"da", b"ta\r\n\r\ndata: a", ([b"ta"], b"data: a")),  # held shorter than "data: "
    (b"", b"dat\r\n\r\ndata: a", ([b""], b"data: a")),
    (b"", "data: é\r\n\r\ndata: \xff".encode("latin-1"), ([b"\xe9"], b"data: \xff")),
    *[(b"", b"data: a\r\n\r\ndata: b" + end, None)
      for end in (b"\r", b"\r\n", b"\r\n\r", b"\r\n\r\nda", b"\n", b"\r\r\n\r\n")],
    *[(b"", b"data: a" + stray + b"b\r\n\r\ndata: c\r\n\r\n", None)
      for stray in (b"\r", b"\n", b"\r\n", b"\n\r", b"\r\n\r\n")],
    (b"", b"data: a\r\n\r\ndata: b\r\n\r\n\r\n", None),
])
def test_the_edges_split_as_the_reference(held: bytes, chunk: bytes,
                                          expected: tuple[list[bytes], bytes] | None) -> None:
    assert split_py(held, chunk) == expected
    assert c_split(held, chunk) == expected


def _events(plans: list[list[bytes]], split: Split) -> list[bytes]:
    """Every event of the streams through readers running ``split``."""
    saved = machine_sse.split
    machine_sse.split = split
    try:
        out = []
        for reads in plans:
            reader = SseReader()
            for chunk in reads:
                out += reader.feed(chunk)
            out += reader.feed_eof()
        return out
    finally:
        machine_sse.split = saved


def _small_reads(reads: list[bytes], rng: random.Random) -> list[bytes]:
    body = b"".join(reads)
    cuts, at = [], 0
    while at < len(body):
        step = rng.choice((1, 2, 3, 5, 9, 17, 64, 300, 1500))
        cuts.append(body[at:at + step])
        at += step
    return cuts


@pytest.mark.parametrize("small", [False, True], ids=["64KiB", "small"])
def test_the_corpus_gives_the_same_events(small: bool) -> None:
    streams = corpus(3000, seed=7)
    plans = [_sse_chunks(s, rid) for rid, s in enumerate(streams, start=1)]
    if small:
        rng = random.Random(11)
        plans = [_small_reads(p, rng) for p in plans]
    c, calls = native().split, []

    def checked(held: bytes, chunk: bytes) -> tuple[list[bytes], bytes] | None:
        """The C split, each call checked against the reference."""
        got = c(held, chunk)
        assert (None if got is None else (list(got[0]), got[1])) == split_py(held, chunk)
        calls.append(got is not None)
        return got  # type: ignore[no-any-return]

    fast = _events(plans, checked)
    # the split took most 64 KiB reads (a one-event stream has no separator); small reads
    # mostly hold none
    assert sum(calls) > len(calls) / (5 if small else 2)
    reference = _events(plans, split_py)
    assert fast == reference
    assert len(fast) == sum(len(s) for s in streams)  # every event came out


@settings(max_examples=300, deadline=None)
@given(reads(), st.integers(-12, 12), st.integers(-12, 12), st.sampled_from([1, 2, -1, -3]))
def test_payloads_are_the_list_they_stand_for(read: tuple[bytes, bytes], a: int, b: int,
                                              step: int) -> None:
    """The C split's datas are a Payloads (events made into bytes when asked for): every
    way the reader's users read them (index, negative index, slice, iteration, len, a
    join) gives what the reference's list gives."""
    got, ref = native().split(*read), split_py(*read)
    assert (got is None) == (ref is None)
    if got is None or ref is None:
        return
    payloads, expected = got[0], ref[0]
    assert len(payloads) == len(expected) and list(payloads) == expected
    for k in range(-len(expected), len(expected)):
        assert payloads[k] == expected[k]
    for k in (len(expected), -len(expected) - 1):
        with pytest.raises(IndexError):
            payloads[k]
    assert payloads[a:b:step] == expected[a:b:step]
    assert b",".join(payloads) == b",".join(expected)
    with pytest.raises(TypeError):
        payloads["0"]


def test_payloads_show_where_their_events_lie_in_the_read() -> None:
    """What the C byte-shape match reads in place: the read itself, a (start, end) pair per
    event into it, and the first event's data when it began in an earlier read."""
    chunk = b"data: one\r\n\r\ndata: two\r\n\r\ndata: thr"
    payloads, keep = native().split(b"", chunk)
    assert payloads.buffer is chunk and payloads.first is None and keep == b"data: thr"
    pairs = memoryview(payloads.spans).cast("n").tolist()
    assert [chunk[pairs[k]:pairs[k + 1]] for k in range(0, len(pairs), 2)] == [b"one", b"two"]
    payloads, keep = native().split(b"data: ze", b"ro\r\n\r\ndata: one\r\n\r\n")
    assert payloads.first == b"zero" and list(payloads) == [b"zero", b"one"] and keep == b""


def test_the_split_keeps_no_reference_it_does_not_hand_out() -> None:
    """Each Payloads holds its read while it lives and lets go of it with its last user: a
    stream of reads leaves nothing behind."""
    held, chunk = b"data: ze", b"ro\r\n\r\ndata: one\r\n\r\ndata: t"
    before = sys.getrefcount(held), sys.getrefcount(chunk)
    for _ in range(1000):
        payloads, _keep = native().split(held, chunk)
        assert payloads[0] == b"zero" and payloads[1:] == [b"one"]
    del payloads, _keep
    assert (sys.getrefcount(held), sys.getrefcount(chunk)) == before


@pytest.mark.parametrize("args", [
    ("", b"data: a\r\n\r\ndata: "), (b"", "data: a\r\n\r\ndata: "),
    (bytearray(b""), b"data: a\r\n\r\ndata: "), (b"", memoryview(b"data: a\r\n\r\ndata: ")),
    (None, b""), (b"",), (b"", b"", b""),
])
def test_arguments_other_than_two_bytes_are_refused(args: tuple[object, ...]) -> None:
    with pytest.raises(TypeError, match="split"):
        native().split(*args)


def test_a_bytes_subclass_is_refused() -> None:
    class Sub(bytes):
        pass

    for args in ((Sub(b""), b"data: a\r\n\r\ndata: "), (b"", Sub(b"data: a\r\n\r\ndata: "))):
        with pytest.raises(TypeError, match="split"):
            native().split(*args)
