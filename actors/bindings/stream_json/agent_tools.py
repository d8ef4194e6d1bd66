"""Tool calls, permissions, asks and plans in Claude Code's shapes: pure functions the agent
side calls.

Kept apart from :mod:`agent_side` because this is where Claude Code's
``can_use_tool`` semantics live — which frames a permission prompt, a denial,
a tool result, an ``AskUserQuestion`` or a ``TodoWrite`` become, and how a
client's answer maps back onto ``cap.permission.response`` /
``cap.ask_user.answer``.  Nothing here keeps state: the machine owns the turn,
the pending prompts and the rules, and passes in what each function needs.
"""

from __future__ import annotations

from typing import Any

import msgspec

from trio_cap.actors.bindings.base import AGENT_RISK, DECIDED_BY, REFUSAL_MESSAGE, UPDATED_INPUT
from trio_cap.actors.bindings.stream_json import agent_policy as policy
from trio_cap.actors.bindings.stream_json import frames as f
from trio_cap.actors.bindings.stream_json.agent_effects import Call, Prompt
from trio_cap.events.kinds import AskUser, PlanEntry, ToolCallEnd

TODO_RESULT = ("Todos have been modified successfully. Ensure that you continue to use the "
               "todo list to track your progress.")
"""Claude Code's ``TodoWrite`` tool result text."""

_TODO_STATUS = {"in_progress": "in_progress", "completed": "completed", "cancelled": "completed"}


def can_use_tool(request_id: str, call: Call, description: str | None = None,
                 risk: str | None = None, agent_id: str | None = None) -> f.ControlRequest:
    """The ``can_use_tool`` request that asks the client about ``call``; ``risk`` is this
    agent's own rating of it (``_meta["cap.agent_risk"]``): a claim a CAP driver logs and
    passes on, never one it trusts.  ``agent_id`` names the sub-agent that asks (a fleet
    face's member), where Claude Code names its subagents: the SDKs hand it to the
    callback (``ToolPermissionContext.agent_id``)."""
    request = f.CanUseTool(tool_name=call.name, display_name=call.name, input=call.wire,
                           tool_use_id=call.tool_use_id, permission_suggestions=[],
                           blocked_path=policy.blocked_path(call.name, call.wire),
                           description=description, agent_id=agent_id,
                           title=f"{agent_id}: {call.name}" if agent_id else None,
                           meta={AGENT_RISK: risk} if risk else None)
    return f.ControlRequest(request_id=request_id, request=request)


def permission_denied(session_id: str, uuid: str, call: Call, message: str) -> f.System:
    """``system/permission_denied``: Claude Code's notice of a call its rules refused."""
    return f.System(subtype="permission_denied", session_id=session_id, uuid=uuid,
                    tool_name=call.name, tool_use_id=call.tool_use_id, message=message)


def denial(call: Call) -> f.PermissionDenial:
    return f.PermissionDenial(tool_name=call.name, tool_use_id=call.tool_use_id,
                              tool_input=call.wire)


def deny_meta(by: str, message: str) -> dict[str, Any]:
    return {DECIDED_BY: by, REFUSAL_MESSAGE: message}


def read_answer(body: f.ResponseBody) -> f.AnyPermissionResult:
    """The client's answer to ``can_use_tool``; anything but a readable allow is a deny, so a
    broken callback can never widen access."""
    if body.subtype == "error":
        return f.PermissionDeny(message=body.error or "the client's callback failed")
    try:
        return msgspec.convert(body.response, f.AnyPermissionResult)
    except msgspec.ValidationError as exc:
        return f.PermissionDeny(message=f"unreadable permission answer: {exc}")


def allow_meta(call: Call, result: f.PermissionAllow, cwd: str) -> dict[str, Any]:
    """``_meta`` of the allow: who decided, and the rewritten input in the brain's shape when
    the client changed it (only then: an echo of the input is no rewrite)."""
    meta: dict[str, Any] = {DECIDED_BY: "client"}
    if isinstance(result.updated_input, dict):
        updated = policy.from_wire(call.name, result.updated_input, cwd)
        if updated != call.intent:
            meta[UPDATED_INPUT] = updated
    return meta


def tool_result_detail(call: Call, event: ToolCallEnd, denied: str | None) -> tuple[str, Any]:
    """The ``tool_result`` content and Claude Code's ``tool_use_result`` for a finished call."""
    if denied is not None:
        return denied, f"Error: {denied}"
    if call.name == "Bash":
        return event.output, {"stdout": event.output, "stderr": "", "interrupted": False,
                              "isImage": False}
    return event.output, event.output


def todos(entries: tuple[PlanEntry, ...]) -> list[dict[str, str]]:
    """A CAP plan as ``TodoWrite``'s ``todos`` (blocked and pending are both ``pending``)."""
    return [{"content": e.content, "status": _TODO_STATUS.get(e.status, "pending"),
             "activeForm": e.content} for e in entries]


def ask_wire(event: AskUser) -> dict[str, Any]:
    """``AskUserQuestion``'s input for a ``cap.ask_user``: its ``oneOf`` consts as options."""
    oneof = (event.form or {}).get("oneOf")
    options = [o["const"] for o in (oneof if isinstance(oneof, list) else [])
               if isinstance(o, dict) and isinstance(o.get("const"), str)]
    return {"questions": [{"question": event.prompt, "header": event.prompt[:12],
                           "options": [{"label": o, "description": ""} for o in options],
                           "multiSelect": False}]}


def ask_reply(prompt: Prompt, result: f.AnyPermissionResult) -> tuple[Any, str, bool]:
    """``(value, tool_result text, is_error)``: the answer ``updatedInput.answers`` carries for
    the question (the first answer when keyed otherwise); no answer is a decline."""
    value: Any = None
    if isinstance(result, f.PermissionAllow):
        answers = (result.updated_input or {}).get("answers") or {}
        if isinstance(answers, dict) and answers:
            value = answers.get(prompt.question, next(iter(answers.values())))
    if value is None:
        return None, f"User declined to answer: {getattr(result, 'message', '')}", True
    return value, (f'User has answered your questions: "{prompt.question}"="{value}". '
                   "You can now continue with the user's answers in mind."), False
