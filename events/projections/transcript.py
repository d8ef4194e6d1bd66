"""The conversation per session: user inputs, assistant messages, thoughts, tool calls."""

from __future__ import annotations

import msgspec

from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import InputInjected, TextChunk, Thought, ToolCallEnd, ToolCallStart
from trio_cap.events.projections.base import Projection


class Message(msgspec.Struct, kw_only=True):
    """Text kept as its streamed parts: appending stays O(1) however long a reply grows."""

    message_id: str
    role: str  # user | assistant | thought | system | tool
    parts: list[str] = msgspec.field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.parts)


class TranscriptState(msgspec.Struct):
    messages: dict[str, list[Message]] = msgspec.field(default_factory=dict)
    index: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)

    def text_of(self, session_id: str, role: str = "assistant") -> str:
        return "".join(m.text for m in self.messages.get(session_id, ()) if m.role == role)


def _append(state: TranscriptState, stream: str, message_id: str, role: str, text: str) -> None:
    key = f"{role}:{message_id}"
    index = state.index.setdefault(stream, {})
    messages = state.messages.setdefault(stream, [])
    at = index.get(key)
    if at is None:
        index[key] = len(messages)
        messages.append(Message(message_id=message_id, role=role, parts=[text]))
    else:
        messages[at].parts.append(text)


def _input(state: TranscriptState, env: Envelope) -> None:
    ev: InputInjected = env.event  # type: ignore[assignment]
    _append(state, env.stream, f"in-{env.seq}", "user", ev.text)


def _chunk(state: TranscriptState, env: Envelope) -> None:
    ev: TextChunk = env.event  # type: ignore[assignment]
    _append(state, env.stream, ev.message_id, ev.channel, ev.text)


def _thought(state: TranscriptState, env: Envelope) -> None:
    ev: Thought = env.event  # type: ignore[assignment]
    _append(state, env.stream, ev.message_id, "thought", ev.text)


def _tool_start(state: TranscriptState, env: Envelope) -> None:
    ev: ToolCallStart = env.event  # type: ignore[assignment]
    args = msgspec.json.encode(ev.input).decode()
    _append(state, env.stream, ev.call_id, "tool", f"{ev.name} {args}")


def _tool_end(state: TranscriptState, env: Envelope) -> None:
    ev: ToolCallEnd = env.event  # type: ignore[assignment]
    mark = "error" if ev.is_error else "ok"
    _append(state, env.stream, ev.call_id, "tool", f"\n→ {mark}: {ev.output}")


class TranscriptProjection(Projection[TranscriptState]):
    name = "transcript"
    handlers = {
        InputInjected: _input,
        TextChunk: _chunk,
        Thought: _thought,
        ToolCallStart: _tool_start,
        ToolCallEnd: _tool_end,
    }

    def initial(self) -> TranscriptState:
        return TranscriptState()
