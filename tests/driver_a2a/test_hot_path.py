"""The fast path of one read's SSE events (``machine_hot``, ``bindings.byte_shape``) gives exactly
what the general rules give, event for event: on the shared corpus cut into reads as the bench
cuts it, and on generated streams in both spellings cut anywhere.

The one difference allowed is the documented one: consecutive text of one artifact, or of
agent status messages, in one read comes as one ``cap.text_chunk`` (keeping the first
message's id), so both sides' consecutive chunks are joined before they are compared.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from bench.a2a_frames_bench import _sse_chunks, corpus
from tests.driver_a2a.machine_lib import driver, start
from tests.driver_a2a.test_fuzz import payloads
from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.actors.bindings.a2a.machine import A2aDriver, Ended, SseBatch
from trio_cap.actors.bindings.a2a.machine_sse import SseReader
from trio_cap.events.kinds import TextChunk


def joined(outputs: list[Any], artifact_ids: set[str]) -> list[Any]:
    out: list[Any] = []
    for o in outputs:
        if type(o) is TextChunk and out and type(out[-1]) is TextChunk and (
                o.message_id == out[-1].message_id
                or not {o.message_id, out[-1].message_id} & artifact_ids):
            out[-1] = TextChunk(message_id=out[-1].message_id, text=out[-1].text + o.text)
        else:
            out.append(o)
    return out


def both(spelling: f.Spelling, reads: list[list[bytes]], turns: int = 1) -> tuple[list, list]:
    """The same reads through a fast and a general machine: (fast outputs, general outputs)."""
    results = []
    for fast in (True, False):
        d = driver(spelling, other=True, cap=True, fast=fast)
        out: list[Any] = []
        for _ in range(turns):
            rid = start(d)
            for datas in reads:
                aimed = [x.replace(b'"id": 1,', f'"id": {rid},'.encode()) for x in datas]
                out += d.receive_frame(SseBatch(rid, aimed))
            out += d.receive_frame(Ended(rid))
        results.append(out)
    return results[0], results[1]


def test_the_corpus_gives_the_same_events_on_both_paths() -> None:
    streams = corpus(6000, seed=5)
    assert len(streams) > 20
    outs = []
    for fast in (True, False):
        d: A2aDriver = driver(f.CURRENT, fast=fast)
        out: list[Any] = []
        for s in streams:
            rid = start(d)
            reader = SseReader()
            for chunk in _sse_chunks(s, rid):
                datas = reader.feed(chunk)
                if datas:
                    out += d.receive_frame(SseBatch(rid, datas))
            out += d.receive_frame(Ended(rid))
        outs.append(out)
    fast_out, general_out = outs
    artifact_ids = {o.artifact_id for o in general_out if type(o).__name__ == "Artifact"}
    assert len(fast_out) < len(general_out)  # runs were joined: the fast path was taken
    assert joined(fast_out, artifact_ids) == joined(general_out, artifact_ids)


_CAP_PART = [{"data": {"x": 1}, "metadata": {"cap.kind": "cap.ask_user"}}]
# Streams heavy in what the fast path takes, with what must turn it away mixed in.
texts = st.text(max_size=4)
hot_parts = st.one_of(st.tuples(texts).map(lambda t: [{"text": t[0]}]),
                      st.just([{"text": "a"}, {"text": "b"}]), st.just([{"data": {"x": 1}}]),
                      st.just([]), st.just(_CAP_PART))


def hot_result(aid: str, tid: str, ctx: str, append: bool, last: bool,
               parts: list[Any]) -> dict[str, Any]:
    au: dict[str, Any] = {"taskId": tid, "artifact": {"artifactId": aid, "parts": parts}}
    if ctx:
        au["contextId"] = ctx
    if append:
        au["append"] = True
    if last:
        au["lastChunk"] = True
    return {"artifactUpdate": au}


def status_result(mid: str, tid: str, ctx: str, state: str, role: str,
                  parts: list[Any]) -> dict[str, Any]:
    return {"statusUpdate": {"taskId": tid, "contextId": ctx, "status": {
        "state": state, "message": {"messageId": mid, "role": role, "parts": parts}}}}


v1_results = st.one_of(
    st.builds(hot_result, st.sampled_from(["A", "B", "A"]), st.sampled_from(["T", "T", "U"]),
              st.sampled_from(["C", "", "D"]), st.booleans(), st.booleans(), hot_parts),
    st.builds(status_result, st.sampled_from(["m1", "m2", "m3", "m4"]),
              st.sampled_from(["T", "T", "U"]), st.sampled_from(["C", "C", "D"]),
              st.sampled_from(["TASK_STATE_WORKING", "TASK_STATE_WORKING",
                               "TASK_STATE_COMPLETED", "TASK_STATE_INPUT_REQUIRED"]),
              st.sampled_from(["ROLE_AGENT", "ROLE_AGENT", "ROLE_USER"]), hot_parts),
    st.just({"task": {"id": "T", "contextId": "C", "status": {"state": "TASK_STATE_WORKING"}}}),
    st.just({"task": {"id": "U", "contextId": "C", "status": {"state": "TASK_STATE_WORKING"}}}))


def v1_payload(result: dict[str, Any], how: int) -> bytes:
    env: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "result": result}
    if how == 1:
        env["id"] = 99
    elif how == 2:
        env["error"] = {"code": -32000, "message": "no"}
    elif how == 3:
        return b"{broken"
    return json.dumps(env).encode()


v1_payloads = st.builds(v1_payload, v1_results, st.sampled_from([0] * 12 + [1, 2, 3]))


def _p(result: dict[str, Any]) -> bytes:
    return v1_payload(result, 0)


@settings(max_examples=300, deadline=None)
@example(reads=[[_p(hot_result("A", "T", "C", False, False, _CAP_PART)),  # a CAP artifact's
                 _p(hot_result("A", "T", "C", True, False, [{"text": "a"}]))]],  # text: quiet
         turns=1)
@example(reads=[[_p(hot_result("A", "T", "C", False, False, [{"text": "a"}])),
                 _p(status_result("m1", "T", "C", "TASK_STATE_WORKING", "ROLE_AGENT",
                                  [{"text": "b"}]))],
                [_p(status_result("m1", "T", "C", "TASK_STATE_WORKING", "ROLE_AGENT",
                                  [{"text": "b"}])),  # seen: nothing again
                 _p(hot_result("A", "U", "C", True, False, [{"text": "c"}])),  # another task
                 _p(hot_result("A", "T", "D", True, False, [{"text": "d"}]))]],  # new context
         turns=2)
@example(reads=[[_p(status_result(mid, "T", "C", "TASK_STATE_WORKING", "ROLE_AGENT",
                                  [{"text": text}]))  # m2 twice in the run the first taught
                 for mid, text in (("m1", "a"), ("m2", "b"), ("m3", "c"), ("m2", "d"))]],
         turns=1)
@given(reads=st.lists(st.lists(v1_payloads, min_size=1, max_size=8), min_size=1, max_size=6),
       turns=st.integers(1, 2))
def test_generated_v1_streams_give_the_same_events(reads: list[list[bytes]], turns: int) -> None:
    fast_out, general_out = both(f.CURRENT, reads, turns)
    assert joined(fast_out, {"A", "B"}) == joined(general_out, {"A", "B"})


@settings(max_examples=200, deadline=None)
@given(spelling=st.sampled_from([f.CURRENT, f.DRAFT]),
       reads=st.lists(st.lists(payloads(1), min_size=1, max_size=4), min_size=1, max_size=5))
def test_any_stream_gives_the_same_events_in_both_spellings(spelling: f.Spelling,
                                                            reads: list[list[bytes]]) -> None:
    fast_out, general_out = both(spelling, reads)
    assert joined(fast_out, {"A", "B"}) == joined(general_out, {"A", "B"})
