"""Human-readable lines for events, shared by ``cap run`` and ``cap log show``."""

from __future__ import annotations

import time
from typing import Any

import msgspec

from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    AgentRaw,
    Artifact,
    AskAnswered,
    AskUser,
    BindingFallback,
    Cancel,
    CancelRequested,
    CapError,
    CapSessionReady,
    FrameIn,
    FrameOut,
    InputInjected,
    LogRecovered,
    PermissionDecided,
    PermissionPathsResolved,
    PermissionRequest,
    PermissionResponse,
    Plan,
    RunResumed,
    RunStarted,
    SessionCancelled,
    SessionCompleted,
    SessionConfig,
    SessionCreated,
    SessionFailed,
    SessionIdle,
    SessionInputRequired,
    SessionReady,
    SessionStarting,
    SessionTurnEnded,
    SessionWarning,
    SessionWorking,
    TextChunk,
    Thought,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UserInputInject,
)


def _short(value: object, limit: int = 100) -> str:
    text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
    text = text.replace("\n", "⏎")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe(ev: object) -> str:
    """One line saying what an event means."""
    match ev:
        case SessionCreated():
            return (f"session {ev.session_id}: agent {ev.agent} via {ev.binding}, cwd {ev.cwd}, "
                    f"permissions {ev.permissions}")
        case SessionStarting():
            return "starting the agent"
        case SessionReady():
            return "ready"
        case SessionWorking():
            return f"turn {ev.turn} resumed" if ev.resumed else f"turn {ev.turn} started"
        case SessionInputRequired():
            rated = f" (trio-cap rates it {ev.risk} risk)" if ev.risk else ""
            return f"waiting on {ev.reason} {ev.ref}{rated}" + _passed_on(ev.meta)
        case SessionTurnEnded():
            return f"turn {ev.turn} ended ({ev.stop_reason})"
        case SessionIdle():
            return "idle: waiting for input"
        case AgentRaw():
            cut = f", {ev.truncated} bytes more" if ev.truncated else ""
            return f"raw {ev.source or 'output'} ({ev.reason}{cut}): {_short(ev.text, 80)}"
        case SessionCompleted():
            return f"completed after {ev.turns} turn(s)"
        case SessionCancelled():
            return f"cancelled: {ev.reason}"
        case SessionFailed():
            # a multi-line message (one line per binding tried) keeps its lines, indented
            return f"FAILED {ev.code}: " + "\n    ".join(ev.message.splitlines() or [""])
        case SessionWarning():
            return f"WARNING {ev.code}: {ev.message}"
        case BindingFallback():
            return f"binding {ev.failed} failed ({ev.reason}); falling back to {ev.next}"
        case LogRecovered():
            return f"log recovered: dropped a torn tail of {ev.dropped_bytes} bytes"
        case InputInjected():
            return f"input from {ev.source}: {_short(ev.text)}"
        case CancelRequested():
            return f"cancel {ev.scope} requested ({ev.reason})"
        case PermissionPathsResolved():
            outside = ", ".join(ev.outside)
            return (f"paths of {ev.req_id}: {ev.checked} checked"
                    + (f"; outside through a symlink: {outside}" if outside else ", all inside"))
        case PermissionDecided():
            return f"permission {ev.req_id}: {ev.decision} by {ev.by}" + (
                f" — {ev.reason}" if ev.reason else "")
        case AskAnswered():
            if ev.value is None:
                who = "nobody can be asked: headless" if ev.by == "policy:headless" else ev.by
                return f"ask {ev.ask_id}: no answer ({who})" + _passed_on(ev.meta)
            return (f"ask {ev.ask_id} answered by {ev.by}: {_short(_json(ev.value))}"
                    + _sources(ev.meta))
        case CapSessionReady():
            return f"agent ready (agent session {ev.session_id})"
        case TextChunk():
            return f"[{ev.channel} {ev.message_id}] {_short(ev.text)}"
        case Thought():
            return f"[thought] {_short(ev.text)}"
        case ToolCallStart():
            return f"tool {ev.name} [{ev.call_id}] {_short(ev.input)}"
        case ToolCallDelta():
            return f"tool [{ev.call_id}] … {_short(ev.output_chunk)}"
        case ToolCallEnd():
            mark = "failed" if ev.is_error else "done"
            return f"tool [{ev.call_id}] {mark}: {_short(ev.output)}"
        case Plan():
            steps = "; ".join(f"{e.content} ({e.status})" for e in ev.entries)
            return f"plan: {steps}"
        case AskUser():
            return f"ask {ev.ask_id}: {ev.prompt}" + (f" {_options(ev.form)}" if ev.form else "")
        case PermissionRequest():
            return (f"permission {ev.req_id}? {ev.tool} ({ev.scope}, {ev.risk_level} risk) "
                    f"{_short(ev.intent)}")
        case Usage():
            return (f"usage: {ev.input_tokens} in / {ev.output_tokens} out tokens, "
                    f"${ev.cost_usd_estimate:.4f}, {ev.duration_ms} ms, {ev.stop_reason}")
        case CapError():
            return f"error {ev.code}: {ev.message}"
        case Artifact():
            return f"artifact {ev.name} ({ev.mime_type}, {ev.size} bytes)"
        case SessionConfig():
            return f"→ config: cwd {ev.cwd}, permission_mode {ev.permission_mode}" + (
                f" ({_MODES[ev.permission_mode]})" if ev.permission_mode in _MODES else "")
        case UserInputInject():
            return f"→ input: {_short(ev.text)}"
        case Cancel():
            return f"→ cancel {ev.scope}"
        case PermissionResponse():
            return f"→ permission {ev.req_id}: {ev.decision}"
        case FrameIn():
            return f"⇐ {ev.binding} " + _frame(ev)
        case FrameOut():
            return f"⇒ {ev.binding} " + _frame(ev)
        case RunStarted():
            return f"run: {len(ev.tasks)} prompt(s) for {ev.agent}, record {ev.record}"
        case RunResumed():
            rerun = f", re-running turn(s) {list(ev.rerun_turns)}" if ev.rerun_turns else ""
            return (f"run {ev.how} after seq {ev.after_seq}: {ev.turns_done} turn(s) were done"
                    f"{rerun}" + (f" ({ev.reason})" if ev.reason else ""))
    from trio_cap.actors.cli.fleet_render import describe_fleet

    fleet = describe_fleet(ev)
    if fleet is not None:
        return fleet
    return _short(msgspec.to_builtins(ev), 160)


