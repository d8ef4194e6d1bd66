"""Gemini generateContent: a reply plan as a ``GenerateContentResponse`` or its chunks.

The Gemini CLI streams with ``streamGenerateContent?alt=sse``; without
``alt=sse`` the same chunks go out as one JSON array, as Google's endpoint
does.  The last chunk carries ``finishReason`` and ``usageMetadata``; function
calls arrive whole (Gemini never streams call arguments).
"""

from __future__ import annotations

from typing import Any

from trio_cap.actors.model_server.planner import ReplyPlan, chunk_text
from trio_cap.actors.model_server.script import Fault
from trio_cap.actors.model_server.sse import dumps, sse

_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
           404: "NOT_FOUND", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
           503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def usage(plan: ReplyPlan) -> dict[str, Any]:
    meta = {
        "promptTokenCount": plan.input_tokens,
        "candidatesTokenCount": plan.output_tokens - plan.thinking_tokens,
        "totalTokenCount": plan.input_tokens + plan.output_tokens,
    }
    if plan.thinking_tokens:
        meta["thoughtsTokenCount"] = plan.thinking_tokens
    return meta


def _call_parts(plan: ReplyPlan) -> list[dict[str, Any]]:
    return [{"functionCall": {"id": f"call_{c.id}", "name": c.name, "args": c.arguments}}
            for c in plan.tool_calls]


def _chunk(plan: ReplyPlan, parts: list[dict[str, Any]], final: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    out: dict[str, Any] = {"candidates": [candidate], "modelVersion": plan.model,
                           "responseId": plan.response_id}
    if final:
        candidate["finishReason"] = "STOP"
        out["usageMetadata"] = usage(plan)
    return out


def body(plan: ReplyPlan) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if plan.thinking:
        parts.append({"text": plan.thinking, "thought": True})
    if plan.text or not plan.tool_calls:
        parts.append({"text": plan.text or ""})
    parts += _call_parts(plan)
    return _chunk(plan, parts, final=True)


def chunks(plan: ReplyPlan) -> list[dict[str, Any]]:
    parts: list[list[dict[str, Any]]] = []
    parts += [[{"text": p, "thought": True}]
              for p in chunk_text(plan.thinking or "", plan.chunk_chars)]
    parts += [[{"text": p}] for p in chunk_text(plan.text or "", plan.chunk_chars)]
    if plan.tool_calls:
        parts.append(_call_parts(plan))
    if not parts:
        parts.append([{"text": ""}])
    return [_chunk(plan, p, final=i == len(parts) - 1) for i, p in enumerate(parts)]


def frames(plan: ReplyPlan, *, sse_mode: bool) -> list[bytes]:
    if sse_mode:
        return [sse(c) for c in chunks(plan)]
    return [dumps(chunks(plan))]


def error_body(fault: Fault) -> dict[str, Any]:
    error: dict[str, Any] = {"code": fault.status, "message": fault.message,
                             "status": _STATUS.get(fault.status, "UNKNOWN")}
    if fault.retry_after is not None:
        error["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                             "retryDelay": f"{fault.retry_after:g}s"}]
    return {"error": error}


def model_entry(model: str) -> dict[str, Any]:
    return {"name": f"models/{model}", "baseModelId": model, "version": "001",
            "displayName": model, "inputTokenLimit": 1_048_576, "outputTokenLimit": 65_536,
            "supportedGenerationMethods": ["generateContent", "streamGenerateContent",
                                           "countTokens"]}


def models_body(models: list[str]) -> dict[str, Any]:
    return {"models": [model_entry(m) for m in models]}
