"""Claude Code's stream-json wire frames, both directions, as msgspec Structs.

One tagged union on ``type`` (:data:`Frame`) decodes any line either side may
write: trio-cap's agent side decodes what SDK clients send, and the driver
side (driving real ``claude``) decodes what the CLI prints, with the same
classes — so what our agent encodes is exactly what our driver decodes.
Shapes follow ``stream-json.md`` §2–§3 (observed on the wire, CLI 2.1.332).

There is one union for the wire (:data:`AnyFrame`, read by :func:`decode_frame`):
its frames carry the fields either reader needs (the driver's ``result``
uuids, API-error markers, ``api_retry`` details included).  The driver's fast
path, :func:`decode_frames` (a whole read at once), reads the same union with
four frames swapped for views that leave out fields no driver uses
(:data:`BATCH_VIEWS`, derived here, never written twice).

Every Struct is ``gc=False``: frames are trees of leaves that never form
reference cycles, and a read decodes hundreds of them at once, so keeping them
out of the cycle collector's sight is worth about half of the driver's time.

Unknown fields are ignored on decode (the CLI adds fields often); fields that
the official SDK parsers *require* are required here too, so we cannot encode
a frame they would reject.  ``omit_defaults`` keeps optional fields off the
wire unless set; message objects keep their ``null`` fields because the
Messages API always sends them.

CAP extensions ride on ``system`` frames with ``cap.*`` subtypes and their
payload under one ``cap`` key (:class:`TranscriptDiff`, :class:`ArtifactBody`,
:class:`ErrorBody`, :class:`Fragment`), plus one inbound frame type,
``cap.session.config``.  SDK clients hand unknown system subtypes to the
caller as plain system messages and skip unknown frame types.
"""

from __future__ import annotations

from typing import Any, Literal, Union

import msgspec

from trio_cap.actors.bindings.stream_json.frames_control import *  # noqa: F403 - re-exported
from trio_cap.actors.bindings.stream_json.frames_control import ResponseBody

# ---------------------------------------------------------------------------
# content blocks (Messages API), tagged on "type"
# ---------------------------------------------------------------------------


class Block(msgspec.Struct, tag_field="type", omit_defaults=True, kw_only=True, gc=False):
    pass


class TextBlock(Block, tag="text"):
    text: str


class ImageBlock(Block, tag="image"):
    source: dict[str, Any]


class DocumentBlock(Block, tag="document"):
    source: dict[str, Any]
    title: str | None = None


class ThinkingBlock(Block, tag="thinking"):
    thinking: str
    signature: str  # the SDK parser requires it, even empty


class RedactedThinkingBlock(Block, tag="redacted_thinking"):
    data: str


class ToolUseBlock(Block, tag="tool_use"):
    id: str
    name: str
    input: dict[str, Any]


class ServerToolUseBlock(Block, tag="server_tool_use"):
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(Block, tag="tool_result"):
    tool_use_id: str
    content: str | list[dict[str, Any]] | None = None
    is_error: bool | None = None


ContentBlock = (
    TextBlock
    | ImageBlock
    | DocumentBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ToolUseBlock
    | ServerToolUseBlock
    | ToolResultBlock
)


# ---------------------------------------------------------------------------
# messages
# ---------------------------------------------------------------------------


class MessageUsage(msgspec.Struct, kw_only=True, gc=False):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


class AssistantMessage(msgspec.Struct, kw_only=True, gc=False):
    """An API message; ``model`` and a ``content`` list are required by the SDK parser."""

    id: str
    type: str = "message"
    role: str = "assistant"
    model: str
    content: list[ContentBlock]
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: MessageUsage | None = None


class UserMessage(msgspec.Struct, kw_only=True, gc=False):
    role: str = "user"
    content: str | list[ContentBlock]


# ---------------------------------------------------------------------------
# Messages-API streaming events, wrapped in stream_event frames
# ---------------------------------------------------------------------------


class Delta(msgspec.Struct, tag_field="type", kw_only=True, gc=False):
    pass


class TextDelta(Delta, tag="text_delta"):
    text: str


class ThinkingDelta(Delta, tag="thinking_delta"):
    thinking: str


class SignatureDelta(Delta, tag="signature_delta"):
    signature: str


