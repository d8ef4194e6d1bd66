"""The C match of a byte shape (``bindings/_byte_shape.c``): built, and sound.

The driver's hot path runs it on every turn's text events, so the end-to-end checks in
``test_shape.py`` and ``test_hot_path.py`` (fast path == general rules) run it too.  Here
it is checked on its own: every payload it takes means, decoded in full, the payload the
shape was learnt from with the values it gives (whatever bytes were spliced into the
run), it takes every payload of an unbroken run, and it gives what the Python match
(``Shape.match_py``, the reference and the fallback) gives there.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.driver_a2a.test_shape import chunk, said, sdk
from trio_cap.actors.bindings import byte_shape
from trio_cap.actors.bindings.byte_shape import Shape, learn

STATUS = ("timestamp", "messageId", "text")


def native() -> Any:
    from trio_cap.actors.bindings import _byte_shape  # type: ignore[attr-defined]

    return _byte_shape


def test_the_c_match_is_built_and_used() -> None:
    """The install builds it (a C compiler is on every machine the tests run on); without
    it the Python match would run and the bench would measure that instead."""
    assert byte_shape.NATIVE and callable(native().take)


def shape_of(payload: bytes, status: bool) -> Shape:
    names = STATUS if status else ("text",)
    shape = learn(payload, names, frozenset({"timestamp"}), lambda probe, markers: True)
    assert isinstance(shape, Shape)
    return shape


def meaning(payload: bytes, values: dict[str, str]) -> Any:
    """The payload decoded, with the named fields set to ``values`` (status or artifact)."""
    doc = json.loads(payload)
    result = doc["result"]
    if "statusUpdate" in result:
        status = result["statusUpdate"]["status"]
        status["timestamp"] = values["timestamp"]
        status["message"]["messageId"] = values.get("messageId")
        status["message"]["parts"][0]["text"] = values["text"]
    else:
        result["artifactUpdate"]["artifact"]["parts"][0]["text"] = values["text"]
    return doc


@settings(max_examples=400, deadline=None)
@given(texts=st.lists(st.text(max_size=5), min_size=2, max_size=7),
       status=st.booleans(), at=st.integers(0, 10_000),
       byte=st.sampled_from([b"", b'"', b"\\", b"\\u", b"x", b"\x01", b"\xff", b'", "x": "',
                             b"\xce\xbb", b"\n"]),
       drop=st.integers(0, 3), start=st.integers(0, 2))
def test_what_the_c_match_takes_means_the_learnt_payload_with_its_values(
        texts: list[str], status: bool, at: int, byte: bytes, drop: int, start: int) -> None:
    make = (lambda k, t: sdk(said(t, f"m{k}"))) if status else (lambda k, t: sdk(chunk(t)))
    datas = [make(k, t) for k, t in enumerate(texts)]
    shape = shape_of(datas[0], status)
    victim = 1 + at % (len(datas) - 1)
    d = datas[victim]
    cut = at % (len(d) + 1)
    datas[victim] = d[:cut] + byte + d[cut + min(drop, len(d) - cut):]
    i = min(start, len(datas) - 1)
    unread = (0,) if status else ()
    j, values, _ = shape.match(datas, i, unread)
    if values is None:  # a hole that is no string: nothing taken, the shape is dropped
        assert j == i
        return
    assert i <= j <= len(datas)
    for k in range(i, j):
        got = {name: values[n][k - i] for n, name in enumerate(shape.names) if values[n]}
        doc = json.loads(datas[k])
        if status:  # the timestamp is only checked: any printable string
            got["timestamp"] = doc["result"]["statusUpdate"]["status"]["timestamp"]
            assert got["timestamp"].isprintable() and got["timestamp"].isascii()
        assert doc == meaning(datas[0], got)
    if datas[victim] == d or victim < i:  # nothing changed in the run: all of it is taken
        assert j == len(datas)
        assert (j, values, None) == shape.match_py(datas, i, unread)


def test_an_unbroken_run_gives_what_the_python_match_gives() -> None:
    for status in (False, True):
        make = (lambda k, t: sdk(said(t, f"m{k}"))) if status else (lambda k, t: sdk(chunk(t)))
        datas = [make(k, t) for k, t in enumerate(["a", 'q\\"', "λ ✓ \U0001f642", "", "\n"])]
        shape = shape_of(datas[0], status)
        for unread in ((), (0,)) if status else ((),):
            for joined in (-1, len(shape.names) - 1):
                got = shape.match(datas, 0, unread, joined)
                assert got == shape.match_py(datas, 0, unread, joined)
                assert got[0] == len(datas)


@pytest.mark.parametrize("body", [
    b"plain", "\u03bb \u2713 \U0001f642".encode(), b"\\n\\t\\\\\\/\\\"", b"\\u0041\\u00e9\\u20ac",
    b"\\ud83d\\ude42", b"\\uD83D\\uDE42x", b"a\\\\u0041", b"\\\\", b"",
])
def test_the_joined_texts_size_is_its_utf8_size(body: bytes) -> None:
    """The UTF-8 size the C match counts is that of the text the bodies decode to, over
    every escape JSON has and raw UTF-8; the Python match (no compiler) counts the same."""
    datas = [sdk(chunk("TEXT")).replace(b"TEXT", body)] * 3
    shape = shape_of(sdk(chunk("x")), False)
    expected = len(("".join([_body_value(body) or ""] * 3)).encode())
    assert byte_shape.Matcher(shape, (), 0).sized(datas, 0)[3] == expected
    j, _, text = shape.match_py(datas, 0, (), 0)
    assert j == 3 and len((text or "").encode()) == expected


def test_a_payload_that_is_not_bytes_ends_the_run() -> None:
    datas: list[Any] = [sdk(chunk("a")), sdk(chunk("b")), "text", sdk(chunk("c"))]
    shape = shape_of(datas[0], False)
    assert shape.match(datas, 0) == (2, [["a", "b"]], None)
    assert shape.match(datas, 0, joined=0) == (2, [()], "ab")
    assert shape.match(datas, 2) == (2, [], None)


def test_a_timestamp_with_an_escape_is_left_to_the_general_rules() -> None:
    """An unread hole is taken only as printable ASCII with no backslash (what it would
    hold is not decoded, so nothing else is let through)."""
    odd = sdk(said("x", "m2", ts="2026-07-19T11:34:37.41\\u0037"))
    datas = [sdk(said("a", "m1")), odd]
    shape = shape_of(datas[0], True)
    assert shape.match(datas, 0, (0,))[0] == 1
    assert shape.match(datas, 0, ())[0] == 2  # read, it is decoded, so it may be taken


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.text(max_size=5), min_size=2, max_size=7), status=st.booleans(),
       cut=st.integers(0, 10_000), start=st.integers(0, 7))
def test_a_reads_payloads_are_matched_in_place_as_their_list(
        texts: list[str], status: bool, cut: int, start: int) -> None:
    """The reader hands the match a read's Payloads (``a2a/_sse_split.c``), not a list:
    matched in place, they give what the same events as bytes give, the first one too
    when it began in an earlier read."""
    from trio_cap.actors.bindings.a2a import _sse_split  # type: ignore[attr-defined]

    make = (lambda k, t: sdk(said(t, f"m{k}"))) if status else (lambda k, t: sdk(chunk(t)))
    datas = [make(k, t) for k, t in enumerate(texts)]
    shape = shape_of(datas[0], status)
    stream = b"".join(b"data: " + d + b"\r\n\r\n" for d in datas)
    at = 6 + cut % (len(datas[0]) + 1)  # the first event begun in an earlier read
    for held, read in ((b"", stream), (stream[:at], stream[at:])):
        payloads, keep = _sse_split.split(held, read)
        assert keep == b"" and list(payloads) == datas
        i = min(start, len(datas))
        for unread in ((), (0,)) if status else ((),):
            for joined in (-1, len(shape.names) - 1):
                matcher = byte_shape.Matcher(shape, unread, joined)
                assert matcher(payloads, i) == matcher(list(payloads), i)
                assert matcher(payloads, i)[0] == len(datas)


def test_spans_outside_the_read_end_the_run() -> None:
    """The C match trusts no span it is given: one that lies outside its buffer is no
    payload, so the run ends before it; datas that are neither a list nor a read's
    Payloads are refused."""
    data = sdk(chunk("a"))
    shape = shape_of(data, False)

    class Fake:
        first = None
        buffer = data + data
        spans = struct.pack("4n", 0, len(data), len(data), 3 * len(data))

    take = native().take
    assert take(Fake(), 0, shape.whole, 0)[0] == 1
    with pytest.raises(TypeError, match="Payloads"):
        take(object(), 0, shape.whole, 0)


def test_bad_arguments_are_refused() -> None:
    take = native().take
    with pytest.raises(TypeError):
        take([b"x"], 0, ("a", '"b'), 0)
    with pytest.raises(ValueError, match="closing quote"):
        take([b"x"], 0, (b"a", b"b"), 0)
    with pytest.raises(ValueError, match="segments"):
        take([b"x"], 0, (b"a",), 0)
    with pytest.raises(IndexError):
        take([b"x"], -1, (b'"', b'"'), 0)
    with pytest.raises(TypeError):
        take((b"x",), 0, (b'"', b'"'), 0)
    assert take([b'"x"'], 5, (b'"', b'"'), 0) == (5, None, None, 0)
    with pytest.raises(ValueError, match="joined"):
        take([b'"x"'], 0, (b'"', b'"'), 1, 0)  # an unread hole cannot be joined
    with pytest.raises(ValueError, match="joined"):
        take([b'"x"'], 0, (b'"', b'"'), 0, 1)


def test_without_the_c_match_the_python_one_gives_the_same_events(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An install with no C compiler runs ``match_py``: the fast path still means what the
    general rules mean, on runs, status messages and payloads that only look the part."""
    from tests.driver_a2a import test_shape as t

    monkeypatch.setattr(byte_shape, "_byte_shape", None)
    t.test_a_run_of_chunks_is_taken_by_its_shape_and_means_the_same()
    t.test_status_messages_are_taken_by_their_shape_once_per_message_id()
    t.test_a_timestamp_of_another_width_is_told_apart_one_by_one()
    for change in t.ADVERSE:
        t.test_a_payload_that_only_looks_like_the_shape_goes_the_general_way(change)


