"""A synchronous stand-in for the Trio shell, to drive the sans-io agent side in unit tests.

It carries out the machine's effects exactly as the shell does — records go
into a list standing in for the event log (seqs 1, 2, 3 …), delivered frames
are kept for inspection, sent bytes are decoded back into frames — so a test
plays the client and the core by hand.
"""

from __future__ import annotations

import json
from typing import Any

from trio_cap.actors.bindings.stream_json.agent_argv import AgentOptions
from trio_cap.actors.bindings.stream_json.agent_ids import FrameIds
from trio_cap.actors.bindings.stream_json.agent_side import (
    AgentSide,
    Deliver,
    Finish,
    Note,
    ReadTranscript,
    Record,
    Send,
    SetModel,
)
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import Event, PermissionRequest, ToolCallStart

SID = "11111111-2222-3333-4444-555555555555"


class Harness:
    def __init__(self, **options: Any) -> None:
        options.setdefault("cwd", "/work")
        options.setdefault("workspace_diff", False)
        self.machine = AgentSide(AgentOptions(**options), session_id=SID,
                                 default_model="cap-scripted", new_id=FrameIds(SID), pid=4242,
                                 agent_version="0.1.0")
        self.log: list[Envelope] = []
        self.delivered: list[Event] = []
        self.raw = bytearray()
        self.out: list[dict[str, Any]] = []
        self.exit_code: int | None = None
        self.notes: list[str] = []
        self.models: list[str | None] = []

    # ---- effects ----------------------------------------------------------------
    def run(self, effects: list) -> None:
        for effect in effects:
            match effect:
                case Send():
                    self.raw += effect.data
                    assert effect.data.endswith(b"\n") and effect.data.count(b"\n") == 1
                    self.out.append(json.loads(effect.data))
                case Record():
                    self.run(self.machine.logged(self._append(effect.events, None),
                                                 effect.after))
                case Deliver():
                    self.delivered.extend(effect.frames)
                case ReadTranscript():
                    envs = [e for e in self.log if e.stream == SID]
                    self.run(self.machine.transcript_ready(envs, effect.artifact_id))
                case Finish():
                    self.exit_code = effect.exit_code
                case Note():
                    self.notes.append(effect.text)
                case SetModel():
                    self.models.append(effect.model)

    def _append(self, events: tuple[Event, ...] | list[Event], cause: int | None) -> list[Envelope]:
        envs = [Envelope(len(self.log) + i + 1, 1_700_000_000.0 + len(self.log) + i, SID, cause,
                         event) for i, event in enumerate(events)]
        self.log.extend(envs)
        return envs

    # ---- playing the client and the core ----------------------------------------
    def send(self, *frames: dict[str, Any]) -> None:
        data = b"".join(json.dumps(frame).encode() + b"\n" for frame in frames)
        self.run(self.machine.receive_data(data))

    def prompt(self, text: str, **extra: Any) -> None:
        self.send({"type": "user", "session_id": "", "parent_tool_use_id": None,
                   "message": {"role": "user", "content": text}, **extra})

    def core(self, *events: Event) -> None:
        self.run(self.machine.logged(self._append(events, self.machine.cause)))

    def end_turn(self, stop: str = "end_turn") -> None:
        self.run(self.machine.turn_ended(stop))  # type: ignore[arg-type]

    def eof(self) -> None:
        self.run(self.machine.receive_eof())

    # ---- looking at the output ------------------------------------------------------
    def frames(self, type_: str | None = None, subtype: str | None = None) -> list[dict[str, Any]]:
        return [f for f in self.out if (type_ is None or f["type"] == type_)
                and (subtype is None or f.get("subtype") == subtype)]

    def take(self) -> list[dict[str, Any]]:
        out, self.out = self.out, []
        return out

    def kinds(self) -> list[str]:
        return [e.event.__struct_config__.tag for e in self.log]


# ---- helpers the machine tests share ----------------------------------------------

def control(request_id: str, **request) -> dict:
    return {"type": "control_request", "request_id": request_id, "request": request}


def answer(request_id: str, response: dict | None = None, *, error: str | None = None) -> dict:
    body = {"subtype": "error", "request_id": request_id, "error": error} if error else {
        "subtype": "success", "request_id": request_id, "response": response}
    return {"type": "control_response", "response": body}


def write_call(h: Harness, path: str = "a.txt", call_id: str = "call_1") -> None:
    h.core(ToolCallStart(call_id=call_id, name="Write", input={"path": path, "content": "x\n"}),
           PermissionRequest(req_id="perm_1", tool="Write",
                             intent={"path": path, "content": "x\n"}, scope="write"))


def every_frame_parses_with_the_python_sdk(h: Harness) -> None:
    from claude_agent_sdk._internal.message_parser import parse_message

    for frame in h.out:
        if frame["type"] not in ("control_request", "control_response",
                                 "control_cancel_request"):
            parse_message(frame)  # raises MessageParseError on a missing required field
