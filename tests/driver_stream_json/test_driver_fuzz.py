"""Hypothesis against the driver: any bytes in, only typed outputs out, never an exception.

Inputs are random bytes, random valid frames (every frame type, built from
the wire Structs' own schema, plus realistic Claude Code turns), frames cut at
any byte and spliced into each other, garbage lines, and host frames sent in
between.  Whatever the input, the outputs are events, turn ends or bytes for
the agent, and they are the same — text joined (rule R2) — whether the bytes
arrive whole, one at a time, or in any chunks.
"""

from __future__ import annotations

import os
from itertools import count
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_cap.actors.bindings.base import ToAgent, TurnEnded
from trio_cap.actors.bindings.stream_json import frames as f
from trio_cap.actors.bindings.stream_json.driver import StreamJsonDriver
from trio_cap.events.kinds import (
    AskUserAnswer,
    Cancel,
    CapError,
    Event,
    PermissionResponse,
)

from .frames_lib import (
    SID,
    assistant,
    block_start,
    block_stop,
    can_use_tool,
    delta,
    init_ok,
    line,
    merged,
    message_start,
    prompt,
    result,
    system_init,
    text_turn,
    tool_result,
)

FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "150")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ---- frames from the wire Structs' schema ---------------------------------------------

_text = st.text(max_size=12)
_json: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6)


def _for_type(t: Any) -> st.SearchStrategy[Any]:
    mi = msgspec.inspect
    if isinstance(t, mi.StrType):
        return st.sampled_from(["", "u1", "req_1_init", "msg_1", "toolu_1", "x"]) | _text
    if isinstance(t, mi.IntType):
        return st.integers(-1, 3)
    if isinstance(t, mi.FloatType):
        return st.floats(0, 10, allow_nan=False)
    if isinstance(t, mi.BoolType):
        return st.booleans()
    if isinstance(t, mi.NoneType):
        return st.none()
    if isinstance(t, mi.AnyType):
        return _json
    if isinstance(t, mi.LiteralType):
        return st.sampled_from(t.values)
    if isinstance(t, mi.UnionType):
        return st.one_of([_for_type(x) for x in t.types])
    if isinstance(t, mi.DictType):
        return st.dictionaries(_text, _for_type(t.value_type), max_size=2)
    if isinstance(t, mi.ListType | mi.VarTupleType):
        return st.lists(_for_type(t.item_type), max_size=2)
    if isinstance(t, mi.StructType):
        return _struct(t.cls)
    raise TypeError(f"no strategy for {t!r}")


def _struct(cls: type) -> st.SearchStrategy[Any]:
    fields = msgspec.inspect.type_info(cls).fields  # type: ignore[attr-defined]
    return st.builds(cls, **{fl.name: st.deferred(lambda t=fl.type: _for_type(t))
                             for fl in fields})


schema_frames = st.one_of([_struct(cls) for cls in f.AnyFrame.__args__]).map(  # type: ignore[attr-defined]
    f.encode_line)

# ---- realistic lines ----------------------------------------------------------------------

