"""Builders for CLI → host frames, shaped as real Claude Code 2.1.332 writes them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import count
from typing import Any

from trio_cap.actors.bindings.stream_json.driver import StreamJsonDriver
from trio_cap.actors.bindings.stream_json.driver_blocks import joined_text
from trio_cap.events.kinds import ContentBlock, UserInputInject

SID = "11111111-2222-3333-4444-555555555555"


def line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def new_driver(cwd: str = "/work") -> StreamJsonDriver:
    ids: Iterator[int] = count(1)
    return StreamJsonDriver(new_uuid=lambda: f"u{next(ids)}", session_id=SID, cwd=cwd)


def prompt(text: str) -> UserInputInject:
    return UserInputInject(content=(ContentBlock(text=text),))


def init_ok(request_id: str = "req_1_init") -> bytes:
    return line({"type": "control_response", "response": {
        "subtype": "success", "request_id": request_id,
        "response": {"claude_code_version": "2.1.332", "pid": 42}}})


def system_init(model: str = "claude-opus-5-5") -> bytes:
    return line({"type": "system", "subtype": "init", "session_id": SID, "cwd": "/work",
                 "model": model, "tools": ["Bash", "Write"], "permissionMode": "default",
                 "claude_code_version": "2.1.332", "uuid": "x"})


def stream(event: dict[str, Any], msg: str = "msg_1") -> bytes:
    return line({"type": "stream_event", "uuid": "e", "session_id": SID,
                 "parent_tool_use_id": None, "api_message_id": msg, "event": event})


def message_start(msg: str = "msg_1") -> bytes:
    return stream({"type": "message_start", "message": {
        "id": msg, "type": "message", "role": "assistant", "model": "claude-opus-5-5",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1}}}, msg)


def block_start(index: int, block: dict[str, Any], msg: str = "msg_1") -> bytes:
    return stream({"type": "content_block_start", "index": index, "content_block": block}, msg)


def delta(index: int, d: dict[str, Any], msg: str = "msg_1") -> bytes:
    return stream({"type": "content_block_delta", "index": index, "delta": d}, msg)


def block_stop(index: int, msg: str = "msg_1") -> bytes:
    return stream({"type": "content_block_stop", "index": index}, msg)


def assistant(*blocks: dict[str, Any], msg: str = "msg_1", **extra: Any) -> bytes:
    return line({"type": "assistant", "session_id": SID, "parent_tool_use_id": None,
                 "uuid": "a", "message": {
                     "id": msg, "type": "message", "role": "assistant",
                     "model": extra.pop("model", "claude-opus-5-5"), "content": list(blocks),
                     "stop_reason": None, "stop_sequence": None,
                     "usage": {"input_tokens": 10, "output_tokens": 1}}, **extra})


def text_turn(text: str, msg: str = "msg_1", pieces: int = 3) -> bytes:
    """A streamed text block as 2.1.332 orders it: deltas, assistant frame, then stop."""
    size = max(1, len(text) // pieces)
    parts = [text[i:i + size] for i in range(0, len(text), size)]
    out = message_start(msg) + block_start(0, {"type": "text", "text": ""}, msg)
    out += b"".join(delta(0, {"type": "text_delta", "text": p}, msg) for p in parts)
    out += assistant({"type": "text", "text": text}, msg=msg)
    return out + block_stop(0, msg)


def tool_result(call_id: str, content: str, is_error: bool = False) -> bytes:
    return line({"type": "user", "session_id": SID, "parent_tool_use_id": None, "uuid": "t",
                 "message": {"role": "user", "content": [
                     {"type": "tool_result", "tool_use_id": call_id, "content": content,
                      "is_error": is_error}]}})


def result(uuids: list[str] | None, *, cost: float = 0.01, subtype: str = "success",
           is_error: bool = False, text: str | None = "done", **extra: Any) -> bytes:
    frame: dict[str, Any] = {
        "type": "result", "subtype": subtype, "is_error": is_error, "duration_ms": 100,
        "duration_api_ms": 90, "num_turns": 1, "session_id": SID, "total_cost_usd": cost,
        "stop_reason": "end_turn", "uuid": extra.pop("uuid", f"r-{cost}"),
        "usage": {"input_tokens": 20, "output_tokens": 10, "cache_read_input_tokens": 5,
                  "cache_creation_input_tokens": 0,
                  "output_tokens_details": {"thinking_tokens": 3}},
        "modelUsage": {"claude-opus-5-5": {"inputTokens": 20, "costUSD": cost}},
    }
    if text is not None:
        frame["result"] = text
    if uuids is not None:
        frame["user_message_uuids"] = uuids
        if uuids:
            frame["user_message_uuid"] = uuids[-1]
    frame.update(extra)
    return line(frame)


def can_use_tool(req_id: str, tool: str, args: dict[str, Any]) -> bytes:
    return line({"type": "control_request", "request_id": req_id, "request": {
        "subtype": "can_use_tool", "tool_name": tool, "display_name": tool, "input": args,
        "tool_use_id": "toolu_1", "description": "do it",
        "permission_suggestions": [{"type": "setMode", "mode": "acceptEdits",
                                    "destination": "localSettings"}]}})


merged = joined_text