def _frame(ev: FrameIn | FrameOut) -> str:
    if isinstance(ev, FrameIn) and ev.signal:
        return f"[{ev.signal}] {_short(ev.text or '')}"
    if isinstance(ev, FrameIn) and ev.eof:
        return "[end of output]"
    if ev.text is not None:
        return _short(ev.text, 140)
    if ev.data_b64 is not None:
        return f"[{len(ev.data_b64) * 3 // 4} bytes]"
    return _short(ev.frame, 140)


def _json(value: object) -> str:
    """An answer as JSON (a string shows its quotes), never Python's repr."""
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, ValueError):
        return str(value)


_MODES = {
    "interactive": "a human answers permission requests",
    "confirm": "trio-cap's policy answers permission requests",
    "none": "the agent asks nothing: its own no-prompt mode",
}


def _options(form: dict) -> str:
    choices = form.get("oneOf") or []
    values = [str(c.get("const")) for c in choices if isinstance(c, dict)]
    return f"[{'|'.join(values)}]" if values else ""


def line(env: Envelope) -> str:
    """``seq  time  stream  kind  meaning`` for ``cap log show``."""
    stamp = time.strftime("%H:%M:%S", time.localtime(env.at)) + f".{int(env.at * 1000) % 1000:03d}"
    return f"{env.seq:>6}  {stamp}  {env.stream or '-':<17} {env.kind:<24} {describe(env.event)}"


def _passed_on(meta: dict[str, Any] | None) -> str:
    """Why the auto-answerer passed an ask on (``_meta`` ``cap.auto_answer``)."""
    why = (meta or {}).get("cap.auto_answer")
    return f"; the auto-answerer passed it on: {why.get('reason')}" if isinstance(why, dict) \
        else ""


def _sources(meta: dict[str, Any] | None) -> str:
    """Where an auto-answer came from (``_meta`` ``cap.provenance``)."""
    used = (meta or {}).get("cap.provenance")
    if not isinstance(used, list):
        return ""
    return " (from " + ", ".join(f"{p.get('file')} #{p.get('passage')} score {p.get('score')}"
                                 for p in used if isinstance(p, dict)) + ")"
