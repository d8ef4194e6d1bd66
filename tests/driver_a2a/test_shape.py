"""The byte-shape fast path (``bindings.byte_shape``, ``machine_hot``): a run of text
events matched in bytes gives exactly what the general rules give, and anything that is
not the shape learnt (a hole that is no string body, a key spelled another way, a wider
timestamp, a payload that only looks like the shape) goes the general way with the same
events.

Each stream is fed twice, to a fast and a general machine (``test_hot_path.both``), in one read
and one event per read; outputs are compared with consecutive text joined (the documented
difference: one read's run of text is one ``cap.text_chunk``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.driver_a2a.machine_lib import driver, start
from tests.driver_a2a.test_hot_path import both, joined
from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.actors.bindings.a2a.machine import SseBatch
from trio_cap.actors.bindings.byte_shape import Shape, decode_holes, learn
from trio_cap.events.kinds import TextChunk


def sdk(result: dict[str, Any], rid: int = 1) -> bytes:
    """As a2a-sdk writes an event: json.dumps defaults, result first."""
    return json.dumps({"result": result, "id": rid, "jsonrpc": "2.0"}).encode()


def chunk(t: str, aid: str = "A", **more: Any) -> dict[str, Any]:
    return {"artifactUpdate": {"taskId": "T", "contextId": "C", "artifact": {
        "artifactId": aid, "parts": [{"text": t}]}, "append": True, **more}}


def said(t: str, mid: str, ts: str = "2026-07-19T11:34:37.417Z") -> dict[str, Any]:
    return {"statusUpdate": {"taskId": "T", "contextId": "C", "status": {
        "state": "TASK_STATE_WORKING", "timestamp": ts, "message": {
            "messageId": mid, "contextId": "C", "taskId": "T", "role": "ROLE_AGENT",
            "parts": [{"text": t}]}}}}


OPENING = [sdk({"task": {"id": "T", "contextId": "C", "status": {"state": "TASK_STATE_WORKING"}}}),
           sdk({"artifactUpdate": {"taskId": "T", "contextId": "C", "artifact": {
               "artifactId": "A", "parts": [{"text": "first "}], "name": "response"}}})]
DONE = sdk({"statusUpdate": {"taskId": "T", "contextId": "C",
                             "status": {"state": "TASK_STATE_COMPLETED"}}})


def same_both_ways(payloads: list[bytes]) -> list[Any]:
    """Fed in one read and one by one: the fast path's events are the general path's."""
    for reads in ([payloads], [[p] for p in payloads]):
        fast, general = both(f.CURRENT, reads)
        assert joined(fast, {"A", "B"}) == joined(general, {"A", "B"})
    return fast


def texts(outputs: list[Any]) -> list[str]:
    return [o.text for o in outputs if type(o) is TextChunk]


def taken(payloads: list[bytes]) -> int:
    """How many text events of one read the fast path took by their shape."""
    d = driver(f.CURRENT, other=True, cap=True)
    rid = start(d)
    seen: list[int] = []
    settle = d._settle

    def counting(learnt: Any, values: Any, text: Any, size: int, count: int, out: Any,
                 joins: bool) -> Any:
        seen.append(count)
        return settle(learnt, values, text, size, count, out, joins)

    d._settle = counting  # type: ignore[method-assign]
    d.receive_frame(SseBatch(rid, payloads))
    return sum(seen)


def test_a_run_of_chunks_is_taken_by_its_shape_and_means_the_same() -> None:
    run = [sdk(chunk(t)) for t in ["a ", 'quote " and \\ ', "λ ✓ \U0001f642", "", "\n\t end"]]
    stream = [*OPENING, *run, DONE]
    out = same_both_ways(stream)
    assert "".join(texts(out)) == 'first a quote " and \\ λ ✓ \U0001f642\n\t end'
    assert taken(stream) == len(run) - 1  # all but the one it was learnt from


def test_status_messages_are_taken_by_their_shape_once_per_message_id() -> None:
    run = [sdk(said(t, mid)) for t, mid in
           [("one ", "m1"), ("two ", "m2"), ("again", "m1"), ("", "m3"), ("three", "m4")]]
    stream = [OPENING[0], *run, DONE]
    assert "".join(texts(same_both_ways(stream))) == "one two three"
    assert taken(stream) == len(run) - 1


ADVERSE = {
    # the text hole holds an unescaped quote: another key, not a text
    "a hole that is no string": lambda p: p.replace(b'"text": "b"', b'"text": "b", "x": "y"'),
    "a raw control character in the hole": lambda p: p.replace(b'"b"', b'"b\x01"'),
    "a hole that ends in a backslash": lambda p: p.replace(b'"b"', b'"b\\"'),
    "the key spelled with an escape": lambda p: p.replace(b'"text"', b'"te\\u0078t"'),
    "another key order": lambda p: p.replace(b'"taskId": "T", "contextId": "C"',
                                             b'"contextId": "C", "taskId": "T"'),
    "another artifact": lambda p: p.replace(b'"A"', b'"B"'),
    "the last chunk": lambda p: p.replace(b'"append": true', b'"append": true, "lastChunk": true'),
    "another task": lambda p: p.replace(b'"taskId": "T"', b'"taskId": "U"'),
    "not JSON after all": lambda p: p + b"]",
}


@pytest.mark.parametrize("change", list(ADVERSE), ids=list(ADVERSE))
def test_a_payload_that_only_looks_like_the_shape_goes_the_general_way(change: str) -> None:
    odd = ADVERSE[change](sdk(chunk("b")))
    assert odd != sdk(chunk("b"))
    same_both_ways([*OPENING, sdk(chunk("a")), sdk(chunk("c")), odd, sdk(chunk("d")), DONE])


def test_a_timestamp_of_another_width_is_told_apart_one_by_one() -> None:
    run = [sdk(said("one ", "m1")), sdk(said("two ", "m2")),
           sdk(said("three ", "m3", ts="2026-07-19T11:34:37Z")), sdk(said("four", "m4"))]
    stream = [OPENING[0], *run, DONE]
    assert "".join(texts(same_both_ways(stream))) == "one two three four"
    assert taken(stream) == 3


def test_a_shape_is_learnt_only_where_the_probe_lands_in_the_named_field() -> None:
    data = sdk(chunk("real"))
    assert learn(data, ("text",), frozenset(), lambda probe, markers: True) is not None
    assert learn(data, ("text",), frozenset(), lambda probe, markers: False) is None
    both_keys = data.replace(b'"parts"', b'"metadata": {"text": "x"}, "parts"')
    assert learn(both_keys, ("text",), frozenset(), lambda probe, markers: True) is None
    assert learn(data, ("messageId",), frozenset(), lambda probe, markers: True) is None


def test_holes_decode_only_as_string_bodies() -> None:
    assert decode_holes([b"a", b'q\\"', b"\\u03bb"]) == ["a", 'q"', "λ"]
    for bad in ([b'a", "b'], [b"a\\"], [b'a"'], [b"\x01"]):
        assert decode_holes(bad) is None


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(st.tuples(st.text(max_size=6), st.sampled_from(["m1", "m2", "m3"]),
                                 st.sampled_from(["chunk", "said", "said_other_ts"])),
                       min_size=1, max_size=12),
       cut=st.integers(1, 12))
def test_generated_runs_give_the_same_events(pieces: list[tuple[str, str, str]],
                                              cut: int) -> None:
    payloads = [sdk(chunk(t)) if how == "chunk" else
                sdk(said(t, mid, ts="2026-01-01T00:00:00Z" if how == "said_other_ts" else
                         "2026-07-19T11:34:37.417Z"))
                for t, mid, how in pieces]
    stream = [*OPENING, *payloads, DONE]
    reads = [stream[i:i + cut] for i in range(0, len(stream), cut)]
    fast, general = both(f.CURRENT, reads)
    assert joined(fast, {"A", "B"}) == joined(general, {"A", "B"})


def test_a_shape_run_and_its_one_by_one_rule_agree() -> None:
    datas = [sdk(said(t, f"m{i}")) for i, t in enumerate(["a", 'b\\"', "", "ccc"])]
    shape = learn(datas[0], ("timestamp", "messageId", "text"), frozenset({"timestamp"}),
                  lambda probe, markers: True)
    assert isinstance(shape, Shape)
    holes: list[bytes] = []
    assert shape.take(datas, 0, holes) == 4
    values = decode_holes(holes)
    assert values is not None
    assert shape.run(datas, 0, 4) == [values[k::3] for k in range(3)]
    wider = [*datas[:2], sdk(said("x", "m9", ts="2026-07-19T11:34:37Z"))]
    assert shape.run(wider, 0, 3) is None
    assert shape.take(wider, 0, []) == 3


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.text(max_size=5), min_size=1, max_size=6),
       status=st.booleans(), at=st.integers(0, 10_000), byte=st.binary(min_size=0, max_size=2),
       drop=st.integers(0, 3))
def test_a_run_is_taken_exactly_when_the_rebuilt_payloads_are_the_payloads(
        texts: list[str], status: bool, at: int, byte: bytes, drop: int) -> None:
    """``Shape.run`` compares in place (prefix, middle, suffix, length) instead of building
    the rebuilt bytes: on payloads with one spliced edit it says what the comparison of
    the rebuilt bytes with the payloads joined says."""
    make = (lambda k, t: sdk(said(t, f"m{k}"))) if status else (lambda k, t: sdk(chunk(t)))
    datas = [make(k, t) for k, t in enumerate(texts)]
    names = ("timestamp", "messageId", "text") if status else ("text",)
    shape = learn(datas[0], names, frozenset({"timestamp"}), lambda probe, markers: True)
    assert isinstance(shape, Shape)
    victim = at % len(datas)
    d = datas[victim]
    cut = at % (len(d) + 1)
    datas[victim] = d[:cut] + byte + d[cut + min(drop, len(d) - cut):]
    got = shape.run(datas, 0, len(datas))
    n = len(datas)
    columns = [[p[sl] for p in datas] for sl in shape.slices]
    after = [*shape.segments[1:-1], b""]  # what follows each hole inside a payload
    rebuilt = shape.first + shape.cut.join(
        b"".join(col[i] + seg for col, seg in zip(columns, after, strict=True))
        for i in range(n)) + shape.last
    holes = [h for col in columns for h in col]
    values = decode_holes(holes)
    if rebuilt != b"\n".join(datas) or values is None:
        assert got is None
    else:
        assert got == [values[k:k + n] for k in range(0, len(values), n)]
    if status:  # a timestamp only checked: the same answer, its list left empty
        unread = shape.run(datas, 0, n, (0,))
        assert unread == (None if got is None else [(), *got[1:]])


HOSTILE_TIMESTAMPS = {  # each as wide as the one the shape was learnt from
    "a raw control character": "2026-07-19T11:34:37.41\x01Z",
    "an unescaped quote": '2026-07-19T11:34:37.4"7Z',
    "a trailing backslash": "2026-07-19T11:34:37.417\\",
    "a cut unicode escape": "2026-07-19T11:34:37\\u004",
}


@pytest.mark.parametrize("ts", list(HOSTILE_TIMESTAMPS.values()), ids=list(HOSTILE_TIMESTAMPS))
def test_a_timestamp_that_is_no_string_body_goes_the_general_way(ts: str) -> None:
    """The timestamp of a status run is only checked, in one decode for the run (joined
    with ``x``): one that is no string's body still sends the payload the general way."""
    raw = sdk(said("two ", "m2")).replace(b"2026-07-19T11:34:37.417Z", ts.encode())
    assert len(raw) == len(sdk(said("two ", "m2")))
    stream = [OPENING[0], sdk(said("one ", "m1")), raw, sdk(said("three", "m3")), DONE]
    shape = learn(stream[1], ("timestamp", "messageId", "text"), frozenset({"timestamp"}),
                  lambda probe, markers: True)
    assert isinstance(shape, Shape)
    assert shape.run(stream, 1, 4, (0,)) is None
    assert shape.run(stream, 1, 2, (0,)) == [(), ["m1"], ["one "]]
    same_both_ways(stream)
