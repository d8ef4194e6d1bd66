"""The agent side's transition table (top of ``agent_side.py``), one row per rule.

Each row plays a short conversation — client frames, core events, turn ends,
EOF, a failing core — and states what the client must read (every line, by
``type``/``subtype``), what the core must be handed, and how the session ends.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.agent_stream_json.harness import Harness
from trio_cap.events.kinds import (
    CapError,
    PermissionRequest,
    TextChunk,
    ToolCallStart,
    Usage,
)

INIT, RESULT, DIFF, ERR = "system/init", "result", "system/cap.transcript_diff", "system/cap.error"
OK, ASK, CANCEL = "control_response", "control_request", "control_cancel_request"
Step = tuple[Any, ...]


def play(h: Harness, steps: list[Step]) -> None:
    for step in steps:
        match step:
            case ("user", text):
                h.prompt(text)
            case ("core", *events):
                h.core(*events)
            case ("end", stop):
                h.end_turn(stop)
            case ("eof",):
                h.eof()
            case ("fail", message):
                h.run(h.machine.core_failed(message))
            case ("control", subtype, extra):
                h.send({"type": "control_request", "request_id": f"r-{subtype}",
                        "request": {"subtype": subtype, **extra}})
            case ("bytes", data):
                h.run(h.machine.receive_data(data))
            case ("tick",):
                h.run(h.machine.tick(0.0))
            case ("mark",):
                h.out.append({"type": "--"})
            case _:
                raise AssertionError(step)


def written(h: Harness) -> list[str]:
    return [f"{fr['type']}/{fr['subtype']}" if fr["type"] == "system" else fr["type"]
            for fr in h.out]


def delivered(h: Harness) -> list[str]:
    return [e.__struct_config__.tag for e in h.delivered]


WRITE = (ToolCallStart(call_id="c1", name="Write", input={"path": "a", "content": "x"}),
         PermissionRequest(req_id="p1", tool="Write", intent={"path": "a", "content": "x"},
                           scope="write"))
CORE_TURN = ("core", TextChunk(message_id="m", text="hi"), Usage())

ROWS: list[tuple[str, dict[str, Any], list[Step], list[str], list[str], int | None]] = [
    ("waiting + user: config once, init, the prompt", {},
     [("user", "a")], [INIT], ["cap.session.config", "cap.user_input.inject"], None),
    ("running + user: queued, nothing written", {},
     [("user", "a"), ("mark",), ("user", "b")], [INIT, "--"],
     ["cap.session.config", "cap.user_input.inject"], None),
    ("turn ends: the message, the diff, the result, then the queued turn's init", {},
     [("user", "a"), ("user", "b"), CORE_TURN, ("end", "end_turn")],
     [INIT, "assistant", DIFF, RESULT, INIT],
     ["cap.session.config", "cap.user_input.inject", "cap.user_input.inject"], None),
    ("control request while waiting: only its response", {},
     [("control", "mcp_status", {}), ("control", "interrupt", {}),
      ("control", "set_permission_mode", {"mode": "plan"})], [OK, OK, OK], [], None),
    ("waiting + something to show: held until the next init", {},
     [("user", "a"), CORE_TURN, ("end", "end_turn"), ("mark",), ("bytes", b'{"type":"user"}\n'),
      ("control", "set_permission_mode", {"mode": "plan"}), ("tick",), ("mark",), ("user", "b")],
     [INIT, "assistant", DIFF, RESULT, "--", OK, "--", INIT, ERR, "system/status"],
     ["cap.session.config", "cap.user_input.inject", "cap.user_input.inject"], None),
    ("waiting + EOF: nothing written, exit 0", {},
     [("user", "a"), CORE_TURN, ("end", "end_turn"), ("mark",), ("eof",)],
     [INIT, "assistant", DIFF, RESULT, "--"],
     ["cap.session.config", "cap.user_input.inject"], 0),
    ("running + EOF: the open prompt denied; the last turn's diff is final", {
        "permission_prompt_tool": "stdio"},
     [("user", "a"), ("core", *WRITE), ("eof",), ("core", Usage()), ("end", "end_turn")],
     [INIT, "assistant", ASK, DIFF, RESULT],
     ["cap.session.config", "cap.user_input.inject", "cap.permission.response"], 0),
    ("draining: queued turns run, the last result is the last line", {},
     [("user", "a"), ("user", "b"), ("eof",), CORE_TURN, ("end", "end_turn"), CORE_TURN,
      ("end", "end_turn")], [INIT, "assistant", DIFF, RESULT, INIT, "assistant", DIFF, RESULT],
     ["cap.session.config", "cap.user_input.inject", "cap.user_input.inject"], 0),
    ("core fails mid-turn: its error, the final diff, the error result; exit 1", {},
     [("user", "a"), ("user", "b"), ("core", TextChunk(message_id="m", text="hi")),
      ("fail", "it died")], [INIT, ERR, "assistant", DIFF, RESULT],
     ["cap.session.config", "cap.user_input.inject"], 1),
    ("core fails while waiting: nothing written; exit 1", {},
     [("user", "a"), CORE_TURN, ("end", "end_turn"), ("mark",), ("fail", "it died")],
     [INIT, "assistant", DIFF, RESULT, "--"], ["cap.session.config", "cap.user_input.inject"],
     1),
    ("ended: nothing more is read or written", {},
     [("eof",), ("mark",), ("user", "a"), ("control", "mcp_status", {}), ("tick",),
      ("fail", "late")], ["--"], [], 0),
    ("budget: a turn that would start over it is refused with its error and result", {
        "budget_usd": 0.1},
     [("user", "a"), ("core", Usage(cost_usd_estimate=0.2)), ("end", "end_turn"), ("user", "b")],
     [INIT, DIFF, RESULT, INIT, ERR, DIFF, RESULT],
     ["cap.session.config", "cap.user_input.inject"], None),
    ("interrupt: answered at once, prompt withdrawn, notice, diff, result", {
        "permission_prompt_tool": "stdio"},
     [("user", "a"), ("core", *WRITE), ("control", "interrupt", {}), ("core", Usage()),
      ("end", "cancelled")], [INIT, "assistant", ASK, OK, CANCEL, "user", DIFF, RESULT],
     ["cap.session.config", "cap.user_input.inject", "cap.cancel"], None),
    ("a bad line mid-turn: its error goes out at once", {},
     [("user", "a"), ("bytes", b'{"type":"user","message":1}\n'), ("bytes", b"junk\n")],
     [INIT, ERR], ["cap.session.config", "cap.user_input.inject"], None),
    ("a turn end nobody started: noted, nothing written", {},
     [("end", "end_turn")], [], [], None),
]


@pytest.mark.parametrize(("options", "steps", "lines", "frames", "exit_code"),
                         [row[1:] for row in ROWS], ids=[row[0] for row in ROWS])
def test_transition_table(options: dict[str, Any], steps: list[Step], lines: list[str],
                          frames: list[str], exit_code: int | None) -> None:
    h = Harness(**options)
    play(h, steps)
    assert written(h) == lines
    assert delivered(h) == frames
    assert h.exit_code == exit_code
    for frame in h.out:  # every written line is one JSON object (checked as it was sent)
        assert json.dumps(frame)


def test_the_budget_row_refuses_with_cap_budget_exceeded():
    h = Harness(budget_usd=0.1)
    play(h, ROWS[11][2])
    assert h.log[-1].event.__struct_config__.tag == "cap.error"
    assert isinstance(h.log[-1].event, CapError) and h.log[-1].event.code == "cap_budget_exceeded"
    assert h.frames("result")[-1]["subtype"] == "error_max_budget_usd"
