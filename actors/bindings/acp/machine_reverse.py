"""The agent's requests to the client, seen as CAP: permissions, asks and vetted effects.

Pure mappings the client machine applies to reverse requests:

* ``session/request_permission`` → ``cap.permission.request``: the ACP tool
  kind becomes a tool name trio-cap's risk rater knows (``execute`` → ``Bash``,
  ``edit`` → ``Edit`` …), the call's ``rawInput`` (and its locations' paths) is
  the intent, and the agent's option ids and kinds travel under ``_meta.acp``;
  the decision comes back as the option of the matching kind
  (:func:`choose_option`);
* ``fs/write_text_file`` and ``terminal/create`` are effects the *client*
  performs, so trio-cap vets them itself as a ``Write`` and a ``Bash`` call
  (:func:`write_request`, :func:`terminal_request`): the session machine rates
  them like any other tool call;
* ``elicitation/create`` (form mode) → ``cap.ask_user`` with the form, and the
  answer back as accept / decline (:func:`elicitation_result`).
"""

from __future__ import annotations

import shlex
from typing import Any

import msgspec
from msgspec import UNSET

from trio_cap.actors.bindings.acp import frames as f
from trio_cap.actors.bindings.acp.machine_updates import ToolCallState
from trio_cap.actors.bindings.base import AGENT_RISK
from trio_cap.events.forms import answer_problem, is_object_form
from trio_cap.events.kinds import AskUser, Decision, PermissionRequest, Scope

TOOL_OF_KIND = {
    "read": "Read", "edit": "Edit", "delete": "Delete", "move": "Move", "search": "Grep",
    "execute": "Bash", "fetch": "WebFetch", "think": "Think", "switch_mode": "ExitPlanMode",
}
"""ACP ``ToolKind`` → the tool name the risk rater judges (``other``: the call's own name)."""
SCOPE_OF_KIND: dict[str, Scope] = {"read": "read", "search": "read", "execute": "execute",
                                   "fetch": "network", "think": "read", "switch_mode": "read"}
WRITE_PREVIEW = 4096
"""Characters of a file write's content shown in its permission request."""

_ALLOW = ("allow_once", "allow_always")
_REJECT = ("reject_once", "reject_always")
_RISKS = frozenset({"low", "medium", "high"})


def permission_request(req_id: str, params: f.RequestPermissionParams,
                       known: ToolCallState | None) -> PermissionRequest:
    """The CAP request for an agent's ``session/request_permission``."""
    call = params.tool_call
    kind = call.kind if isinstance(call.kind, str) else (known.kind if known else "other")
    title = call.title if isinstance(call.title, str) else (known.title if known else "")
    raw_input = call.raw_input if call.raw_input not in (UNSET, None) else (
        known.raw_input if known else None)
    locations = call.locations if isinstance(call.locations, tuple) else (
        known.locations if known else ())
    name = call.meta.get("toolName") if isinstance(call.meta, dict) else None
    tool = TOOL_OF_KIND.get(kind) or (name if isinstance(name, str) and name else
                                      title or "other")
    intent: dict[str, Any] = dict(raw_input) if isinstance(raw_input, dict) else {}
    if raw_input is not None and not isinstance(raw_input, dict):
        intent["input"] = raw_input
    paths = [loc.path for loc in locations]
    if paths and not any(k in intent for k in ("path", "file_path", "filePath", "paths")):
        intent["paths"] = paths
    if tool == "Bash":
        if "command" not in intent and isinstance(intent.get("cmd"), str | list):
            intent["command"] = intent["cmd"]
        inner = shell_wrapped(intent.get("command"))
        if inner is not None:
            intent["command"] = inner
    meta: dict[str, Any] = {"acp": {
        "tool_call_id": call.tool_call_id, "kind": kind, "title": title,
        "options": [{"option_id": o.option_id, "kind": o.kind, "name": o.name}
                    for o in params.options]}}
    wire_meta = params.meta if isinstance(params.meta, dict) else {}
    # trio-cap's own agent side writes its rating as cap.risk_level; others as cap.agent_risk
    claimed = wire_meta.get(AGENT_RISK) or wire_meta.get("cap.risk_level")
    if claimed in _RISKS:
        meta[AGENT_RISK] = claimed  # passed through untouched; the session machine rates
    return PermissionRequest(req_id=req_id, tool=tool, intent=intent,
                             scope=SCOPE_OF_KIND.get(kind, "write"), meta=meta)


