"""Small judgements the driver makes about what Claude Code reports: scopes, errors, usage.

Kept apart from the machine because they are mapping, not state: the lists
grow as agents add tools and error texts, and each function is a pure
frame → CAP event, without touching the state machine.
"""

from __future__ import annotations

from typing import Any

import msgspec

from trio_cap.actors.bindings.ndjson import BadLine
from trio_cap.actors.bindings.stream_json import frames as f
from trio_cap.actors.bindings.stream_json.driver_blocks import RAW_LIMIT
from trio_cap.events.kinds import Artifact, CapError, Event, Scope, StopReason, Usage

_RETRYABLE = ("rate_limit", "model_unavailable")
RUN_TEXT, RUN_JSON = 1, 2
"""The two kinds of delta runs: text or thinking pieces, a tool call's input pieces."""

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


def api_error(frame: f.Assistant | f.AssistantIn) -> CapError:
    """Claude Code's synthetic assistant text for a failed API call, as one ``cap.error``."""
    text = "".join(b.text for b in frame.message.content if isinstance(b, f.TextBlock))
    code = error_code(frame.api_error_status, f"{frame.error or ''} {text}")
    message = text or frame.error or f"API error {frame.api_error_status or ''}".strip()
    return CapError(code=code, message=message, retryable=code in _RETRYABLE,
                    details={"status": frame.api_error_status,
                             "type": frame.api_error_type or frame.error})


def result_error(frame: f.Result, already_reported: bool) -> CapError | None:
    """The ``cap.error`` of a failed turn (None when the turn's error was reported already)."""
    text = frame.result or "; ".join(frame.errors or ()) or frame.subtype or "the turn failed"
    details: dict[str, Any] = {"subtype": frame.subtype}
    if frame.terminal_reason:
        details["terminal_reason"] = frame.terminal_reason
    if frame.subtype == "error_max_turns":
        return CapError(code="max_turns", message=text, details=details)
    if frame.subtype == "error_max_budget_usd":
        return CapError(code="cap_budget_exceeded", message=text, details=details)
    if already_reported:
        return None  # synthetic API-error text, or a cap.error frame, said it first
    if frame.api_error_status is not None:
        details["status"] = frame.api_error_status
    code = error_code(frame.api_error_status, text)
    return CapError(code=code, message=text, details=details, retryable=code in _RETRYABLE)


def usage_of(frame: f.Result, stop: StopReason, model: str | None,
             total_so_far: float) -> tuple[Usage, float]:
    """The turn's ``cap.usage`` and the new running total (``total_cost_usd`` is cumulative)."""
    cost = 0.0
    total = total_so_far
    if frame.total_cost_usd is not None:
        cost = round(max(0.0, frame.total_cost_usd - total_so_far), 12)
        total = max(total_so_far, frame.total_cost_usd)
    usage = frame.usage
    if usage is None:
        return Usage(model_id=model, cost_usd_estimate=cost, duration_ms=frame.duration_ms,
                     stop_reason=stop), total
    details = usage.output_tokens_details
    return Usage(model_id=model, input_tokens=usage.input_tokens,
                 output_tokens=usage.output_tokens,
                 cache_read_tokens=usage.cache_read_input_tokens,
                 cache_creation_tokens=usage.cache_creation_input_tokens,
                 thinking_tokens=details.thinking_tokens if details else 0,  # UNSET is falsy
                 cost_usd_estimate=cost, duration_ms=frame.duration_ms, stop_reason=stop), total


def cap_extension(sub: str, payload: Any) -> Event:
    """trio-cap's own agent carries CAP events on ``system/cap.*`` (R11).

    Raises ``msgspec.ValidationError`` when the payload is not the shape it names.
    """
    if sub == "cap.error":
        body = msgspec.convert(payload, f.ErrorBody)
        code = body.code or "agent_error"
        return CapError(code=code, message=body.message or f"the agent reported {code}",
                        retryable=body.retryable)
    art = msgspec.convert(payload, f.ArtifactBody)
    return Artifact(artifact_id=art.artifact_id, mime_type=art.mime_type, name=art.name,
                    size=art.size, uri=art.uri, content=art.content)


def delta_piece(delta: f.AnyDelta) -> tuple[str, int]:
    """A delta's text and the run it belongs to (0: none, a signature)."""
    kind = type(delta)
    if kind is f.TextDelta:
        return delta.text, RUN_TEXT  # type: ignore[union-attr]
    if kind is f.ThinkingDelta:
        return delta.thinking, RUN_TEXT  # type: ignore[union-attr]
    if kind is f.InputJsonDelta:
        return delta.partial_json, RUN_JSON  # type: ignore[union-attr]
    return "", 0


def rate_limited(frame: f.RateLimitEvent) -> list[CapError]:
    """R16: a ``rate_limit_event`` whose status is rejected; others say nothing."""
    info = frame.rate_limit_info
    if str(info.get("status", "")) != "rejected":
        return []
    return [CapError(code="rate_limit", message="the agent's rate limit was hit",
                     retryable=True, details=info)]


def unreadable(line: BadLine) -> CapError:
    """R19: a line that is not JSON, overlong, or broken and never completed."""
    return CapError(code="parse_failed", message=f"unreadable line from the agent: {line.reason}",
                    details={"raw": line.raw[:RAW_LIMIT].decode("utf-8", errors="replace"),
                             "size": line.size or len(line.raw)})
