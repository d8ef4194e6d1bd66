"""Carries out the ACP agent-side machine's effects the way its shell does, without Trio:
a list for the log, lists for what each core was given, decoded lines for stdout."""

from __future__ import annotations

import itertools
import json
from typing import Any

from trio_cap.actors.bindings.acp.agent_effects import (
    Deliver,
    Effect,
    Finish,
    Note,
    ReadHistory,
    Record,
    Resolve,
    Send,
    StartCore,
    StopCore,
)
from trio_cap.actors.bindings.acp.agent_side import AcpAgentSide, AgentSettings
from trio_cap.actors.bindings.base import TurnEnded
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import Event, StopReason

EFFECTS = (Send, Record, Deliver, StartCore, StopCore, ReadHistory, Resolve, Finish, Note)


class Harness:
    def __init__(self, **settings: Any) -> None:
        ids = itertools.count(1)
        self.machine = AcpAgentSide(AgentSettings(**settings),
                                    new_session_id=lambda: f"s{next(ids)}")
        self.log: list[Envelope] = []
        self.lines: list[dict[str, Any]] = []
        self.delivered: dict[str, list[Event]] = {}
        self.started: list[StartCore] = []
        self.stopped: list[str] = []
        self.resolved: dict[int, Any] = {}
        self.notes: list[str] = []
        self.finished: int | None = None
        self._ids = itertools.count(100)

    # ---- effects --------------------------------------------------------------------
    def run(self, effects: list[Effect]) -> list[dict[str, Any]]:
        """Carry ``effects`` out; the lines they wrote, decoded."""
        assert isinstance(effects, list)
        written: list[dict[str, Any]] = []
        for effect in effects:
            assert isinstance(effect, EFFECTS), effect
            match effect:
                case Send():
                    assert effect.data.endswith(b"\n")
                    for line in effect.data.splitlines():
                        written.append(json.loads(line))
                case Record():
                    self.append(effect.stream or "conn", effect.events)
                case Deliver():
                    self.delivered.setdefault(effect.session_id, []).extend(effect.frames)
                case StartCore():
                    self.started.append(effect)
                    self.delivered.setdefault(effect.session_id, []).append(effect.config)
                case StopCore():
                    self.stopped.append(effect.session_id)
                case ReadHistory():
                    envs = [e for e in self.log if e.stream == effect.session_id]
                    written += self.run(self.machine.history(effect.request_id, envs))
                case Resolve():
                    self.resolved[effect.ticket] = effect.value
                case Finish():
                    self.finished = effect.exit_code
                case Note():
                    self.notes.append(effect.text)
        self.lines += written
        return written

    def append(self, stream: str, events: Any) -> None:
        for event in events:
            assert isinstance(event, Event)
            self.log.append(Envelope(len(self.log) + 1, 0.0, stream, None, event))

    # ---- inputs -------------------------------------------------------------------------
    def feed(self, *messages: dict[str, Any] | bytes) -> list[dict[str, Any]]:
        data = b"".join(m if isinstance(m, bytes) else json.dumps(m).encode() + b"\n"
                        for m in messages)
        return self.run(self.machine.receive_data(data))

    def request(self, method: str, params: dict[str, Any] | None = None,
                rid: Any = None) -> tuple[Any, list[dict[str, Any]]]:
        rid = next(self._ids) if rid is None else rid
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        return rid, self.feed(message)

    def notify(self, method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        return self.feed({"jsonrpc": "2.0", "method": method, "params": params})

    def answer(self, rid: Any, result: Any = None, error: dict[str, Any] | None = None,
               ) -> list[dict[str, Any]]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
        message.update({"error": error} if error is not None else {"result": result})
        return self.feed(message)

    def core(self, sid: str, *items: Event | TurnEnded) -> list[dict[str, Any]]:
        """A core's batch, as the shell handles it: events logged, then shown; turn ends."""
        written: list[dict[str, Any]] = []
        events: list[Event] = []
        for item in [*items, None]:
            if isinstance(item, Event):
                events.append(item)
                continue
            if events:
                self.append(sid, events)
                written += self.run(self.machine.core_events(sid, events))
                events = []
            if isinstance(item, TurnEnded):
                written += self.run(self.machine.turn_ended(sid, item.stop_reason))
        return written

    def end(self, sid: str, stop: StopReason = "end_turn") -> list[dict[str, Any]]:
        return self.core(sid, TurnEnded(stop))

    # ---- set-ups ---------------------------------------------------------------------------
    def session(self, cwd: str = "/w", client: dict[str, Any] | None = None) -> str:
        self.request("initialize", {"protocolVersion": 1, "clientCapabilities": client or {}})
        _, lines = self.request("session/new", {"cwd": cwd, "mcpServers": []})
        return lines[-1]["result"]["sessionId"]

    def prompt(self, sid: str, text: str = "hi") -> Any:
        rid, lines = self.request("session/prompt", {"sessionId": sid, "prompt": [
            {"type": "text", "text": text}]})
        assert lines == [], lines
        return rid


def updates(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["params"]["update"] for m in lines if m.get("method") == "session/update"]


def requests(lines: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    return [m for m in lines if m.get("method") == method and "id" in m]