class InputJsonDelta(Delta, tag="input_json_delta"):
    partial_json: str


AnyDelta = TextDelta | ThinkingDelta | SignatureDelta | InputJsonDelta


class ApiEvent(msgspec.Struct, tag_field="type", kw_only=True, omit_defaults=True,
               gc=False):
    pass


class MessageStart(ApiEvent, tag="message_start"):
    message: AssistantMessage


class ContentBlockStart(ApiEvent, tag="content_block_start"):
    index: int
    content_block: ContentBlock


class ContentBlockDelta(ApiEvent, tag="content_block_delta"):
    index: int
    delta: AnyDelta


class ContentBlockStop(ApiEvent, tag="content_block_stop"):
    index: int


class MessageDeltaBody(msgspec.Struct, kw_only=True, gc=False):
    stop_reason: str | None = None
    stop_sequence: str | None = None


class MessageDelta(ApiEvent, tag="message_delta"):
    delta: MessageDeltaBody
    usage: dict[str, Any] | None = None


class MessageStop(ApiEvent, tag="message_stop"):
    pass


AnyApiEvent = (
    MessageStart | ContentBlockStart | ContentBlockDelta | ContentBlockStop | MessageDelta
    | MessageStop
)


# ---------------------------------------------------------------------------
# control requests (either direction) live in frames_control, re-exported here
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# result pieces
# ---------------------------------------------------------------------------


class ModelUsage(msgspec.Struct, kw_only=True, gc=False):
    input_tokens: int = msgspec.field(default=0, name="inputTokens")
    output_tokens: int = msgspec.field(default=0, name="outputTokens")
    cache_read_input_tokens: int = msgspec.field(default=0, name="cacheReadInputTokens")
    cache_creation_input_tokens: int = msgspec.field(default=0, name="cacheCreationInputTokens")
    web_search_requests: int = msgspec.field(default=0, name="webSearchRequests")
    cost_usd: float = msgspec.field(default=0.0, name="costUSD")
    context_window: int = msgspec.field(default=200_000, name="contextWindow")


class OutputDetails(msgspec.Struct, kw_only=True, gc=False):
    thinking_tokens: int = 0


class ResultUsage(MessageUsage, kw_only=True):
    """``result.usage``: this turn's tokens (thinking ones inside ``output_tokens_details``).

    The details are ``UNSET`` when absent, so a decoded result re-encodes byte for byte.
    """

    output_tokens_details: OutputDetails | msgspec.UnsetType = msgspec.UNSET


class PermissionDenial(msgspec.Struct, kw_only=True, gc=False):
    tool_name: str
    tool_use_id: str
    tool_input: dict[str, Any]


# ---------------------------------------------------------------------------
# CAP extension payloads (under a system frame's "cap" key)
# ---------------------------------------------------------------------------


class TranscriptDiff(msgspec.Struct, kw_only=True, gc=False):
    """Log entries ``from_seq``..``to_seq`` (envelopes ``[seq, at, stream, cause, event]``).

    ``index`` counts diffs from 1 and ``prev_seq`` is the previous diff's
    ``to_seq`` (0 before the first), so a gap is visible from any single diff;
    ``final`` marks the session's last diff, so a lost one is visible at EOF.
    """

    index: int
    prev_seq: int
    from_seq: int
    to_seq: int
    events: list[Any]
    final: bool = False


