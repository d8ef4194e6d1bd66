"""Anthropic Messages: a reply plan as a ``message`` or its SSE event stream.

Claude Code and claude-code-acp stream every call (``?beta=true``).  Each
content block is opened, filled by deltas and closed; thinking blocks carry a
signature because the SDK parsers require one (stream-json.md §4.5).
"""

from __future__ import annotations

from typing import Any

from trio_cap.actors.model_server.planner import ReplyPlan, chunk_text
from trio_cap.actors.model_server.script import Fault
from trio_cap.actors.model_server.sse import json_arguments, split_in_two, sse

SIGNATURE = "ZmFrZS1zaWduYXR1cmU="  # base64 "fake-signature"

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                429: "rate_limit_error", 529: "overloaded_error"}


def usage(plan: ReplyPlan, output_tokens: int | None = None) -> dict[str, Any]:
    return {
        "input_tokens": plan.input_tokens,
        "output_tokens": plan.output_tokens if output_tokens is None else output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _has_text(plan: ReplyPlan) -> bool:
    return plan.text is not None and (plan.text != "" or not plan.tool_calls)


def content_blocks(plan: ReplyPlan) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if plan.thinking:
        blocks.append({"type": "thinking", "thinking": plan.thinking, "signature": SIGNATURE})
    if _has_text(plan):
        blocks.append({"type": "text", "text": plan.text or ""})
    blocks += [{"type": "tool_use", "id": f"toolu_{c.id}", "name": c.name, "input": c.arguments}
               for c in plan.tool_calls]
    return blocks


def _message(plan: ReplyPlan, content: list[dict[str, Any]], final: bool) -> dict[str, Any]:
    return {
        "id": f"msg_{plan.response_id}", "type": "message", "role": "assistant",
        "model": plan.model, "content": content,
        "stop_reason": plan.stop if final else None, "stop_sequence": None,
        "usage": usage(plan, None if final else 1),
    }


def body(plan: ReplyPlan) -> dict[str, Any]:
    return _message(plan, content_blocks(plan), final=True)


def frames(plan: ReplyPlan) -> list[bytes]:
    out = [sse({"type": "message_start", "message": _message(plan, [], final=False)},
               "message_start")]

    def block(index: int, start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        out.append(sse({"type": "content_block_start", "index": index, "content_block": start},
                       "content_block_start"))
        out.extend(sse({"type": "content_block_delta", "index": index, "delta": d},
                       "content_block_delta") for d in deltas)
        out.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))

    index = 0
    if plan.thinking:
        deltas = [{"type": "thinking_delta", "thinking": p}
                  for p in chunk_text(plan.thinking, plan.chunk_chars)]
        deltas.append({"type": "signature_delta", "signature": SIGNATURE})
        block(index, {"type": "thinking", "thinking": "", "signature": ""}, deltas)
        index += 1
    if _has_text(plan):
        block(index, {"type": "text", "text": ""},
              [{"type": "text_delta", "text": p}
               for p in chunk_text(plan.text or "", plan.chunk_chars)])
        index += 1
    for call in plan.tool_calls:
        block(index, {"type": "tool_use", "id": f"toolu_{call.id}", "name": call.name,
                      "input": {}},
              [{"type": "input_json_delta", "partial_json": p}
               for p in split_in_two(json_arguments(call.arguments))])
        index += 1
    out.append(sse({"type": "message_delta",
                    "delta": {"stop_reason": plan.stop, "stop_sequence": None},
                    "usage": {"output_tokens": plan.output_tokens}}, "message_delta"))
    out.append(sse({"type": "message_stop"}, "message_stop"))
    return out


def error_body(fault: Fault) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(fault.status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": fault.message}}
