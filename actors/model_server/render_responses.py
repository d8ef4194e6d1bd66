"""OpenAI Responses: a reply plan as a ``response`` object or its SSE event sequence.

Codex (and codex-acp) speak only this API now (``wire_api = "chat"`` is
rejected).  The event order is the one Codex accepted in peers.md:
created → in_progress → per item (added, parts/deltas, done) → completed, each
event carrying ``sequence_number``, and ``response.completed`` carrying usage
with the ``*_tokens_details`` objects Codex reads.
"""

from __future__ import annotations

from typing import Any

from trio_cap.actors.model_server.planner import PlannedCall, ReplyPlan, chunk_text
from trio_cap.actors.model_server.sse import CREATED, json_arguments, split_in_two, sse


def usage(plan: ReplyPlan) -> dict[str, Any]:
    return {
        "input_tokens": plan.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": plan.output_tokens,
        "output_tokens_details": {"reasoning_tokens": plan.thinking_tokens},
        "total_tokens": plan.input_tokens + plan.output_tokens,
    }


def _response(plan: ReplyPlan, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": f"resp_{plan.response_id}", "object": "response", "created_at": CREATED,
        "status": status, "model": plan.model, "output": output,
        "usage": usage(plan) if status == "completed" else None,
        "error": None, "incomplete_details": None, "instructions": None, "metadata": {},
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "temperature": 1.0, "top_p": 1.0, "text": {"format": {"type": "text"}},
    }


def _reasoning_item(plan: ReplyPlan, done: bool) -> dict[str, Any]:
    summary = [{"type": "summary_text", "text": plan.thinking}] if done else []
    return {"id": f"rs_{plan.response_id}", "type": "reasoning", "summary": summary}


def _message_item(plan: ReplyPlan, done: bool) -> dict[str, Any]:
    content = [{"type": "output_text", "text": plan.text, "annotations": [], "logprobs": []}]
    return {"id": f"msg_{plan.response_id}", "type": "message", "role": "assistant",
            "status": "completed" if done else "in_progress", "content": content if done else []}


def _call_item(call: PlannedCall, done: bool) -> dict[str, Any]:
    status = "completed" if done else "in_progress"
    if call.custom:
        return {"id": f"ctc_{call.id}", "type": "custom_tool_call", "status": status,
                "call_id": f"call_{call.id}", "name": call.name,
                "input": str(call.arguments.get("input", "")) if done else ""}
    return {"id": f"fc_{call.id}", "type": "function_call", "status": status,
            "call_id": f"call_{call.id}", "name": call.name,
            "arguments": json_arguments(call.arguments) if done else ""}


def _has_message(plan: ReplyPlan) -> bool:
    return plan.text is not None and (plan.text != "" or not plan.tool_calls)


def output_items(plan: ReplyPlan) -> list[dict[str, Any]]:
    items = []
    if plan.thinking:
        items.append(_reasoning_item(plan, True))
    if _has_message(plan):
        items.append(_message_item(plan, True))
    items += [_call_item(c, True) for c in plan.tool_calls]
    return items


def body(plan: ReplyPlan) -> dict[str, Any]:
    return _response(plan, "completed", output_items(plan))


def frames(plan: ReplyPlan) -> list[bytes]:
    out: list[bytes] = []

    def emit(kind: str, **fields: Any) -> None:
        out.append(sse({"type": kind, "sequence_number": len(out), **fields}, event=kind))

    emit("response.created", response=_response(plan, "in_progress", []))
    emit("response.in_progress", response=_response(plan, "in_progress", []))
    index = 0
    if plan.thinking:
        item_id = f"rs_{plan.response_id}"
        emit("response.output_item.added", output_index=index,
             item=_reasoning_item(plan, False))
        part = {"type": "summary_text", "text": ""}
        emit("response.reasoning_summary_part.added", item_id=item_id, output_index=index,
             summary_index=0, part=part)
        for piece in chunk_text(plan.thinking, plan.chunk_chars):
            emit("response.reasoning_summary_text.delta", item_id=item_id, output_index=index,
                 summary_index=0, delta=piece)
        emit("response.reasoning_summary_text.done", item_id=item_id, output_index=index,
             summary_index=0, text=plan.thinking)
        emit("response.reasoning_summary_part.done", item_id=item_id, output_index=index,
             summary_index=0, part={**part, "text": plan.thinking})
        emit("response.output_item.done", output_index=index, item=_reasoning_item(plan, True))
        index += 1
    if _has_message(plan):
        item_id = f"msg_{plan.response_id}"
        emit("response.output_item.added", output_index=index, item=_message_item(plan, False))
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        emit("response.content_part.added", item_id=item_id, output_index=index,
             content_index=0, part=part)
        for piece in chunk_text(plan.text or "", plan.chunk_chars):
            emit("response.output_text.delta", item_id=item_id, output_index=index,
                 content_index=0, delta=piece, logprobs=[])
        emit("response.output_text.done", item_id=item_id, output_index=index,
             content_index=0, text=plan.text or "", logprobs=[])
        emit("response.content_part.done", item_id=item_id, output_index=index,
             content_index=0, part={**part, "text": plan.text or ""})
        emit("response.output_item.done", output_index=index, item=_message_item(plan, True))
        index += 1
    for call in plan.tool_calls:
        item = _call_item(call, True)
        emit("response.output_item.added", output_index=index, item=_call_item(call, False))
        if call.custom:
            for piece in split_in_two(item["input"]):
                emit("response.custom_tool_call_input.delta", item_id=item["id"],
                     output_index=index, delta=piece)
            emit("response.custom_tool_call_input.done", item_id=item["id"],
                 output_index=index, input=item["input"])
        else:
            for piece in split_in_two(item["arguments"]):
                emit("response.function_call_arguments.delta", item_id=item["id"],
                     output_index=index, delta=piece)
            emit("response.function_call_arguments.done", item_id=item["id"],
                 output_index=index, name=call.name, arguments=item["arguments"])
        emit("response.output_item.done", output_index=index, item=item)
        index += 1
    emit("response.completed", response=body(plan))
    return out
