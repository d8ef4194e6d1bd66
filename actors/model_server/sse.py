"""Server-sent-event framing and the JSON codec every renderer shares."""

from __future__ import annotations

from typing import Any

import msgspec

_encoder = msgspec.json.Encoder()

# A fixed creation time: replies must be byte-for-byte reproducible.
CREATED = 1_750_000_000


def dumps(obj: Any) -> bytes:
    return _encoder.encode(obj)


def sse(data: Any, event: str | None = None) -> bytes:
    """One SSE frame; ``data`` is JSON-encoded unless it is already bytes."""
    payload = data if isinstance(data, bytes) else dumps(data)
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + payload + b"\n\n"


def json_arguments(arguments: dict[str, Any]) -> str:
    return dumps(arguments).decode()


def split_in_two(text: str) -> list[str]:
    """Tool arguments arrive in more than one delta, as real streams do."""
    if len(text) < 2:
        return [text]
    mid = len(text) // 2
    return [text[:mid], text[mid:]]
