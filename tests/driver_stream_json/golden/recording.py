"""Recorded traffic of the stream-json driver: every call a real connector made, and what came back.

A recording is JSON lines: a header (the driver's constructor arguments and
the prompt uuids it was given, in order), then one line per call —
``initialize``, ``send`` (a CAP frame), ``receive_data`` (stdout bytes exactly
as one read returned them), ``receive_eof`` — with its outputs.  Replaying the
calls against a fresh driver must give the same outputs: the golden test.
:class:`RecordingDriver` is swapped into the connector by ``record.py`` so the
calls are what a real session with a real agent caused.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from trio_cap.actors.bindings.base import ToAgent, TurnEnded
from trio_cap.actors.bindings.stream_json.driver import StreamJsonDriver
from trio_cap.events.kinds import AnyEvent

HERE = Path(__file__).resolve().parent


def output_json(item: Any) -> Any:
    if isinstance(item, TurnEnded):
        return {"turn_ended": item.stop_reason}
    if isinstance(item, ToAgent):
        return {"to_agent": item.data.decode()}
    if isinstance(item, bytes):
        return {"bytes": item.decode()}
    return json.loads(msgspec.json.encode(item))


class RecordingDriver(StreamJsonDriver):
    """A driver that writes down each call and its outputs (see the module doc)."""

    made: list[RecordingDriver] = []

    def __init__(self, **kwargs: Any) -> None:
        given = kwargs.pop("new_uuid")
        self.uuids: list[str] = []

        def new_uuid() -> str:
            self.uuids.append(given())
            return self.uuids[-1]

        self.ctor = {k: v for k, v in kwargs.items() if k in ("session_id", "cwd")}
        self.calls: list[dict[str, Any]] = []
        super().__init__(new_uuid=new_uuid, **kwargs)
        RecordingDriver.made.append(self)

    def initialize(self) -> bytes:
        out = super().initialize()
        self.calls.append({"call": "initialize", "out": [output_json(out)]})
        return out

    def send(self, frame: Any) -> bytes:
        out = super().send(frame)
        self.calls.append({"call": "send", "frame": output_json(frame),
                           "out": [output_json(out)]})
        return out

    def receive_data(self, data: bytes) -> list[Any]:
        out = super().receive_data(data)
        self.calls.append({"call": "receive_data", "data": base64.b64encode(data).decode(),
                           "out": [output_json(o) for o in out]})
        return out

    def receive_eof(self) -> list[Any]:
        out = super().receive_eof()
        self.calls.append({"call": "receive_eof", "out": [output_json(o) for o in out]})
        return out

    def save(self, path: Path) -> None:
        with path.open("w") as fh:
            fh.write(json.dumps({"header": {**self.ctor, "uuids": self.uuids}}) + "\n")
            for call in self.calls:
                fh.write(json.dumps(call) + "\n")


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return lines[0]["header"], lines[1:]


def fresh_driver(header: dict[str, Any]) -> StreamJsonDriver:
    uuids: Iterator[str] = iter(header["uuids"])
    return StreamJsonDriver(new_uuid=lambda: next(uuids), session_id=header.get("session_id"),
                            cwd=header.get("cwd"))


def replay(header: dict[str, Any], calls: list[dict[str, Any]]) -> list[list[Any]]:
    """Each call's outputs, from a fresh driver fed the recorded calls."""
    driver = fresh_driver(header)
    outs: list[list[Any]] = []
    for call in calls:
        name = call["call"]
        if name == "initialize":
            outs.append([output_json(driver.initialize())])
        elif name == "send":
            frame = msgspec.convert(call["frame"], AnyEvent)
            outs.append([output_json(driver.send(frame))])
        elif name == "receive_data":
            data = base64.b64decode(call["data"])
            outs.append([output_json(o) for o in driver.receive_data(data)])
        else:
            outs.append([output_json(o) for o in driver.receive_eof()])
    return outs
