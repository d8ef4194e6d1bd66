"""CAP core events as ACP ``session/update`` payloads: the agent side's one translation table.

Pure functions over values (paths are joined with ``posixpath`` on strings,
never looked up), used twice by the agent-side machine: live, while a turn
runs, and to replay a logged session for ``session/load`` — so a loaded
session shows exactly what the live one showed.

==========================  ===========================================================
core event                  ACP update
==========================  ===========================================================
``cap.user_input.inject``   ``user_message_chunk`` (replay only: live, the client sent it)
``cap.text_chunk``          ``agent_message_chunk`` (``thought`` channel: thought chunk;
                            ``system`` channel: not shown, it is the agent side's notice)
``cap.thought``             ``agent_thought_chunk``
``cap.plan``                ``plan`` (urgent → high; cancelled → completed, blocked →
                            pending: ACP has three statuses)
``cap.tool_call.start``     ``tool_call`` pending, with title, kind, locations, rawInput,
                            and for Write/Edit the proposed change as a ``diff``
``cap.tool_call.delta``     ``tool_call_update`` in_progress, only when a bridged ACP agent's
                            update brought diffs
``cap.tool_call.end``       ``tool_call_update`` completed | failed, with the diffs and
                            terminals the call produced and its output as text
==========================  ===========================================================
"""

from __future__ import annotations

import posixpath
from typing import Any

import attrs
import msgspec
from msgspec import UNSET

from trio_cap.actors.bindings.acp import frames as f
from trio_cap.events.kinds import (
    Event,
    PermissionRequest,
    Plan,
    TextChunk,
    Thought,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UserInputInject,
)

_KINDS: dict[str, f.ToolKind] = {
    "Write": "edit", "Edit": "edit", "MultiEdit": "edit", "NotebookEdit": "edit",
    "Bash": "execute", "Read": "read", "Glob": "search", "Grep": "search", "LS": "search",
    "WebFetch": "fetch", "WebSearch": "fetch", "Task": "think", "TodoWrite": "think",
}
_ACP_KINDS = frozenset(("read", "edit", "delete", "move", "search", "execute", "think", "fetch",
                        "switch_mode", "other"))
_PRIORITY = {"urgent": "high", "high": "high", "medium": "medium", "low": "low"}
_STATUS = {"pending": "pending", "in_progress": "in_progress", "completed": "completed",
           "cancelled": "completed", "blocked": "pending"}


@attrs.define
class CallView:
    """What the client has been shown of one tool call: the end repeats the whole content
    (ACP's ``content`` replaces the list), so diffs and terminals are kept here."""

    name: str
    intent: dict[str, Any]
    diffs: list[f.Diff] = attrs.field(factory=list)
    terminals: list[str] = attrs.field(factory=list)


def absolute(path: Any, cwd: str) -> str | None:
    if not isinstance(path, str) or not path:
        return None
    return posixpath.normpath(posixpath.join(cwd, path))


def tool_path(intent: dict[str, Any], cwd: str) -> str | None:
    for key in ("path", "file_path", "notebook_path"):
        if key in intent:
            return absolute(intent[key], cwd)
    return None


def tool_kind(name: str, scope: str | None = None) -> f.ToolKind:
    if name in _KINDS:
        return _KINDS[name]
    return "read" if scope == "read" else "other"


def tool_title(name: str, intent: dict[str, Any], cwd: str) -> str:
    command = intent.get("command")
    if name == "Bash" and isinstance(command, str):
        return f"Run `{command}`"
    path = tool_path(intent, cwd)
    return f"{name} {path}" if path else name


def proposed_diff(name: str, intent: dict[str, Any], cwd: str) -> f.Diff | None:
    """The change a Write or Edit will make, as far as its input tells (Write: the new
    text over an unknown old one; Edit: the replaced fragment)."""
    path = tool_path(intent, cwd)
    if path is None:
        return None
    if name == "Write" and isinstance(intent.get("content"), str):
        return f.Diff(path=path, new_text=intent["content"], old_text=None)
    old, new = intent.get("old", intent.get("old_string")), intent.get("new",
                                                                      intent.get("new_string"))
    if name == "Edit" and isinstance(old, str) and isinstance(new, str):
        return f.Diff(path=path, new_text=new, old_text=old)
    return None


def _acp(event: Event) -> dict[str, Any]:
    """What a bridged ACP agent said of its tool call (the ACP driver keeps it in
    ``_meta["acp"]``): its own title, kind, locations and diffs win over our guesses.
    Its terminals are the driver's, never the client's, so they are not passed on."""
    meta = event.meta.get("acp") if isinstance(event.meta, dict) else None
    return meta if isinstance(meta, dict) else {}


def acp_diffs(event: Event) -> list[f.Diff]:
    out = []
    for item in _acp(event).get("diffs") or ():
        try:
            out.append(msgspec.convert(item, f.Diff))
        except (msgspec.ValidationError, TypeError):
            continue
    return out