_SHELLS = frozenset({"sh", "bash", "zsh", "dash"})


def shell_wrapped(command: Any) -> str | None:
    """``X`` of ``["/bin/bash", "-lc", X]``: the way codex runs every command.

    The wrapper is how the agent runs any command line, so the effect to judge is
    ``X``'s: the rater parses it with a real shell parser (the wrapper alone would
    be an interpreter running inline code, rated high whatever ``X`` does).
    """
    if (isinstance(command, list) and len(command) == 3
            and all(isinstance(c, str) for c in command)
            and command[0].rsplit("/", 1)[-1] in _SHELLS and command[1] in ("-c", "-lc")):
        return command[2]
    return None


def choose_option(options: tuple[f.PermissionOption, ...], decision: Decision) -> str | None:
    """The agent's option id for trio-cap's decision; None when it offered none of that sort
    (the request is then answered ``cancelled``, never with an option of the other sort)."""
    if decision == "deny":
        order: tuple[str, ...] = _REJECT
    elif decision == "allow_always":
        order = ("allow_always", "allow_once")
    else:
        order = _ALLOW
    for kind in order:
        for option in options:
            if option.kind == kind:
                return option.option_id
    return None


def permission_result(option_id: str | None) -> f.RequestPermissionResult:
    outcome: f.PermissionOutcome = (f.Cancelled() if option_id is None
                                    else f.Selected(option_id=option_id))
    return f.RequestPermissionResult(outcome=outcome)


CANCELLED = f.RequestPermissionResult(outcome=f.Cancelled())


def write_request(req_id: str, params: f.WriteTextFileParams) -> PermissionRequest:
    content = params.content
    intent: dict[str, Any] = {"file_path": params.path, "content": content[:WRITE_PREVIEW]}
    if len(content) > WRITE_PREVIEW:
        intent["content_size"] = len(content)
    return PermissionRequest(req_id=req_id, tool="Write", intent=intent, scope="write",
                             meta={"acp": {"method": f.FS_WRITE}})


def command_text(params: f.CreateTerminalParams) -> str:
    """The command line as a shell would read it (the rater parses this)."""
    return shlex.join([params.command, *params.args]) if params.args else params.command


def terminal_request(req_id: str, params: f.CreateTerminalParams) -> PermissionRequest:
    intent: dict[str, Any] = {"command": command_text(params)}
    if isinstance(params.cwd, str):
        intent["cwd"] = params.cwd
    if params.env:
        intent["env"] = {e.name: e.value for e in params.env}
    return PermissionRequest(req_id=req_id, tool="Bash", intent=intent, scope="execute",
                             meta={"acp": {"method": f.TERMINAL_CREATE}})


def ask_for(ask_id: str, params: f.ElicitationParams) -> AskUser:
    form = dict(params.requested_schema) if isinstance(params.requested_schema, dict) else {}
    form.setdefault("type", "object")  # the Python SDK leaves the default out
    meta: dict[str, Any] = {"acp": {"mode": params.mode}}
    if isinstance(params.tool_call_id, str):
        meta["acp"]["tool_call_id"] = params.tool_call_id
    return AskUser(ask_id=ask_id, prompt=params.message, form=form, meta=meta)


def elicitation_result(form: dict[str, Any], value: Any) -> tuple[f.ElicitationResult, str | None]:
    """The answer to send and, when the value does not fit the form, why (it is declined)."""
    if value is None:
        return f.ElicitationResult(action="decline"), None
    if value == {"action": "cancel"}:
        return f.ElicitationResult(action="cancel"), None
    props = form.get("properties") if is_object_form(form) else None
    if not isinstance(value, dict) and isinstance(props, dict) and len(props) == 1:
        value = {next(iter(props)): value}  # one question answered with its bare value
    problem = answer_problem(form, value)
    if problem is None and not isinstance(value, dict):
        problem = "the answer must be an object with the form's fields"
    if problem is None:
        try:
            content = msgspec.convert(value, dict[str, f.ElicitationValue])
        except msgspec.ValidationError as exc:
            problem = str(exc)
        else:
            return f.ElicitationResult(action="accept", content=content), None
    return f.ElicitationResult(action="decline"), problem
