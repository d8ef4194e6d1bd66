"""The hot read's chunk runs: the C loop (``_runs.c``) gives what the Python reference gives.

The C loop reads Struct fields at their slots, so it is checked against
:func:`runs.join_runs_py` on the shared corpus and on generated reads that hold
every case a run can end on (another kind, another message id, a missing or null
id, a block that is not text, ``_meta`` on the update or on its block, another
update between), and end to end against the line-by-line path.
"""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.acp_bench import SESSION, corpus
from trio_cap.actors.bindings.acp import frames as f
from trio_cap.actors.bindings.acp import runs

from .test_block_path import run

MESSAGE, NOTE, DECODE = f.session_decoder(SESSION)


def native() -> object:
    try:
        from trio_cap.actors.bindings.acp import _runs  # type: ignore[attr-defined]
    except ImportError:
        pytest.fail("the C loop (trio_cap.actors.bindings.acp._runs) was not built: "
                    "reinstall with a C compiler (pip install -e .)")
    return _runs


def c_layout(message: type, note: type) -> object:
    return native().Layout(message, note, f.MessageChunkView, f.ThoughtChunkView,  # type: ignore[attr-defined]
                           f.TextView, msgspec.UNSET)


def both(block: bytes) -> tuple[list[object], list[object]]:
    items = DECODE(b"[" + block.replace(b"\n", b",\n") + b"]")
    fast = native().join_runs(items, c_layout(MESSAGE, NOTE))  # type: ignore[attr-defined]
    return fast, runs.join_runs_py(items, runs.PyLayout(MESSAGE, NOTE))


def test_the_client_runs_the_c_loop() -> None:
    native()
    assert runs.NATIVE and runs.join_runs is native().join_runs  # type: ignore[attr-defined]


def test_the_corpus_gives_the_same_runs() -> None:
    block = corpus(6000).rstrip(b"\n")
    fast, reference = both(block)
    assert fast == reference
    assert 0 < sum(type(e) is tuple for e in fast) < 6000 / 4  # runs were joined …
    assert any(type(e) is not tuple for e in fast)  # … and other updates kept whole


def _chunk(kind: str, mid: object, content: dict[str, object],
           meta: dict[str, object] | None) -> dict[str, object]:
    update: dict[str, object] = {"sessionUpdate": kind, "content": content}
    if mid != "absent":
        update["messageId"] = mid
    if meta is not None:
        update["_meta"] = meta
    return update


_texts = st.text(max_size=6)
_contents = st.one_of(
    _texts.map(lambda t: {"type": "text", "text": t}),
    _texts.map(lambda t: {"type": "text", "text": t, "_meta": {"cap.message_to": "b"}}),
    st.just({"type": "image", "data": "AA==", "mimeType": "image/png"}),
)
_chunks = st.builds(_chunk, st.sampled_from(["agent_message_chunk", "agent_thought_chunk"]),
                    st.sampled_from(["m1", "m1", "m2", None, "absent"]), _contents,
                    st.sampled_from([None, None, None, {"cap.message_to": "b"}, {"x": 1}]))
_others = st.sampled_from([
    {"sessionUpdate": "plan", "entries": []},
    {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "read"},
    {"sessionUpdate": "usage_update", "used": 1, "size": 2},
])


def _lines(updates: list[dict[str, object]]) -> bytes:
    return b"\n".join(json.dumps({"jsonrpc": "2.0", "method": "session/update",
                                  "params": {"sessionId": SESSION, "update": u}}).encode()
                      for u in updates)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_chunks, _chunks, _chunks, _others), min_size=1, max_size=30))
def test_any_read_gives_the_same_runs(updates: list[dict[str, object]]) -> None:
    fast, reference = both(_lines(updates))
    assert fast == reference
    assert [type(e) for e in fast] == [type(e) for e in reference]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(_chunks, _chunks, _others), min_size=1, max_size=30),
       st.integers(1, 4096))
def test_any_read_gives_the_events_of_the_line_by_line_path(
        updates: list[dict[str, object]], read: int) -> None:
    native()
    data = _lines(updates) + b"\n"
    assert run(data, read, block=True) == run(data, read, block=False)


def test_an_item_of_another_type_is_refused_by_both() -> None:
    items = DECODE(b"[" + _lines([{"sessionUpdate": "plan", "entries": []}]) + b"]")
    other, other_note, _ = f.session_decoder("another")
    for join, lay in ((native().join_runs, c_layout(other, other_note)),  # type: ignore[attr-defined]
                      (runs.join_runs_py, runs.PyLayout(other, other_note))):
        with pytest.raises(TypeError, match="join_runs"):
            join(items, lay)


def test_a_layout_of_types_without_those_fields_is_refused() -> None:
    class NoParams(msgspec.Struct):
        other: int

    class ParamsNotAField:
        params = property(lambda self: None)

    layout = native().Layout  # type: ignore[attr-defined]
    rest = (NOTE, f.MessageChunkView, f.ThoughtChunkView, f.TextView, msgspec.UNSET)
    with pytest.raises(AttributeError):
        layout(NoParams, *rest)
    with pytest.raises(TypeError, match="not a Struct field"):
        layout(ParamsNotAField, *rest)
    with pytest.raises(TypeError, match="join_runs"):
        native().join_runs((), c_layout(MESSAGE, NOTE))  # type: ignore[attr-defined]