def tool_call(event: ToolCallStart, cwd: str) -> f.ToolCall:
    acp = _acp(event)
    path = tool_path(event.input, cwd)
    diffs = acp_diffs(event) or [d for d in [proposed_diff(event.name, event.input, cwd)] if d]
    kind = acp.get("kind") if acp.get("kind") in _ACP_KINDS else tool_kind(event.name)
    locations: Any = (f.ToolCallLocation(path=path),) if path else UNSET
    try:
        if acp.get("locations"):
            locations = msgspec.convert(acp["locations"], tuple[f.ToolCallLocation, ...])
    except (msgspec.ValidationError, TypeError):
        pass
    title = acp.get("title")
    return f.ToolCall(
        tool_call_id=event.call_id, status="pending",
        title=title if isinstance(title, str) and title else tool_title(event.name,
                                                                          event.input, cwd),
        kind=kind, content=tuple(diffs) if diffs else UNSET, locations=locations,
        raw_input=event.input)


def permission_call(call_id: str, event: PermissionRequest, cwd: str,
                    view: CallView | None = None) -> f.ToolCallFields:
    """The ``toolCall`` of a ``session/request_permission``: the call the client already saw
    (same id), described again — as the call itself was, when a bridged ACP agent named it —
    so a client that shows only the request has it all."""
    tool, intent, acp = event.tool, event.intent, _acp(event)
    path = tool_path(intent, cwd)
    diffs = list(view.diffs) if view is not None and view.diffs else \
        [d for d in [proposed_diff(tool, intent, cwd)] if d]
    title = acp.get("title")
    kind = acp.get("kind") if acp.get("kind") in _ACP_KINDS else tool_kind(tool, event.scope)
    return f.ToolCallFields(
        tool_call_id=call_id, status="pending", kind=kind,
        title=title if isinstance(title, str) and title else tool_title(tool, intent, cwd),
        content=tuple(diffs) if diffs else UNSET,
        locations=(f.ToolCallLocation(path=path),) if path else UNSET,
        raw_input=intent)


def tool_done(event: ToolCallEnd, view: CallView | None) -> f.ToolCallUpdate:
    content: list[f.ToolCallContent] = [*_merged_diffs(event, view)]
    if view is not None:
        content += [f.TerminalRef(terminal_id=t) for t in view.terminals]
    if event.output:
        content.append(f.ToolContent(content=f.TextContent(text=event.output)))
    return f.ToolCallUpdate(tool_call_id=event.call_id,
                            status="failed" if event.is_error else "completed",
                            content=tuple(content), raw_output={"output": event.output})


def _merged_diffs(event: Event, view: CallView | None) -> list[f.Diff]:
    diffs = list(view.diffs) if view is not None else []
    diffs += [d for d in acp_diffs(event) if d not in diffs]
    if view is not None:
        view.diffs = diffs
    return diffs


def tool_progress(event: ToolCallDelta, view: CallView | None) -> f.ToolCallUpdate | None:
    """A bridged ACP agent's progress that brought diffs (streamed output alone is not
    shown: ``content`` replaces the list, so each chunk would resend all the output)."""
    if not acp_diffs(event):
        return None
    return f.ToolCallUpdate(tool_call_id=event.call_id, status="in_progress",
                            content=tuple(_merged_diffs(event, view)))


def plan(event: Plan) -> f.Plan:
    return f.Plan(entries=tuple(
        f.PlanEntry(content=e.content, priority=_PRIORITY.get(e.priority or "", "medium"),  # type: ignore[arg-type]
                    status=_STATUS[e.status])  # type: ignore[arg-type]
        for e in event.entries))


def text(chunk: str, message_id: str | None, *, kind: str = "agent",
         meta: dict[str, Any] | None = None) -> f.SessionUpdate:
    """``meta``: an agent message's ``_meta`` (its CAP keys, e.g. ``cap.message_to``)."""
    content = f.TextContent(text=chunk)
    mid = message_id if message_id else UNSET
    if kind == "thought":
        return f.AgentThoughtChunk(content=content, message_id=mid)
    if kind == "user":
        return f.UserMessageChunk(content=content, message_id=mid)
    return f.AgentMessageChunk(content=content, message_id=mid, meta=meta or UNSET)


def update(event: Event, cwd: str, calls: dict[str, CallView],
           *, replay: bool = False) -> f.SessionUpdate | None:
    """The update showing ``event`` (None: nothing to show); ``calls`` is kept up to date."""
    match event:
        case TextChunk():
            if event.channel == "system":
                return None
            if event.channel == "thought":
                return text(event.text, event.message_id, kind="thought")
            cap = {k: v for k, v in (event.meta or {}).items() if k.startswith("cap.")}
            return text(event.text, event.message_id, meta=cap)
        case Thought():
            return text(event.text, event.message_id, kind="thought")
        case Plan():
            return plan(event)
        case ToolCallStart():
            calls[event.call_id] = CallView(event.name, event.input)
            return tool_call(event, cwd)
        case ToolCallDelta():
            return tool_progress(event, calls.get(event.call_id))
        case ToolCallEnd():
            return tool_done(event, calls.get(event.call_id))
        case UserInputInject() if replay:
            return text(event.text, None, kind="user")
    return None
