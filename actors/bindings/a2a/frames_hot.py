"""Narrow read views of the two A2A v1.0 stream events that are most of any turn's traffic.

A turn's stream is mostly text: ``artifactUpdate`` chunks appended to one
artifact, or (Gemini CLI's A2A server) ``statusUpdate`` WORKING events each with
one agent message chunk.  The driver's fast path (``machine_hot.py``) reads a
whole read's SSE payloads as one JSON array of :class:`HotV1` views that name
only the fields those two mappings read; msgspec skips the rest without
building them, which is where the full decode (``frames.StreamV1``) spends its
time.  Every event the views cannot settle on their own (any other oneof
member, an error, a part that is not one text, …) is decoded again with the
full Structs and goes through the general rules.

What the views name they type exactly as the full Structs do (same names,
same defaults, strict), so a frame they accept means the same thing to both.
What they do not name they do not check either: a hot frame whose unread
fields are ill-typed (an artifact ``name`` that is a number) is taken for its
text on the fast path, where the full decode calls it malformed.  The fast
path reads a frame for what it means to CAP, as stream-json's views do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

__all__ = ["HotV1", "decode_hot_batch"]

_OPTS: dict[str, Any] = {"frozen": True, "kw_only": True, "rename": "camel", "gc": False}


class HotPart(msgspec.Struct, **_OPTS):
    text: str | None = None


class HotArtifact(msgspec.Struct, **_OPTS):
    artifact_id: str
    parts: tuple[HotPart, ...] = ()


class HotArtifactUpdate(msgspec.Struct, **_OPTS):
    task_id: str
    artifact: HotArtifact
    context_id: str = ""
    append: bool = False
    last_chunk: bool = False


class HotMessage(msgspec.Struct, **_OPTS):
    message_id: str
    role: str
    parts: tuple[HotPart, ...] = ()


class HotStatus(msgspec.Struct, **_OPTS):
    state: str
    message: HotMessage | None = None


class HotStatusUpdate(msgspec.Struct, **_OPTS):
    task_id: str
    status: HotStatus
    context_id: str = ""


class HotResult(msgspec.Struct, **_OPTS):
    """The two oneof members the fast path maps (checked in the general rules' order)."""

    artifact_update: HotArtifactUpdate | None = None
    status_update: HotStatusUpdate | None = None


class HotV1(msgspec.Struct, **_OPTS):
    jsonrpc: str = ""
    id: int | str | None = None
    result: HotResult | None = None
    error: Any = None
    """Only whether it is set: an error goes through the general rules."""


_batch = msgspec.json.Decoder(list[HotV1])


def decode_hot_batch(datas: Sequence[bytes]) -> list[HotV1] | None:
    """Every payload of one read as a view, in one call; None if any is not one (the caller
    then decodes them one by one with the full Structs)."""
    try:
        views = _batch.decode(b"[" + b",".join(datas) + b"]")
    except (msgspec.DecodeError, RecursionError):
        return None
    return views if len(views) == len(datas) else None
