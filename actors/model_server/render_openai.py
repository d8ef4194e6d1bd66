"""OpenAI chat completions: a reply plan as a ``chat.completion`` or its chunk stream.

opencode (through ``@ai-sdk/openai-compatible``) and aider (through litellm)
call this shape, both streaming; the official ``openai`` client checks it too.
Thinking goes into ``reasoning_content``, the field OpenAI-compatible servers
use for it and the AI SDK reads.
"""

from __future__ import annotations

from typing import Any

from trio_cap.actors.model_server.parse import ChatRequest
from trio_cap.actors.model_server.planner import ReplyPlan, chunk_text
from trio_cap.actors.model_server.script import Fault
from trio_cap.actors.model_server.sse import CREATED, json_arguments, split_in_two, sse

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                404: "not_found_error", 413: "invalid_request_error", 429: "rate_limit_exceeded"}


def call_id(plan_call_id: str) -> str:
    return f"call_{plan_call_id}"


def usage(plan: ReplyPlan) -> dict[str, Any]:
    return {
        "prompt_tokens": plan.input_tokens,
        "completion_tokens": plan.output_tokens,
        "total_tokens": plan.input_tokens + plan.output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": plan.thinking_tokens},
    }


def _finish(plan: ReplyPlan) -> str:
    return "tool_calls" if plan.tool_calls else "stop"


def body(plan: ReplyPlan) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": plan.text, "refusal": None}
    if plan.thinking:
        message["reasoning_content"] = plan.thinking
    if plan.tool_calls:
        message["tool_calls"] = [
            {"id": call_id(c.id), "type": "function",
             "function": {"name": c.name, "arguments": json_arguments(c.arguments)}}
            for c in plan.tool_calls
        ]
    return {
        "id": f"chatcmpl-{plan.response_id}",
        "object": "chat.completion",
        "created": CREATED,
        "model": plan.model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(plan),
                     "logprobs": None}],
        "usage": usage(plan),
    }


def frames(plan: ReplyPlan, req: ChatRequest) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse({
            "id": f"chatcmpl-{plan.response_id}", "object": "chat.completion.chunk",
            "created": CREATED, "model": plan.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        })

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"reasoning_content": piece})
            for piece in chunk_text(plan.thinking or "", plan.chunk_chars)]
    out += [chunk({"content": piece}) for piece in chunk_text(plan.text or "", plan.chunk_chars)]
    for index, call in enumerate(plan.tool_calls):
        out.append(chunk({"tool_calls": [{
            "index": index, "id": call_id(call.id), "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }]}))
        out += [chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in split_in_two(json_arguments(call.arguments))]
    out.append(chunk({}, _finish(plan)))
    if req.include_usage:
        out.append(sse({
            "id": f"chatcmpl-{plan.response_id}", "object": "chat.completion.chunk",
            "created": CREATED, "model": plan.model, "choices": [], "usage": usage(plan),
        }))
    out.append(sse(b"[DONE]"))
    return out


def error_body(fault: Fault) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(fault.status, "server_error")
    return {"error": {"message": fault.message, "type": kind, "param": None, "code": kind}}


def models_body(models: list[str]) -> dict[str, Any]:
    """One listing that satisfies both the OpenAI and the Anthropic model-list shapes."""
    data = [model_entry(m) for m in models]
    return {"object": "list", "data": data, "has_more": False,
            "first_id": models[0] if models else None, "last_id": models[-1] if models else None}


def model_entry(model: str) -> dict[str, Any]:
    return {"id": model, "object": "model", "created": CREATED, "owned_by": "trio-cap",
            "type": "model", "display_name": model, "created_at": "2025-06-15T00:00:00Z"}
