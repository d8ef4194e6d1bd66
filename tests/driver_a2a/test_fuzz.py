"""Hypothesis: whatever the agent sends, the machine answers with typed outputs, never raises;
and the sans-io SSE reader splits a stream exactly as httpx-sse's parser does."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.driver_a2a.machine_lib import driver, start
from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.actors.bindings.a2a.machine import (
    Body,
    CloseExchange,
    Dropped,
    Ended,
    HttpStatus,
    Post,
    SseBatch,
)
from trio_cap.actors.bindings.a2a.machine_sse import SseReader
from trio_cap.actors.bindings.base import TurnEnded
from trio_cap.events.kinds import AskUserAnswer, Cancel, Event, PermissionResponse

OUTPUTS = (Event, TurnEnded, Post, CloseExchange)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=3),
    max_leaves=12)
states = st.sampled_from(["TASK_STATE_WORKING", "TASK_STATE_COMPLETED", "working", "failed",
                          "input-required", "TASK_STATE_INPUT_REQUIRED", "canceled", "?"])
parts = st.lists(st.fixed_dictionaries({}, optional={
    "text": st.text(max_size=5), "kind": st.sampled_from(["text", "data", "file"]),
    "data": json_values, "metadata": st.just({"cap.kind": "cap.ask_user"})}), max_size=3)
results = st.one_of(
    st.fixed_dictionaries({"statusUpdate": st.fixed_dictionaries({
        "taskId": st.sampled_from(["T", "U"]), "status": st.fixed_dictionaries(
            {"state": states}, optional={"message": st.fixed_dictionaries(
                {"messageId": st.text(max_size=3), "role": st.sampled_from(
                    ["ROLE_AGENT", "agent", "user"]), "parts": parts})})})}),
    st.fixed_dictionaries({"artifactUpdate": st.fixed_dictionaries({
        "taskId": st.just("T"), "artifact": st.fixed_dictionaries(
            {"artifactId": st.sampled_from(["A", "B"]), "parts": parts}),
        "append": st.booleans(), "lastChunk": st.booleans()})}),
    st.fixed_dictionaries({"task": st.fixed_dictionaries({
        "id": st.just("T"), "status": st.fixed_dictionaries({"state": states}),
        "artifacts": st.lists(st.fixed_dictionaries({"artifactId": st.just("A"),
                                                     "parts": parts}), max_size=2)})}),
    st.fixed_dictionaries({"kind": st.sampled_from(["task", "message", "status-update",
                                                    "artifact-update"]),
                           "taskId": st.just("T"), "id": st.just("T"), "contextId": st.just("C"),
                           "final": st.booleans(),
                           "status": st.fixed_dictionaries({"state": states}),
                           "messageId": st.just("m"), "role": st.just("agent"), "parts": parts}),
    json_values)


def payloads(rid: int) -> st.SearchStrategy[bytes]:
    framed = results.map(lambda r: json.dumps({"jsonrpc": "2.0", "id": rid,
                                               "result": r}).encode())
    return st.one_of(framed, st.binary(max_size=40), json_values.map(
        lambda v: json.dumps(v).encode()))


@st.composite
def inputs(draw: st.DrawFn) -> list[object]:
    rid = 1
    steps: list[object] = []
    for _ in range(draw(st.integers(1, 8))):
        choice = draw(st.integers(0, 9))
        if choice < 6:
            steps.append(SseBatch(rid, draw(st.lists(payloads(rid), min_size=1, max_size=4))))
        elif choice == 6:
            steps.append(Body(rid, draw(payloads(rid))))
        elif choice == 7:
            steps.append(draw(st.sampled_from([Ended(rid), Dropped(rid, "x", responded=True),
                                               HttpStatus(rid, 500, b"")])))
        else:
            steps.append(draw(st.sampled_from([Cancel(), AskUserAnswer(ask_id="a"),
                                               PermissionResponse(req_id="p",
                                                                  decision="deny")])))
    return steps


@settings(max_examples=300, deadline=None)
@given(spelling=st.sampled_from([f.CURRENT, f.DRAFT]), steps=inputs())
def test_any_input_gives_typed_outputs(spelling: f.Spelling, steps: list[object]) -> None:
    d = driver(spelling, other=True, cap=True)
    start(d)
    for step in steps:
        if isinstance(step, Event):
            out = d.send([step])
        else:
            live = sorted(d.live) or [1]
            step = type(step)(live[-1], *list(vars_of(step))[1:])  # aim at a live exchange
            out = d.receive_frame(step)
        for item in out:
            assert isinstance(item, OUTPUTS), item
        assert sum(type(o) is TurnEnded for o in out) <= 1


def vars_of(step: object) -> list[object]:
    return [getattr(step, name) for name in step.__slots__]  # type: ignore[attr-defined]


def _httpx_sse(stream: bytes) -> tuple[list[str], str | None]:
    """(the events' data, the stream's last event ID at its end)."""
    from httpx_sse._decoders import SSEDecoder, SSELineDecoder

    lines, decoder, out, last = SSELineDecoder(), SSEDecoder(), [], None
    for line in [*lines.decode(stream.decode()), *lines.flush()]:
        sse = decoder.decode(line.rstrip("\n"))
        if sse is not None:
            last = sse.id or None  # kept across events, with or without data (the spec)
            if sse.data:
                out.append(sse.data)
    return out, last


sse_lines = st.lists(st.one_of(
    st.text(alphabet="abc{}: \"", max_size=8).map(lambda t: "data: " + t),
    st.text(alphabet="abc{}", max_size=6).map(lambda t: "data:" + t),
    st.sampled_from([": ping", "event: error", "id: 7", "id: 12", "retry: 10", "data", ""])),
    max_size=12)


def _read_in_cuts(stream: bytes, cuts: list[int]) -> tuple[SseReader, list]:
    """The reader and what it gave for ``stream`` fed in reads of ``cuts`` bytes, the rest
    in one, then its end."""
    reader, got, at = SseReader(), [], 0
    for size in cuts:
        got += reader.feed(stream[at:at + size])
        at += size
    got += reader.feed(stream[at:])
    got += reader.feed_eof()
    return reader, got


@settings(max_examples=400, deadline=None)
@given(lines=sse_lines, eol=st.sampled_from(["\r\n", "\n", "\r"]),
       cuts=st.lists(st.integers(1, 7), max_size=30))
def test_the_sse_reader_agrees_with_httpx_sse(lines: list[str], eol: str,
                                              cuts: list[int]) -> None:
    stream = (eol.join(lines) + eol + eol).encode()
    reader, got = _read_in_cuts(stream, cuts)
    expected, last_id = _httpx_sse(stream)
    assert [g.decode() for g in got if g] == expected
    if expected and last_id is not None:
        assert reader.last_id == last_id


sdk_events = st.lists(st.one_of(
    st.text(alphabet="ab{}\" :", max_size=12).map(lambda t: "data: " + t + "\r\n\r\n"),
    st.sampled_from([": ping\r\n\r\n", "id: 3\r\ndata: x\r\n\r\n", "data: a\r\ndata: b\r\n\r\n",
                     "data: c\n\n", "event: e\r\n\r\n", "data: half\r"])),
    max_size=30)


@settings(max_examples=400, deadline=None)
@given(events=sdk_events, cuts=st.lists(st.integers(1, 40), max_size=12))
def test_the_sse_reader_splits_sdk_streams_in_the_read_as_httpx_sse(
        events: list[str], cuts: list[int]) -> None:
    """a2a-sdk's framing (one ``data: `` line and CRLF per event), split in each read without
    copying it behind the held bytes; reads cut anywhere, a separator or ``data: `` too, and
    an other line break now and then sending the read the general way."""
    stream = "".join(events).encode()
    _, got = _read_in_cuts(stream, cuts)
    expected, _ = _httpx_sse(stream)
    assert [g.decode() for g in got if g] == expected
