"""What real Claude Code writes beyond the SDK checklist, for the driver's decoder.

:mod:`actors.bindings.stream_json.frames` holds the shared frames (both
directions of the binding decode with the same classes).  The SDK parsers
require only a subset of what the CLI prints; the driver needs a few fields
more — the uuids a ``result`` closes, the API-error markers on synthetic
assistant frames, the retry details of ``system/api_retry``, thinking tokens
in ``result.usage`` — and the ``command_lifecycle`` frame.  They are
subclasses here, decoded through the driver's own union, so nothing in the
shared module changes; the lead can fold them into ``frames.py`` later.
"""

from __future__ import annotations

from typing import Any

import msgspec

from trio_cap.actors.bindings.stream_json.frames import (
    Assistant,
    ControlCancelRequest,
    ControlRequest,
    ControlResponse,
    Frame,
    KeepAlive,
    MessageUsage,
    RateLimitEvent,
    Result,
    StreamEvent,
    System,
    User,
)


class PromptMessage(msgspec.Struct, kw_only=True):
    """The ``message`` of a prompt, ``role`` always written.

    Real Claude Code 2.1.332 exits with "Expected message role 'user', got
    'undefined'" when ``role`` is missing, which ``frames.UserMessage``
    (``omit_defaults``) leaves out; prompts the driver writes use this instead.
    """

    role: str = "user"
    content: Any


class Prompt(msgspec.Struct, tag_field="type", tag="user", kw_only=True):
    """A user frame the driver writes: a uuid on every prompt, to match ``result``s."""

    message: PromptMessage
    session_id: str = ""
    parent_tool_use_id: str | None = None
    uuid: str


class OutputDetails(msgspec.Struct, kw_only=True):
    thinking_tokens: int = 0


class DriverUsage(MessageUsage, kw_only=True):
    """``result.usage``: this turn's tokens (thinking ones inside ``output_tokens_details``)."""

    output_tokens_details: OutputDetails | None = None


class DriverResult(Result, tag="result"):
    """``result`` as the driver needs it: which prompts it closes, and why it failed."""

    usage: DriverUsage | None = None
    user_message_uuids: list[str] | None = None
    api_error_status: int | None = None


class DriverAssistant(Assistant, tag="assistant"):
    """An ``assistant`` frame; ``is_api_error_message`` marks the CLI's synthetic error text."""

    is_api_error_message: bool = False
    api_error_status: int | None = None
    api_error_type: str | None = None


class DriverSystem(System, tag="system"):
    """``system`` frames, plus the fields of ``system/api_retry``."""

    attempt: int | None = None
    max_retries: int | None = None
    retry_delay_ms: float | None = None
    error_status: int | None = None
    error: Any = None


class CommandLifecycle(Frame, tag="command_lifecycle"):
    """queued → started → completed for a user frame that carried a ``uuid`` (2.1.332)."""

    command_uuid: str | None = None
    state: str | None = None
    uuid: str | None = None
    session_id: str | None = None


DriverFrame = (
    User
    | DriverAssistant
    | DriverSystem
    | StreamEvent
    | DriverResult
    | ControlRequest
    | ControlResponse
    | ControlCancelRequest
    | KeepAlive
    | RateLimitEvent
    | CommandLifecycle
)

DRIVER_FRAME_TYPES: frozenset[str] = frozenset(
    cls.__struct_config__.tag for cls in DriverFrame.__args__  # type: ignore[attr-defined]
)


class _TypeOnly(msgspec.Struct):
    type: Any = None


_decoder = msgspec.json.Decoder(DriverFrame)
_probe = msgspec.json.Decoder(_TypeOnly)
encoder = msgspec.json.Encoder()


class NotAFrame(ValueError):
    """Valid JSON, but no frame the driver knows (unknown ``type``, or a shape it cannot read)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def decode_driver_frame(line: bytes) -> DriverFrame:
    """One CLI → host frame from one line.

    Raises :class:`NotAFrame` for a well-formed JSON object it cannot use (kept
    raw by the caller) and ``msgspec.DecodeError`` for a malformed line.
    """
    try:
        return _decoder.decode(line)
    except msgspec.ValidationError as exc:
        # Validation happens while parsing, so the line may still be broken JSON:
        # this second decode raises DecodeError in that case.
        kind = _probe.decode(line).type
        if not isinstance(kind, str) or kind not in DRIVER_FRAME_TYPES:
            raise NotAFrame(f"unknown frame type {kind!r}") from None
        raise NotAFrame(f"unreadable {kind} frame: {exc}") from None
