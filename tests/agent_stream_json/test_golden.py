"""Recorded traffic: a real Python SDK session replayed through the sans-io machine.

``golden/sdk_session.jsonl`` holds every call a real ``cap-agent`` shell made on
its machine while the official SDK drove it (``golden/record.py``: tool calls
allowed with a rewrite and denied, an ask, a plan, a mode change between
turns, a failed turn, an interrupt, stdin closing).  A fresh machine given the
same calls must return the same effects, byte for byte — so any change to what
the agent side writes shows up here, and the recording is re-made on purpose.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from tests.agent_stream_json.golden.recording import call_machine, effect_json, machine_from_header

GOLDEN = Path(__file__).parent / "golden" / "sdk_session.jsonl"


def recording() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = [json.loads(line) for line in GOLDEN.read_text().splitlines()]
    return lines[0]["header"], lines[1:]


def test_the_recorded_session_replays_to_the_same_bytes():
    header, calls = recording()
    machine = machine_from_header(header)
    for i, call in enumerate(calls):
        got = [effect_json(e) for e in call_machine(machine, call["call"], call["args"])]
        assert got == call["out"], f"call {i} ({call['call']}) differs"


def test_the_recording_is_a_whole_sdk_session_that_ends_with_its_result():
    from claude_agent_sdk._internal.message_parser import parse_message

    _, calls = recording()
    sent = [json.loads(e["send"]) for c in calls for e in c["out"] if "send" in e]
    stream = [fr for fr in sent if not fr["type"].startswith("control_")]
    results = [fr for fr in stream if fr["type"] == "result"]
    assert [r["subtype"] for r in results] == ["success", "success", "error_during_execution",
                                               "error_during_execution", "success"]
    assert stream[-1]["type"] == "result"  # nothing after the last result
    for before, after in itertools.pairwise(stream):
        if before["type"] == "result":  # the next thing written is the next turn's init
            assert (after["type"], after.get("subtype")) == ("system", "init")
    for frame in stream:
        parse_message(frame)
    requests = [fr["request"]["tool_name"] for fr in sent if fr["type"] == "control_request"]
    assert requests == ["Write", "Bash", "AskUserQuestion"]
    assert any(c["call"] == "receive_eof" for c in calls)
