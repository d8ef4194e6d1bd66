"""Small judgements the driver makes about what Claude Code reports: tool scope, error codes.

Kept apart from the machine because they are policy, not protocol: the
lists grow as agents add tools and error texts, without touching the
state machine.
"""

from __future__ import annotations

from trio_cap.events.kinds import Scope

_READ_TOOLS = frozenset({"read", "glob", "grep", "ls", "notebookread", "todowrite", "todoread"})
_EXEC_TOOLS = frozenset({"bash", "bashoutput", "killshell", "killbash", "task"})
_NET_TOOLS = frozenset({"webfetch", "websearch"})


def tool_scope(tool: str) -> Scope:
    name = tool.lower()
    if name in _NET_TOOLS:
        return "network"
    if name in _EXEC_TOOLS:
        return "execute"
    if name in _READ_TOOLS:
        return "read"
    return "write"


def error_code(status: int | None, text: str = "") -> str:
    """The CAP ``cap.error`` code for an API failure (HTTP status and/or message)."""
    lowered = text.lower()
    if status == 429 or "rate_limit" in lowered or "rate limit" in lowered:
        return "rate_limit"
    if status in (401, 403) or "authentication" in lowered or "/login" in lowered:
        return "auth_error"
    if ("prompt is too long" in lowered or ("context" in lowered and "exceed" in lowered)
            or status == 413):
        return "context_overflow"
    if status in (404, 500, 502, 503, 504, 529) or "overloaded" in lowered:
        return "model_unavailable"
    return "agent_error"
