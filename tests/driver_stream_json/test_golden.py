"""Recorded traffic, replayed: real sessions' bytes through a fresh driver give the same outputs.

``golden/cap_agent.jsonl`` is trio-cap's own agent and ``golden/claude_code.jsonl``
the pinned real Claude Code (scripted model server), each recorded through the
real connector by ``golden/record.py``: the reads exactly as the pipe gave
them, the CAP frames the session sent, and every output.  A change in what the
driver emits for real traffic fails here, line by line.
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec
import pytest

from trio_cap.actors.bindings.base import AGENT_RISK
from trio_cap.events.kinds import AnyEvent

from .frames_lib import merged
from .golden.recording import HERE, fresh_driver, load, output_json, replay

RECORDINGS = ["cap_agent", "claude_code"]


def kinds(outs: list[list[Any]]) -> list[str]:
    return [o.get("kind") or next(iter(o)) for out in outs for o in out]


@pytest.mark.parametrize("name", RECORDINGS)
def test_replay_gives_the_recorded_outputs(name: str) -> None:
    header, calls = load(HERE / f"{name}.jsonl")
    got = replay(header, calls)
    for i, (call, out) in enumerate(zip(calls, got, strict=True)):
        assert out == call["out"], f"call {i} ({call['call']}) differs"


@pytest.mark.parametrize(("name", "expected"), [
    ("cap_agent", {"cap.session.ready", "cap.thought", "cap.text_chunk", "cap.tool_call.start",
                   "cap.permission.request", "cap.tool_call.end", "cap.ask_user", "cap.usage",
                   "cap.artifact", "cap.error", "turn_ended"}),
    ("claude_code", {"cap.session.ready", "cap.thought", "cap.text_chunk",
                     "cap.tool_call.start", "cap.permission.request", "cap.tool_call.end",
                     "cap.ask_user", "cap.usage", "turn_ended"}),
])
def test_the_recordings_cover_every_kind_of_traffic(name: str, expected: set[str]) -> None:
    _, calls = load(HERE / f"{name}.jsonl")
    outs = [call["out"] for call in calls if call["call"] != "send"]
    assert expected <= set(kinds(outs))
    assert "cap.error" not in kinds(outs) or name == "cap_agent"  # nothing unreadable
    requests = [o for out in outs for o in out if o.get("kind") == "cap.permission.request"]
    assert all(r.get("risk_level", "medium") == "medium" and AGENT_RISK not in r.get("_meta", {})
               for r in requests)  # R13: no rating from a binding


def test_claude_code_text_arrives_once() -> None:
    _, calls = load(HERE / "claude_code.jsonl")
    texts = [o["text"] for call in calls if call["call"] == "receive_data" for o in call["out"]
             if o.get("kind") == "cap.text_chunk" and o.get("channel", "assistant") == "assistant"]
    assert "".join(texts) == ("first answer here" "On it." "Finished."
                              "Let me ask." "Going with your choice.")


def _feed(name: str, cut: Any) -> list[Any]:
    """The recording's calls with every read cut by ``cut`` (events only, text joined)."""
    header, calls = load(HERE / f"{name}.jsonl")
    driver = fresh_driver(header)
    out: list[Any] = []
    for call in calls:
        if call["call"] == "initialize":
            driver.initialize()
        elif call["call"] == "send":
            driver.send(msgspec.convert(call["frame"], AnyEvent))
        elif call["call"] == "receive_data":
            for piece in cut(base64.b64decode(call["data"])):
                out += driver.receive_data(piece)
        else:
            out += driver.receive_eof()
    return [output_json(o) for o in merged(out)]


@pytest.mark.parametrize("name", RECORDINGS)
def test_real_traffic_gives_the_same_events_read_one_byte_at_a_time(name: str) -> None:
    whole = _feed(name, lambda data: [data])
    assert _feed(name, lambda data: [data[i:i + 1] for i in range(len(data))]) == whole
    assert _feed(name, lambda data: data.splitlines(keepends=True)) == whole