FRAGMENTS = [b"a", b"\\ud83d", b"\\ude42", b"\\u00e9", b"\xce", b"\xbb", b"\xce\xbb", b"\\n",
             b"\\u12", b"34", b"\\\\", b"\\", b"\xf0\x9f", b"\x99\x82", b"\x01", b""]
"""Raw bytes of text holes: escapes, surrogate halves, UTF-8 cut anywhere, cut escapes."""


def _body_value(hole: bytes) -> str | None:
    try:
        return byte_shape._string.decode(b'"' + hole + b'"')
    except Exception:
        return None


@settings(max_examples=500, deadline=None)
@given(holes=st.lists(st.lists(st.sampled_from(FRAGMENTS), max_size=3).map(b"".join),
                      min_size=1, max_size=6),
       status=st.booleans())
def test_joined_text_is_the_bodies_decoded_one_by_one_and_joined(
        holes: list[bytes], status: bool) -> None:
    """A hole's bodies are joined only where the joined text decodes to the values joined:
    a surrogate pair, a UTF-8 sequence or an escape split across two events is never
    made whole by the joining."""
    template = sdk(said("TEXT", "m1")) if status else sdk(chunk("TEXT"))
    datas = [template.replace(b"TEXT", hole) for hole in holes]
    shape = shape_of(sdk(said("x", "m0")) if status else sdk(chunk("x")), status)
    joined = len(shape.names) - 1
    unread = (0,) if status else ()
    j, columns, text = shape.match(datas, 0, unread, joined)
    values = [_body_value(h) for h in holes]
    if columns is None:  # some body the shape took is not a string body on its own
        assert None in values
        return
    assert all(v is not None for v in values[:j])
    assert text == ("".join(values[:j]) if j else None)  # type: ignore[arg-type]
    sized = byte_shape.Matcher(shape, unread, joined).sized(datas, 0)
    assert sized[:3] == (j, columns, text)
    assert sized[3] == len(text.encode() if text else b"")  # counted by the C match
    separately = shape.match(datas, 0, unread)
    if separately[1] is not None and separately[0] > 0:
        assert 0 < j <= separately[0]
