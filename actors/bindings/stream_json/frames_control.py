"""stream-json control requests and their answers, both directions (part of :mod:`.frames`).

``control_request`` bodies are tagged on ``subtype``; ``can_use_tool`` is the
one a driver answers, the rest are what SDK clients send an agent.  Kept in
their own module for size only: import them through :mod:`.frames`, which
re-exports every name here.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "AnyPermissionResult", "AnyRequest", "CanUseTool", "CapTranscriptRequest",
    "GetContextUsage", "HookCallback", "Initialize", "Interrupt", "McpMessage", "McpReconnect",
    "McpStatus", "McpToggle", "PermissionAllow", "PermissionDeny", "PermissionResult",
    "Request", "ResponseBody", "RewindFiles", "SetModel", "SetPermissionMode", "StopTask",
    "decode_request",
]


class Request(msgspec.Struct, tag_field="subtype", kw_only=True, omit_defaults=True,
              gc=False):
    pass


class Initialize(Request, tag="initialize"):
    hooks: dict[str, Any] | None = None
    agents: dict[str, Any] | None = None
    system_prompt: str | list[str] | None = msgspec.field(default=None, name="systemPrompt")
    append_system_prompt: str | None = msgspec.field(default=None, name="appendSystemPrompt")


class Interrupt(Request, tag="interrupt"):
    pass


class SetPermissionMode(Request, tag="set_permission_mode"):
    mode: str


class SetModel(Request, tag="set_model"):
    model: str | None = None


class McpStatus(Request, tag="mcp_status"):
    pass


class GetContextUsage(Request, tag="get_context_usage"):
    pass


class RewindFiles(Request, tag="rewind_files"):
    user_message_id: str | None = None


class McpReconnect(Request, tag="mcp_reconnect"):
    server_name: str = msgspec.field(default="", name="serverName")


class McpToggle(Request, tag="mcp_toggle"):
    server_name: str = msgspec.field(default="", name="serverName")
    enabled: bool = True


class StopTask(Request, tag="stop_task"):
    task_id: str = ""


class CanUseTool(Request, tag="can_use_tool"):
    """CLI → host: may this tool call run?  Only with ``--permission-prompt-tool stdio``."""

    tool_name: str
    input: dict[str, Any]
    tool_use_id: str | None = None
    display_name: str | None = None
    description: str | None = None
    blocked_path: str | None = None
    decision_reason: str | None = None
    title: str | None = None
    agent_id: str | None = None
    permission_suggestions: list[dict[str, Any]] | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")
    """CAP extension: an agent that rates its own calls puts ``cap.agent_risk`` here."""


class HookCallback(Request, tag="hook_callback"):
    callback_id: str
    input: Any = None
    tool_use_id: str | None = None


class McpMessage(Request, tag="mcp_message"):
    server_name: str
    message: Any = None


class CapTranscriptRequest(Request, tag="cap.transcript"):
    """CAP extension, host → agent: send the session's full transcript now."""


AnyRequest = (
    Initialize | Interrupt | SetPermissionMode | SetModel | McpStatus | GetContextUsage
    | RewindFiles | McpReconnect | McpToggle | StopTask | CanUseTool | HookCallback
    | McpMessage | CapTranscriptRequest
)


class ResponseBody(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    subtype: Literal["success", "error"]
    request_id: str
    response: Any = None
    error: str | None = None
    error_code: str | None = None


class PermissionResult(msgspec.Struct, tag_field="behavior", kw_only=True, omit_defaults=True,
                       gc=False):
    """The body of a ``can_use_tool`` answer."""


class PermissionAllow(PermissionResult, tag="allow"):
    """``updatedInput`` is what actually runs (the SDKs always send it)."""

    updated_input: dict[str, Any] | None = msgspec.field(default=None, name="updatedInput")
    updated_permissions: list[dict[str, Any]] | None = msgspec.field(
        default=None, name="updatedPermissions"
    )
    tool_use_id: str | None = msgspec.field(default=None, name="toolUseID")


class PermissionDeny(PermissionResult, tag="deny"):
    message: str = ""
    interrupt: bool = False
    tool_use_id: str | None = msgspec.field(default=None, name="toolUseID")


AnyPermissionResult = PermissionAllow | PermissionDeny


_request_types: dict[str, type[Request]] = {
    cls.__struct_config__.tag: cls for cls in AnyRequest.__args__  # type: ignore[attr-defined,misc]
}


def decode_request(raw: Any) -> AnyRequest | str:
    """A control request body, or its subtype (as a str) when we do not know it."""
    subtype = raw.get("subtype") if isinstance(raw, dict) else None
    if not isinstance(subtype, str) or subtype not in _request_types:
        return subtype if isinstance(subtype, str) else ""
    return msgspec.convert(raw, AnyRequest)
