"""Recorded traffic of the agent-side machine: every call the shell made, and what it returned.

A recording is JSON lines: a header (the machine's constructor arguments),
then one line per machine call in the order the shell made it — ``data``
(stdin bytes exactly as read), ``eof``, ``logged`` (the envelopes the log gave
back, with ``after``), ``turn_ended``, ``tick``, ``transcript_ready``,
``core_failed``, ``user_text`` — with the effects it returned.  Replaying the
calls against a fresh machine must give the same effects, byte for byte: the
golden test.  ``record_into`` installs the recorder in a real ``cap-agent``
process (see ``record.py``), so the calls are what a real SDK session caused.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from trio_cap.actors.bindings.stream_json import agent_shell
from trio_cap.actors.bindings.stream_json.agent_argv import AgentOptions
from trio_cap.actors.bindings.stream_json.agent_effects import (
    Deliver,
    Effect,
    Finish,
    Note,
    ReadTranscript,
    Record,
    Send,
    SetModel,
)
from trio_cap.actors.bindings.stream_json.agent_ids import FrameIds
from trio_cap.actors.bindings.stream_json.agent_side import AgentSide
from trio_cap.events.envelope import Envelope

CALLS = ("receive_data", "receive_eof", "logged", "turn_ended", "tick", "transcript_ready",
         "core_failed", "user_text")


def effect_json(effect: Effect) -> dict[str, Any]:
    """One effect as plain JSON (events through msgspec, bytes as text)."""
    match effect:
        case Send():
            return {"send": effect.data.decode()}
        case Record():
            return {"record": _json(list(effect.events)), "after": effect.after}
        case Deliver():
            return {"deliver": _json(list(effect.frames))}
        case Finish():
            return {"finish": effect.exit_code}
        case Note():
            return {"note": effect.text}
        case SetModel():
            return {"set_model": effect.model}
        case ReadTranscript():
            return {"read_transcript": effect.artifact_id}
    raise TypeError(effect)


def args_json(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    if name == "receive_data":
        return {"data": base64.b64encode(args[0]).decode()}
    if name == "logged":
        after = args[1] if len(args) > 1 else kwargs.get("after")
        return {"envs": msgspec.to_builtins(list(args[0])), "after": after}
    if name == "transcript_ready":
        return {"envs": msgspec.to_builtins(list(args[0])), "artifact_id": args[1]}
    if name == "tick":
        return {"now": args[0] if args else kwargs.get("now")}
    if name in ("turn_ended", "core_failed", "user_text"):
        return {"value": args[0]}
    return {}


def call_machine(machine: AgentSide, name: str, args: dict[str, Any]) -> list[Effect]:
    """Replay one recorded call."""
    if name == "receive_data":
        return machine.receive_data(base64.b64decode(args["data"]))
    if name == "logged":
        return machine.logged(msgspec.convert(args["envs"], list[Envelope]), args["after"])
    if name == "transcript_ready":
        envs = msgspec.convert(args["envs"], list[Envelope])
        return machine.transcript_ready(envs, args["artifact_id"])
    if name == "tick":
        return machine.tick(args["now"])
    if name in ("turn_ended", "core_failed", "user_text"):
        return getattr(machine, name)(args["value"])
    return getattr(machine, name)()


def machine_from_header(header: dict[str, Any]) -> AgentSide:
    fields = dict(header["options"])
    for name in ("allowed_tools", "disallowed_tools", "tools"):
        if isinstance(fields.get(name), list):
            fields[name] = tuple(fields[name])
    options = AgentOptions(**fields)
    return AgentSide(options, session_id=header["session_id"],
                     default_model=header["default_model"], new_id=FrameIds(header["session_id"]),
                     pid=header["pid"], agent_version=header["agent_version"])


_OPTION_FIELDS = ("cwd", "model", "system_prompt", "append_system_prompt", "max_turns",
                  "budget_usd", "permission_mode", "permission_prompt_tool",
                  "partial_messages", "allowed_tools", "disallowed_tools", "tools",
                  "session_id", "resume", "input_format", "diff_every", "max_line")


def record_into(path: Path) -> None:
    """Make every AgentSide the shell builds from now on write its calls to ``path``."""

    class RecordingSide(AgentSide):
        def __init__(self, options: AgentOptions, **kw: Any) -> None:
            super().__init__(options, **kw)
            header = {"session_id": kw["session_id"], "default_model": kw["default_model"],
                      "pid": kw.get("pid"), "agent_version": kw.get("agent_version", ""),
                      "options": {k: _plain(getattr(options, k)) for k in _OPTION_FIELDS}}
            self._file = path.open("w", encoding="utf-8")
            self._record_line({"header": header})
            for name in CALLS:
                setattr(self, name, self._recorded(name, getattr(self, name)))

        def _record_line(self, obj: dict[str, Any]) -> None:
            self._file.write(json.dumps(obj, ensure_ascii=False) + "\n")
            self._file.flush()

        def _recorded(self, name: str, method: Callable[..., list[Effect]]
                      ) -> Callable[..., list[Effect]]:
            def call(*args: Any, **kwargs: Any) -> list[Effect]:
                out = method(*args, **kwargs)
                self._record_line({"call": name, "args": args_json(name, args, kwargs),
                             "out": [effect_json(e) for e in out]})
                return out
            return call

    agent_shell.AgentSide = RecordingSide  # type: ignore[misc]


def _json(value: Any) -> Any:
    return json.loads(msgspec.json.encode(value))


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