realistic = st.one_of(
    st.builds(text_turn, st.text(min_size=1, max_size=30), st.sampled_from(["msg_1", "msg_2"])),
    st.builds(lambda t: message_start() + block_start(0, {"type": "thinking", "thinking": "",
                                                          "signature": ""})
              + delta(0, {"type": "thinking_delta", "thinking": t})
              + assistant({"type": "thinking", "thinking": t, "signature": "s"}) + block_stop(0),
              st.text(max_size=20)),
    st.builds(lambda i: message_start() + block_start(i, {"type": "tool_use", "id": "toolu_1",
                                                          "name": "Bash", "input": {}})
              + delta(i, {"type": "input_json_delta", "partial_json": '{"command":'})
              + delta(i, {"type": "input_json_delta", "partial_json": '"ls"}'}) + block_stop(i),
              st.integers(0, 2)),
    st.builds(tool_result, st.just("toolu_1"), st.text(max_size=20), st.booleans()),
    st.builds(lambda u, c: result(u, cost=c), st.sampled_from([None, [], ["u1"], ["u1", "u1"],
                                                              ["u2", "zz"]]),
              st.floats(0, 1, allow_nan=False)),
    st.builds(can_use_tool, st.sampled_from(["p1", "p2"]),
              st.sampled_from(["Bash", "Write", "AskUserQuestion"]),
              st.sampled_from([{"command": "ls"}, {"questions": [{"question": "Q?"}]}, {}])),
    st.just(system_init()), st.just(system_init("other")), st.just(init_ok()),
    st.just(line({"type": "control_cancel_request", "request_id": "p1"})),
    st.just(line({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected"}})),
    st.just(line({"type": "system", "subtype": "api_retry", "attempt": 1,
                  "error_status": 529})),
    st.just(line({"type": "system", "subtype": "cap.error", "cap": {"code": "x"}})),
    st.just(line({"type": "stream_event", "uuid": "e", "session_id": SID,
                  "parent_tool_use_id": "toolu_9", "event": {
                      "type": "content_block_delta", "index": 0,
                      "delta": {"type": "text_delta", "text": "sub"}}})),
)
garbage = st.one_of(
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"") + b"\n"),
    st.sampled_from([b"\n", b"  \r\n", b"[1,2]\n", b"42\n", b'{"type":5}\n', b"{}\n",
                     b'{"type":"user"}\n', b'{"type":"nope","x":1}\n', b"\xff\xfe\n",
                     b'{"type":"keep_alive"},{"type":"keep_alive"}\n', b'{"a":[1\n', b"2]}\n"]),
)


@st.composite
def cut_and_spliced(draw: st.DrawFn) -> bytes:
    """A frame cut at any byte: resumed on the next line, or with another frame spliced in."""
    whole = draw(realistic | schema_frames).rstrip(b"\n")
    other = draw(realistic | schema_frames)
    at = draw(st.integers(0, len(whole)))
    how = draw(st.sampled_from(["resume", "splice", "glue", "truncate"]))
    if how == "resume":
        return whole[:at] + b"\n" + whole[at:] + b"\n"
    if how == "splice":
        return whole[:at] + other + whole[at:] + b"\n"
    if how == "glue":
        return whole + other
    return whole[:at] + b"\n"


host_frames = st.sampled_from([
    prompt("go"), Cancel(scope="current_turn"), Cancel(scope="session"),
    PermissionResponse(req_id="p1", decision="allow_once"),
    PermissionResponse(req_id="p2", decision="deny"),
    PermissionResponse(req_id="p1", decision="allow_always", meta={"cap.updated_input": 3}),
    AskUserAnswer(ask_id="p1", value="a"), AskUserAnswer(ask_id="p2", value=None),
])
Step = tuple[str, Any]
steps = st.lists(st.one_of(
    st.tuples(st.just("data"), realistic | schema_frames | garbage | cut_and_spliced()),
    st.tuples(st.just("send"), host_frames)), max_size=25)


# ---- running a script -----------------------------------------------------------------------

def new_driver(max_line: int = 1 << 20) -> StreamJsonDriver:
    ids = count(1)
    driver = StreamJsonDriver(new_uuid=lambda: f"u{next(ids)}", session_id=SID, max_line=max_line)
    driver.initialize()
    return driver


def run(script: list[Step], chunk: Any, max_line: int = 1 << 20) -> list[Any]:
    driver = new_driver(max_line)
    out: list[Any] = []
    for what, item in script:
        if what == "send":
            data = driver.send(item)
            assert isinstance(data, bytes)
            continue
        for piece in chunk(item):
            got = driver.receive_data(piece)
            assert isinstance(got, list)
            out += got
    out += driver.receive_eof()
    for o in out:
        assert isinstance(o, Event | TurnEnded | ToAgent), o
        if isinstance(o, ToAgent):
            msgspec.json.decode(o.data)  # what the driver writes is JSON
        if isinstance(o, CapError):
            assert o.code and o.message
    return out


def bytewise(data: bytes) -> list[bytes]:
    return [data[i:i + 1] for i in range(len(data))]


@FUZZ
@given(st.lists(st.binary(max_size=200), max_size=8))
def test_random_bytes_never_raise(chunks: list[bytes]) -> None:
    run([("data", c) for c in chunks], lambda d: [d])


@FUZZ
@given(steps)
def test_any_traffic_gives_the_same_events_whole_or_byte_by_byte(script: list[Step]) -> None:
    whole = run(script, lambda d: [d])
    assert merged(run(script, bytewise)) == merged(whole)


@FUZZ
@given(steps, st.data())
def test_any_chunking_gives_the_same_events(script: list[Step], data: st.DataObject) -> None:
    stream = b"".join(item for what, item in script if what == "data")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    sends = [("send", item) for what, item in script if what == "send"]
    # host frames first, then the bytes in random reads: the same either way
    whole = run([*sends, ("data", stream)], lambda d: [d])
    assert merged(run([*sends, *(("data", p) for p in pieces)], lambda d: [d])) == merged(whole)


@FUZZ
@given(steps)
def test_a_small_line_limit_only_turns_long_lines_into_typed_errors(script: list[Step]) -> None:
    out = run(script, bytewise, max_line=64)
    assert merged(out) == merged(run(script, lambda d: [d], max_line=64))
