"""CAP events → Claude Code's assistant, user and stream_event frames, in Claude Code's order.

The brain streams text a few words at a time; an SDK client expects API
*messages*: one ``assistant`` frame per finished content block (blocks of one
message share its id), and with ``--include-partial-messages`` the raw SSE
events around them — ``message_start``, ``content_block_start``, deltas, the
block's ``assistant`` frame, ``content_block_stop``, ``message_delta`` and
``message_stop`` (stream-json.md §3.1, §3.5).  A message ends where the model
would have stopped: at a tool call (``stop_reason: tool_use``) or at the end
of the turn; the next text after a tool result opens a new message, as the
next API round trip would.

Ids come from an injected callable (the shell passes
:class:`~trio_cap.actors.bindings.stream_json.agent_ids.FrameIds`, deterministic
uuid5s), so this module never draws randomness and two runs of the same
conversation print the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from trio_cap.actors.bindings.stream_json import frames as f

NewId = Callable[[], str]
"""The machine's injected id source: each call returns a fresh uuid string."""


def message_id(new_id: NewId) -> str:
    """An API message id, ``msg_`` + 24 hex digits, as Claude Code's look."""
    return "msg_" + new_id().replace("-", "")[:24]


def tool_use_id(new_id: NewId) -> str:
    """A ``toolu_`` id for a tool_use block and its tool_result."""
    return "toolu_" + new_id().replace("-", "")[:24]


class MessageBuilder:
    """The open API message of the current turn and the frames that advance it."""

    def __init__(self, new_id: NewId, session_id: str, *, partial: bool) -> None:
        self.new_id = new_id
        self.session_id = session_id
        self.partial = partial
        self.model = ""
        self._msg_id: str | None = None
        self._count = 0  # blocks in the open message
        self._open: tuple[str, int, list[str]] | None = None  # kind, index, parts
        self._texts: list[str] = []  # text blocks of the open message
        self.final_text = ""
        """Text of the last message that ended: Claude Code's ``result``."""

    # ---- content ----------------------------------------------------------------
    def text(self, text: str, *, thinking: bool = False) -> list[f.Frame]:
        kind = "thinking" if thinking else "text"
        out = self._ensure_message()
        if self._open is not None and self._open[0] != kind:
            out += self._close_block()
        if self._open is None:
            index = self._count
            self._count += 1
            self._open = (kind, index, [])
            text = text.lstrip("\n")  # the brain starts later replies on a new line
            if self.partial:
                start: f.ContentBlock = (
                    f.ThinkingBlock(thinking="", signature="") if thinking else f.TextBlock(text="")
                )
                out.append(self._event(f.ContentBlockStart(index=index, content_block=start)))
        _, index, parts = self._open
        if text:
            parts.append(text)
            if self.partial:
                delta: f.AnyDelta = (
                    f.ThinkingDelta(thinking=text) if thinking else f.TextDelta(text=text)
                )
                out.append(self._event(f.ContentBlockDelta(index=index, delta=delta)))
        return out

    def tool_use(self, tool_use_id: str, name: str, wire_input: dict[str, Any]) -> list[f.Frame]:
        """A complete tool_use block; the message ends with ``stop_reason: tool_use``."""
        out = self._ensure_message()
        out += self._close_block()
        index = self._count
        self._count += 1
        block = f.ToolUseBlock(id=tool_use_id, name=name, input=wire_input)
        if self.partial:
            out.append(self._event(f.ContentBlockStart(
                index=index, content_block=f.ToolUseBlock(id=tool_use_id, name=name, input={}))))
            partial_json = msgspec.json.encode(wire_input).decode()
            out.append(self._event(f.ContentBlockDelta(
                index=index, delta=f.InputJsonDelta(partial_json=partial_json))))
        out.append(self._assistant(block))
        if self.partial:
            out.append(self._event(f.ContentBlockStop(index=index)))
        out += self.end_message("tool_use")
        return out

    def tool_result(self, tool_use_id: str, content: str, *, is_error: bool,
                    tool_use_result: Any) -> f.User:
        block = f.ToolResultBlock(tool_use_id=tool_use_id, content=content, is_error=is_error)
        return f.User(message=f.UserMessage(content=[block]), session_id=self.session_id,
                      uuid=self.new_id(), tool_use_result=tool_use_result)

    def notice(self, text: str) -> f.User:
        """A user-role text frame, as Claude Code prints ``[Request interrupted by user]``."""
        return f.User(message=f.UserMessage(content=[f.TextBlock(text=text)]),
                      session_id=self.session_id, uuid=self.new_id())

    def end_message(self, stop_reason: str = "end_turn") -> list[f.Frame]:
        if self._msg_id is None:
            return []
        out = self._close_block()
        if self.partial:
            out.append(self._event(f.MessageDelta(
                delta=f.MessageDeltaBody(stop_reason=stop_reason), usage={"output_tokens": 0})))
            out.append(self._event(f.MessageStop()))
        self.final_text = "".join(self._texts)
        self._msg_id = None
        self._count = 0
        self._texts = []
        return out

    # ---- internals ----------------------------------------------------------------
    def _ensure_message(self) -> list[f.Frame]:
        if self._msg_id is not None:
            return []
        self._msg_id = message_id(self.new_id)
        if not self.partial:
            return []
        message = f.AssistantMessage(id=self._msg_id, model=self.model, content=[],
                                     usage=f.MessageUsage())
        return [self._event(f.MessageStart(message=message))]

    def _close_block(self) -> list[f.Frame]:
        if self._open is None:
            return []
        kind, index, parts = self._open
        self._open = None
        text = "".join(parts)
        out: list[f.Frame] = []
        if kind == "thinking":
            block: f.ContentBlock = f.ThinkingBlock(thinking=text, signature="")
            if self.partial:
                out.append(self._event(f.ContentBlockDelta(
                    index=index, delta=f.SignatureDelta(signature=""))))
        else:
            block = f.TextBlock(text=text)
            self._texts.append(text)
        out.append(self._assistant(block))
        if self.partial:
            out.append(self._event(f.ContentBlockStop(index=index)))
        return out

    def _assistant(self, block: f.ContentBlock) -> f.Assistant:
        assert self._msg_id is not None
        message = f.AssistantMessage(id=self._msg_id, model=self.model, content=[block],
                                     usage=f.MessageUsage())
        return f.Assistant(message=message, session_id=self.session_id, uuid=self.new_id())

    def _event(self, event: f.AnyApiEvent) -> f.StreamEvent:
        return f.StreamEvent(uuid=self.new_id(), session_id=self.session_id, event=event)
