"""Pieces of the stream-json driver's state: streamed blocks, pending prompts, raw lines."""

from __future__ import annotations

from typing import Any

import attrs
import msgspec

from trio_cap.events.kinds import AgentRaw, TextChunk, Thought

BINDING = "stream-json"
RAW_LIMIT = 64 * 1024
"""Bytes of an unmapped line kept in the log (the rest is counted, not stored)."""


class StreamedBlock:
    """One streamed content block: what was received and how much of it was emitted.

    Text is kept as its deltas (joined only when the ``assistant`` frame is
    compared with it): a long reply arrives as tens of thousands of deltas and
    growing one string would copy it each time.  A plain slotted class: one
    is made per content block on the hot path.
    """

    __slots__ = ("emitted", "json_parts", "length", "parts", "tool_id", "tool_name", "type")

    def __init__(self, type: str, tool_id: str | None = None,
                 tool_name: str | None = None) -> None:
        self.type = type
        self.parts: list[str] = []
        self.length = 0
        self.emitted = 0
        self.tool_id = tool_id
        self.tool_name = tool_name
        self.json_parts: list[str] = []
        """A tool call's streamed input, as its deltas (joined once, at the block's stop)."""

    @property
    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""

    def add(self, piece: str) -> None:
        self.parts.append(piece)
        self.length += len(piece)

    def replace(self, full: str) -> None:
        self.parts = [full]
        self.length = len(full)

    @property
    def partial_json(self) -> str:
        return "".join(self.json_parts)

    def unemitted(self) -> str:
        """What has not been emitted yet; usually just the last delta."""
        gap = self.length - self.emitted
        last = self.parts[-1] if self.parts else ""
        piece = last if gap == len(last) else self.text[self.emitted:]
        self.emitted = self.length
        return piece


@attrs.define
class PendingPermission:
    input: dict[str, Any]
    suggestions: list[dict[str, Any]] | None


def raw_event(reason: str, data: bytes, source: str = "stdout") -> AgentRaw:
    text = data[:RAW_LIMIT].decode("utf-8", errors="replace")
    return AgentRaw(binding=BINDING, reason=reason, text=text, source=source,  # type: ignore[arg-type]
                    truncated=max(0, len(data) - RAW_LIMIT))


def result_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for item in content:
        if isinstance(item, dict) and item.get("type") == "text":
            parts.append(str(item.get("text", "")))
    return "".join(parts)


def joined_text(outputs: list[Any]) -> list[Any]:
    """Outputs with consecutive text of one message (and channel and meta) joined.

    How many ``cap.text_chunk`` / ``cap.thought`` events carry a block's text
    depends on how the bytes were read (driver rule R2); the text does not, so
    two feeds are compared after this.
    """
    out: list[Any] = []
    for o in outputs:
        prev = out[-1] if out else None
        if (type(o) in (TextChunk, Thought) and type(prev) is type(o)
                and (prev.message_id, getattr(prev, "channel", None), prev.meta)
                == (o.message_id, getattr(o, "channel", None), o.meta)):
            out[-1] = msgspec.structs.replace(prev, text=prev.text + o.text)
        else:
            out.append(o)
    return out