class ArtifactBody(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    artifact_id: str
    mime_type: str
    name: str
    size: int = 0
    uri: str | None = None
    content: str | None = None


class ErrorBody(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    code: str
    message: str
    numeric: int | None = None
    retryable: bool = False


class Fragment(msgspec.Struct, kw_only=True, gc=False):
    """One slice of an extension frame too long for a client's line limit.

    Joining ``data`` of parts ``0..count-1`` gives the original JSON line.
    """

    frame_uuid: str
    index: int
    count: int
    data: str


# ---------------------------------------------------------------------------
# frames, tagged on "type"
# ---------------------------------------------------------------------------


class Frame(msgspec.Struct, tag_field="type", kw_only=True, omit_defaults=True,
            gc=False):
    pass


class User(Frame, tag="user"):
    """A prompt (host → CLI) or tool results and notices (CLI → host)."""

    message: UserMessage
    session_id: str | None = None
    parent_tool_use_id: str | None = None
    uuid: str | None = None
    client_composed: bool | None = None
    tool_use_result: Any = None
    timestamp: str | None = None


class Assistant(Frame, tag="assistant"):
    """``is_api_error_message`` marks the CLI's synthetic text for a failed API call."""

    message: AssistantMessage
    session_id: str | None = None
    parent_tool_use_id: str | None = None
    uuid: str | None = None
    error: str | None = None
    user_message_uuid: str | None = None
    is_api_error_message: bool = False
    api_error_status: int | None = None
    api_error_type: str | None = None


class System(Frame, tag="system"):
    subtype: str
    session_id: str | None = None
    uuid: str | None = None
    # system/init
    cwd: str | None = None
    model: str | None = None
    permission_mode: str | None = msgspec.field(default=None, name="permissionMode")
    api_key_source: str | None = msgspec.field(default=None, name="apiKeySource")
    claude_code_version: str | None = None
    tools: list[str] | None = None
    mcp_servers: list[dict[str, Any]] | None = None
    slash_commands: list[str] | None = None
    output_style: str | None = None
    agents: list[str] | None = None
    skills: list[str] | None = None
    plugins: list[dict[str, Any]] | None = None
    capabilities: list[str] | None = None
    # system/status
    status: str | None = None
    # system/permission_denied
    tool_name: str | None = None
    tool_use_id: str | None = None
    message: str | None = None
    # system/session_state_changed
    state: str | None = None
    # system/api_retry
    attempt: int | None = None
    max_retries: int | None = None
    retry_delay_ms: float | None = None
    error_status: int | None = None
    error: Any = None
    # CAP extensions (subtype cap.*)
    cap: Any = None


class StreamEvent(Frame, tag="stream_event"):
    uuid: str
    session_id: str
    event: AnyApiEvent
    parent_tool_use_id: str | None = None


# What the driver's batch decoder (:func:`decode_frames`) reads instead of the
# full frames: only the fields a driver uses.  Nine lines in ten of a Claude Code
# session are stream events, and building their ``uuid`` and ``session_id``
# strings is a quarter of decoding them; the other three skip bulky parts
# (a tool's whole output again in ``tool_use_result``, init's lists of plugins,
# servers and skills).  Each is the full frame minus fields, never a new field.


class StreamEventIn(Frame, tag="stream_event"):
    event: AnyApiEvent
    parent_tool_use_id: str | None = None


class UserIn(Frame, tag="user"):
    message: UserMessage
    parent_tool_use_id: str | None = None
    uuid: str | None = None


class AssistantIn(Frame, tag="assistant"):
    message: AssistantMessage
    parent_tool_use_id: str | None = None
    error: str | None = None
    is_api_error_message: bool = False
    api_error_status: int | None = None
    api_error_type: str | None = None


class SystemIn(Frame, tag="system"):
    subtype: str
    session_id: str | None = None
    uuid: str | None = None
    cwd: str | None = None
    model: str | None = None
    permission_mode: str | None = msgspec.field(default=None, name="permissionMode")
    claude_code_version: str | None = None
    tools: list[str] | None = None
    slash_commands: list[str] | None = None
    attempt: int | None = None
    max_retries: int | None = None
    retry_delay_ms: float | None = None
    error_status: int | None = None
    error: Any = None
    cap: Any = None


class Result(Frame, tag="result"):
    subtype: str
    is_error: bool
    duration_ms: int
    duration_api_ms: int
    num_turns: int
    session_id: str
    result: str | None = None
    stop_reason: str | None = None
    terminal_reason: str | None = None
    total_cost_usd: float | None = None
    usage: ResultUsage | None = None
    model_usage: dict[str, ModelUsage] | None = msgspec.field(default=None, name="modelUsage")
    permission_denials: list[PermissionDenial] | None = None
    errors: list[str] | None = None
    uuid: str | None = None
    user_message_uuid: str | None = None
    user_message_uuids: list[str] | None = None
    """Every prompt this result closes (queued prompts are merged into one turn)."""
    api_error_status: int | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class ControlRequest(Frame, tag="control_request"):
    request_id: str
    request: Any  # decoded into AnyRequest by the receiver (unknown subtypes must be answered)


class ControlResponse(Frame, tag="control_response"):
    response: ResponseBody


class ControlCancelRequest(Frame, tag="control_cancel_request"):
    request_id: str


class KeepAlive(Frame, tag="keep_alive"):
    pass


class RateLimitEvent(Frame, tag="rate_limit_event"):
    rate_limit_info: dict[str, Any]
    uuid: str | None = None
    session_id: str | None = None


class CommandLifecycle(Frame, tag="command_lifecycle"):
    """queued → started → completed for a user frame that carried a ``uuid`` (2.1.332)."""

    command_uuid: str | None = None
    state: str | None = None
    uuid: str | None = None
    session_id: str | None = None


class PromptMessage(msgspec.Struct, kw_only=True, gc=False):
    """The ``message`` of a prompt the driver writes, ``role`` always written.

    Real Claude Code 2.1.332 exits with "Expected message role 'user', got
    'undefined'" when ``role`` is missing.
    """

    role: str = "user"
    content: Any


class Prompt(msgspec.Struct, tag_field="type", tag="user", kw_only=True, gc=False):
    """A user frame the driver writes (encode only): a uuid on every prompt, to match results."""

    message: PromptMessage
    session_id: str = ""
    parent_tool_use_id: str | None = None
    uuid: str


class CapSessionConfig(Frame, tag="cap.session.config"):
    """CAP extension, host → agent: the CAP §7.10 config as the first frame."""

    cwd: str
    model: str | None = None
    system_prompt: str | None = None
    max_turns: int | None = None
    budget_usd: float | None = None
    permission_mode: Literal["none", "confirm", "interactive"] = "interactive"
    session_resume_id: str | None = None
    profile_config: dict[str, Any] | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


AnyFrame = (
    User | Assistant | System | StreamEvent | Result | ControlRequest | ControlResponse
    | ControlCancelRequest | KeepAlive | RateLimitEvent | CommandLifecycle | CapSessionConfig
)

FRAME_TYPES: frozenset[str] = frozenset(
    cls.__struct_config__.tag for cls in AnyFrame.__args__  # type: ignore[attr-defined]
)


class _TypeOnly(msgspec.Struct):
    type: str = ""


_decoder = msgspec.json.Decoder(AnyFrame)
BATCH_VIEWS: dict[type, type] = {StreamEvent: StreamEventIn, User: UserIn,
                                  Assistant: AssistantIn, System: SystemIn}
"""Full frame → the view :func:`decode_frames` reads it as."""
_array_decoder = msgspec.json.Decoder(list[Union[tuple(  # noqa: UP007 - built from AnyFrame
    BATCH_VIEWS.get(cls, cls) for cls in AnyFrame.__args__)]])  # type: ignore[attr-defined]
_type_decoder = msgspec.json.Decoder(_TypeOnly)
encoder = msgspec.json.Encoder()


class UnknownFrame(Exception):
    """A well-formed JSON object whose ``type`` this module does not know (to be ignored)."""

    def __init__(self, frame_type: str) -> None:
        self.frame_type = frame_type
        super().__init__(f"unknown frame type {frame_type!r}")


def decode_frame(line: bytes | str) -> AnyFrame:
    """One frame from one line.

    Raises :class:`UnknownFrame` for a valid object of an unknown type (peers
    must ignore those) and ``msgspec.DecodeError``/``ValidationError`` for
    anything malformed.
    """
    try:
        return _decoder.decode(line)
    except msgspec.ValidationError:
        kind = _type_decoder.decode(line).type
        if kind and kind not in FRAME_TYPES:
            raise UnknownFrame(kind) from None
        raise


def decode_frames(array: bytes) -> list[Any]:
    """Many frames from one JSON array (an NDJSON block's lines joined by the reader).

    The same union as :func:`decode_frame`, except that the four frames of
    :data:`BATCH_VIEWS` come as their narrower views.  Raises like
    :func:`decode_frame` for the first bad element, without saying which: the
    caller goes line by line.
    """
    return _array_decoder.decode(array)


def encode_line(frame: Any) -> bytes:
    return encoder.encode(frame) + b"\n"
