"""The ACP client machine as ``cap replay --check`` runs it: recorded frames in, no agent.

ACP's shell (:mod:`..bindings.acp.connector`) differs from stream-json's in
where its writes are logged: every machine step — a read, a send, a cancel,
the answer to a served file or terminal request — runs under one lock and
goes through the Deliverer into the session's inbox, so the log holds each
step as its own batch, in the order the machine took them.  A replay keeps
that order by *deferring*: ``send`` and ``cancel`` queue their action and
log nothing at once; the action runs when the check reaches the batch it
produced (:meth:`AcpReplay.shell_step`, a ``frame.out`` that no read
explains).  A step that wrote nothing left no batch: it runs when the next
shell step needs the machine past it (a vetted write allowed by a permission
answer is only seen when the write's answer comes).

What only the shell knew is taken from the log, as the check takes the
permission path facts: the result of each served request (the recorded
JSON-RPC answer), a refusal's ``cap_scope_violation`` event, a terminal's
output on its call's end, and each turn's diff artifact.  The client's
settings (manifest tuning, auth method, client version) are on the
connection's first ``frame.out`` (``frame = {"acp_options": …}``); a log
recorded before that was written is checked from its events.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import msgspec

from trio_cap.actors.bindings.acp.machine import AcpClient, ClientOptions, Serve, Withdraw
from trio_cap.actors.bindings.base import ToAgent, TurnEnded
from trio_cap.actors.recording import Recorder, frame_bytes
from trio_cap.actors.replay.bindings import signal_outputs
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    Artifact,
    Cancel,
    CapError,
    Event,
    FrameIn,
    FrameOut,
    SessionConfig,
    ToolCallEnd,
)

OPTIONS_KEY = "acp_options"
"""Key of the frame.out (``frame``) on which the ACP shell records its client options."""

_Action = tuple[str, Any]


def recorded_options(recorded: Sequence[Envelope]) -> ClientOptions | None:
    """The client options the connection recorded first (None: a log from before that)."""
    for env in recorded:
        ev = env.event
        if type(ev) is FrameOut and isinstance(ev.frame, dict) and OPTIONS_KEY in ev.frame:
            given = dict(ev.frame[OPTIONS_KEY])
            given["mcp_servers"] = tuple(given.get("mcp_servers") or ())
            try:
                return ClientOptions(**given)
            except TypeError:
                return None  # options of another build: checked from events
    return None


def _response(ev: FrameOut) -> tuple[Any, dict[str, Any]] | None:
    """The (id, message) of a recorded JSON-RPC response line, or None for anything else."""
    data = frame_bytes(ev)
    if data is None:
        return None
    try:
        message = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return None
    if not isinstance(message, dict) or "method" in message or "id" not in message:
        return None
    return message["id"], message


class AcpReplay:
    """The ACP client, driven in the order the shell drove it (see the module docstring)."""

    decodes = True
    shell_steps = True
    """Some steps are the shell's own (sends, served answers): :meth:`shell_step`."""

    @staticmethod
    def replayable(recorded: Sequence[Envelope]) -> bool:
        return recorded_options(recorded) is not None

    def __init__(self, config: SessionConfig, ids: deque[str],
                 recorded: Sequence[Envelope]) -> None:
        self.recorder = Recorder("acp", now=lambda: 0.0)
        options = recorded_options(recorded) or ClientOptions(cwd=config.cwd)
        self.options = options
        self.machine = AcpClient(options)
        self.deferred: deque[_Action] = deque([("initialize", None)])
        self.serving: dict[tuple[type, Any], Serve] = {}
        self.turns = 0
        # the shell's facts, in recorded order (a resumed session's connection starts afresh)
        self.diffs: dict[str, Artifact] = {}
        self.outputs: dict[str, str] = {}
        for env in recorded:
            ev = env.event
            if type(ev) is Artifact and ev.artifact_id.startswith("acp_diff_"):
                self.diffs.setdefault(ev.artifact_id, ev)
            elif type(ev) is ToolCallEnd and ev.output:
                self.outputs.setdefault(ev.call_id, ev.output)

    # ---- the check's calls --------------------------------------------------------------
    def open(self) -> list[FrameOut]:
        given = msgspec.json.decode(msgspec.json.encode(self.options))  # as the log holds it
        return [self.recorder.out_event(frame={OPTIONS_KEY: given})]

    def feed(self, frame: FrameIn) -> list[Any]:
        signal = signal_outputs(frame)
        if signal is not None:
            return signal
        if frame.eof:
            return self._shell(self.machine.receive_eof())
        data = frame_bytes(frame)
        return self._shell(self.machine.receive_data(data)) if data is not None else []

    def send(self, frames: Sequence[Event]) -> list[FrameOut]:
        self.deferred.extend(("send", f) for f in frames)
        return []  # written in the step the log shows, not here

    def cancel(self, scope: str) -> list[FrameOut]:
        self.deferred.append(("cancel", scope))
        return []

    def shell_step(self, recorded: Sequence[Envelope], i: int) -> list[Any] | None:
        """The shell's own step whose batch starts at ``recorded[i]``, run; None: not one."""
        first = recorded[i].event
        fact: list[Event] = []
        if type(first) is CapError and first.code == "cap_scope_violation" and (
                i + 1 < len(recorded)):
            fact = [first]  # a refused file request's event leads its answer
            first = recorded[i + 1].event
        if type(first) is not FrameOut:
            return None
        answered = _response(first)
        while True:
            if answered is not None:
                served = self.serving.pop((type(answered[0]), answered[0]), None)
                if served is not None:
                    return [*fact, *self._answer(served, answered[1])]
            if not self.deferred:
                return None
            outputs = self._run(self.deferred.popleft())
            if any(type(o) is not Serve and type(o) is not Withdraw for o in outputs):
                return self._shell(outputs)
            self._shell(outputs)  # nothing written: the next action, or the served answer

    # ---- the shell's part ----------------------------------------------------------------
    def _run(self, action: _Action) -> list[Any]:
        what, value = action
        machine = self.machine
        if what == "initialize":
            return [ToAgent(machine.initialize())]
        if what == "cancel":
            return machine.cancel()
        if type(value) is Cancel and value.scope == "session":
            return []
        return machine.send(value)

    def _answer(self, served: Serve, message: dict[str, Any]) -> list[Any]:
        error = message.get("error")
        if isinstance(error, dict):
            if "data" in error:
                outputs = self.machine.refuse(served.rpc_id, error.get("code", 0),
                                              error.get("message", ""), error["data"])
            else:
                outputs = self.machine.refuse(served.rpc_id, error.get("code", 0),
                                              error.get("message", ""))
        else:
            outputs = self.machine.answer(served.rpc_id, message.get("result"))
        return self._shell(outputs)

    def _shell(self, outputs: list[Any]) -> list[Any]:
        """What :meth:`AcpConnection._run` makes of a step: serves noted, terminal output
        on a call's end, the turn's diff before its end."""
        out: list[Any] = []
        for item in outputs:
            kind = type(item)
            if kind is Serve:
                self.serving[(type(item.rpc_id), item.rpc_id)] = item
            elif kind is Withdraw:
                self.serving.pop((type(item.rpc_id), item.rpc_id), None)
            elif kind is ToolCallEnd and not item.output:
                terminals = ((item.meta or {}).get("acp") or {}).get("terminals")
                text = self.outputs.get(item.call_id) if terminals else None
                out.append(msgspec.structs.replace(item, output=text) if text else item)
            elif kind is TurnEnded:
                self.turns += 1
                diff = self.diffs.get(f"acp_diff_{self.turns}")
                if diff is not None:
                    out.append(diff)
                out.append(item)
            else:
                out.append(item)
        return out
