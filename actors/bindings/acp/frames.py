"""ACP v1 wire frames, both directions: frozen msgspec Structs and the one decoder per wire.

Shared by the driver (trio-cap as an ACP *client*: :mod:`.machine`) and the
agent side (``cap agent --cap-speak acp``): the driver decodes what our agent
encodes.  The agent-side helper may add Structs here (keep them next to their
method's, and add the method to the tables at the end).

Shapes are ACP schema v1 (``schema/v1/schema.json`` 1.21.0; protocol version
integer ``1``), checked against the official SDKs' golden samples
(``docs/research/cap-protocol/acp-*.md``).  Choices:

* every optional field defaults to ``UNSET`` (absent stays absent, an explicit
  ``null`` stays ``None``), so a decoded frame re-encodes to the bytes' meaning
  exactly; the defaults the schema gives to absent fields are applied by
  readers (``ToolCall.kind`` absent = ``other``) through the small accessors
  below, never by filling fields in;
* unions are tagged where the wire is (``sessionUpdate``, ``type``,
  ``outcome``); the two untagged ones (MCP server entries, config option
  values) are kept as one permissive shape;
* decoding is lenient as the schema asks (``x-deserialize-default-on-error``,
  ``x-deserialize-skip-invalid-items``): a bad optional field or a bad list
  item is dropped, not fatal (:mod:`.frames_lenient`); an unknown
  ``sessionUpdate`` kind is an :class:`UnknownUpdate`, not an error;
* ``_meta`` is kept wherever the wire may carry it that trio-cap reads.

JSON-RPC itself (ids, routing, error replies) is :mod:`..jsonrpc`'s; framing
is :mod:`..ndjson`'s.  This module only knows what ``params`` and ``result``
hold for each ACP method.  It is long because it is the whole v1 schema, both
directions, in the schema's order; the tables at the end are its index.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

PROTOCOL_VERSION = 1
MAX_LINE = 32 * 1024 * 1024
"""Longest line either side accepts: the TypeScript SDK's maximum message size."""

# ---- error codes ACP names beyond JSON-RPC's own ----------------------------------------

AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002
REQUEST_CANCELLED = -32800

Meta = dict[str, Any]


class _Wire(msgspec.Struct, frozen=True, kw_only=True, rename="camel", gc=False):
    """Base of every ACP shape: camelCase names on the wire, immutable."""


# ---- content ---------------------------------------------------------------------------


class TextContent(_Wire, tag_field="type", tag="text"):
    text: str
    annotations: dict[str, Any] | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class ImageContent(_Wire, tag_field="type", tag="image"):
    data: str
    mime_type: str
    uri: str | UnsetType | None = UNSET
    annotations: dict[str, Any] | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class AudioContent(_Wire, tag_field="type", tag="audio"):
    data: str
    mime_type: str
    annotations: dict[str, Any] | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class ResourceLink(_Wire, tag_field="type", tag="resource_link"):
    uri: str
    name: str
    mime_type: str | UnsetType | None = UNSET
    title: str | UnsetType | None = UNSET
    description: str | UnsetType | None = UNSET
    size: int | UnsetType | None = UNSET
    annotations: dict[str, Any] | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class ResourceContents(_Wire):
    """Text (``text``) or binary (``blob``, base64) contents: the schema's two shapes in one."""

    uri: str
    mime_type: str | UnsetType | None = UNSET
    text: str | UnsetType = UNSET
    blob: str | UnsetType = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class EmbeddedResource(_Wire, tag_field="type", tag="resource"):
    resource: ResourceContents
    annotations: dict[str, Any] | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


ContentBlock = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource


def content_text(block: Any) -> str:
    """What a content block says as text (a resource's text, a link's uri), for CAP events."""
    kind = type(block)
    if kind is TextContent or kind is TextView:
        return block.text  # type: ignore[union-attr]
    if kind is ResourceLink:
        return block.uri  # type: ignore[union-attr]
    if kind is EmbeddedResource:
        text = block.resource.text  # type: ignore[union-attr]
        return text if isinstance(text, str) else ""
    return ""


# ---- tool calls --------------------------------------------------------------------------

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch",
                   "switch_mode", "other"]
ToolCallStatus = Literal["pending", "in_progress", "completed", "failed"]


class ToolContent(_Wire, tag_field="type", tag="content"):
    content: ContentBlock
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class Diff(_Wire, tag_field="type", tag="diff"):
    path: str
    new_text: str
    old_text: str | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class TerminalRef(_Wire, tag_field="type", tag="terminal"):
    terminal_id: str
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


ToolCallContent = ToolContent | Diff | TerminalRef


class ToolCallLocation(_Wire):
    path: str
    line: int | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class ToolCallFields(_Wire):
    """A tool call as ``session/request_permission`` names it (a ToolCallUpdate)."""

    tool_call_id: str
    title: str | UnsetType | None = UNSET
    kind: ToolKind | UnsetType | None = UNSET
    status: ToolCallStatus | UnsetType | None = UNSET
    content: tuple[ToolCallContent, ...] | UnsetType | None = UNSET
    locations: tuple[ToolCallLocation, ...] | UnsetType | None = UNSET
    raw_input: Any = UNSET
    raw_output: Any = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


# ---- session updates (agent → client ``session/update``) --------------------------------


class _Update(_Wire, tag_field="sessionUpdate"):
    pass


class UserMessageChunk(_Update, tag="user_message_chunk"):
    content: ContentBlock
    message_id: str | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class AgentMessageChunk(_Update, tag="agent_message_chunk"):
    content: ContentBlock
    message_id: str | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class AgentThoughtChunk(_Update, tag="agent_thought_chunk"):
    content: ContentBlock
    message_id: str | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class ToolCall(_Update, tag="tool_call"):
    tool_call_id: str
    title: str
    kind: ToolKind | UnsetType = UNSET
    status: ToolCallStatus | UnsetType = UNSET
    content: tuple[ToolCallContent, ...] | UnsetType = UNSET
    locations: tuple[ToolCallLocation, ...] | UnsetType = UNSET
    raw_input: Any = UNSET
    raw_output: Any = UNSET
    name: str | UnsetType = UNSET
    """Unstable: the tool's own name (``title`` is for people)."""
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class ToolCallUpdate(_Update, tag="tool_call_update"):
    """Only what changed: absent or null = unchanged; ``content``/``locations`` replace."""

    tool_call_id: str
    title: str | UnsetType | None = UNSET
    kind: ToolKind | UnsetType | None = UNSET
    status: ToolCallStatus | UnsetType | None = UNSET
    content: tuple[ToolCallContent, ...] | UnsetType | None = UNSET
    locations: tuple[ToolCallLocation, ...] | UnsetType | None = UNSET
    raw_input: Any = UNSET
    raw_output: Any = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class PlanEntry(_Wire):
    content: str
    priority: Literal["high", "medium", "low"]
    status: Literal["pending", "in_progress", "completed"]
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class Plan(_Update, tag="plan"):
    entries: tuple[PlanEntry, ...]
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class CommandInput(_Wire):
    hint: str


class AvailableCommand(_Wire):
    name: str
    description: str
    input: CommandInput | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class AvailableCommandsUpdate(_Update, tag="available_commands_update"):
    available_commands: tuple[AvailableCommand, ...]
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class CurrentModeUpdate(_Update, tag="current_mode_update"):
    """``currentModeId`` per the schema; the session-modes doc writes ``modeId``: both read."""

    current_mode_id: str | UnsetType = UNSET
    mode_id: str | UnsetType = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")

    @property
    def mode(self) -> str | None:
        for value in (self.current_mode_id, self.mode_id):
            if isinstance(value, str):
                return value
        return None


class ConfigValue(_Wire):
    """A select option (``value``) or a group of them (``group`` + ``options``)."""

    name: str
    value: str | UnsetType = UNSET
    description: str | UnsetType | None = UNSET
    group: str | UnsetType = UNSET
    options: tuple[ConfigValue, ...] | UnsetType = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class ConfigOption(_Wire):
    """``type`` select (``options``) or boolean; unknown types and categories are kept."""

    id: str
    name: str
    type: str = "select"
    current_value: str | bool | UnsetType | None = UNSET
    description: str | UnsetType | None = UNSET
    category: str | UnsetType | None = UNSET
    options: tuple[ConfigValue, ...] | UnsetType = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")

    def values(self) -> list[str]:
        """Every selectable value, groups flattened."""
        out: list[str] = []
        stack = list(self.options or ())
        while stack:
            item = stack.pop(0)
            if isinstance(item.value, str):
                out.append(item.value)
            if item.options:
                stack[0:0] = list(item.options)
        return out


class ConfigOptionUpdate(_Update, tag="config_option_update"):
    config_options: tuple[ConfigOption, ...]
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class SessionInfoUpdate(_Update, tag="session_info_update"):
    title: str | UnsetType | None = UNSET
    updated_at: str | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class Cost(_Wire):
    amount: float
    currency: str


class UsageUpdate(_Update, tag="usage_update"):
    used: int
    size: int
    cost: Cost | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class UnstableUpdate(_Wire):
    """An unstable kind (``plan_update``, ``notice``, ``compaction_*`` …): kept as it came."""

    session_update: str
    body: dict[str, Any]


class UnknownUpdate(_Wire):
    """A ``sessionUpdate`` kind this build does not know (forward compatibility), or an
    update whose required fields were unreadable: kept, never fatal."""

    session_update: str
    body: dict[str, Any]
    problem: str = ""


SessionUpdate = (UserMessageChunk | AgentMessageChunk | AgentThoughtChunk | ToolCall
                 | ToolCallUpdate | Plan | AvailableCommandsUpdate | CurrentModeUpdate
                 | ConfigOptionUpdate | SessionInfoUpdate | UsageUpdate)
UNSTABLE_UPDATES = frozenset({"plan_update", "plan_removed", "notice", "compaction_update",
                              "compaction_summary_chunk"})


class SessionNotification(_Wire):
    """``session/update`` params."""

    session_id: str
    update: SessionUpdate
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class LooseNotification(_Wire):
    """``session/update`` params whose update is unknown or unstable (see the decoder)."""

    session_id: str
    update: UnknownUpdate | UnstableUpdate
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


# ---- initialize / authenticate -----------------------------------------------------------


class Implementation(_Wire):
    name: str
    version: str
    title: str | UnsetType | None = UNSET


class FsCapability(_Wire, omit_defaults=True):
    read_text_file: bool = False
    write_text_file: bool = False
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class ElicitationCapability(_Wire):
    """A mode counts only when its key is present and not null (``{}`` advertises nothing)."""

    form: dict[str, Any] | UnsetType | None = UNSET
    url: dict[str, Any] | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class AuthCapability(_Wire, omit_defaults=True):
    terminal: bool = False


class ClientCapabilities(_Wire):
    fs: FsCapability | UnsetType = UNSET
    terminal: bool | UnsetType = UNSET
    elicitation: ElicitationCapability | UnsetType | None = UNSET
    auth: AuthCapability | UnsetType | None = UNSET
    session: dict[str, Any] | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")

    def reads_files(self) -> bool:
        return isinstance(self.fs, FsCapability) and self.fs.read_text_file

    def writes_files(self) -> bool:
        return isinstance(self.fs, FsCapability) and self.fs.write_text_file

    def has_terminal(self) -> bool:
        return self.terminal is True

    def elicitation_modes(self) -> frozenset[str]:
        cap = self.elicitation
        if not isinstance(cap, ElicitationCapability):
            return frozenset()
        return frozenset(m for m, v in (("form", cap.form), ("url", cap.url))
                         if isinstance(v, dict))


class InitializeParams(_Wire):
    protocol_version: int
    client_capabilities: ClientCapabilities | UnsetType = UNSET
    client_info: Implementation | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class PromptCapabilities(_Wire, omit_defaults=True):
    image: bool = False
    audio: bool = False
    embedded_context: bool = False
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class McpCapabilities(_Wire, omit_defaults=True):
    http: bool = False
    sse: bool = False
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class AgentCapabilities(_Wire):
    load_session: bool | UnsetType = UNSET
    prompt_capabilities: PromptCapabilities | UnsetType = UNSET
    mcp_capabilities: McpCapabilities | UnsetType = UNSET
    session_capabilities: dict[str, Any] | UnsetType | None = UNSET
    """``list``, ``resume``, ``close``, ``delete`` …: an object present = supported."""
    auth: dict[str, Any] | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")

    def loads_sessions(self) -> bool:
        return self.load_session is True

    def session_feature(self, name: str) -> bool:
        caps = self.session_capabilities
        return isinstance(caps, dict) and isinstance(caps.get(name), dict)

    def prompts(self) -> PromptCapabilities:
        caps = self.prompt_capabilities
        return caps if isinstance(caps, PromptCapabilities) else PromptCapabilities()


class AuthMethod(_Wire):
    """No ``type``: the agent authenticates itself (call ``authenticate``); ``terminal``:
    run the agent again interactively with ``args``/``env`` (never ``authenticate``)."""

    id: str
    name: str
    description: str | UnsetType | None = UNSET
    type: str | UnsetType = UNSET
    args: tuple[str, ...] | UnsetType = UNSET
    env: dict[str, str] | UnsetType = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class InitializeResult(_Wire):
    """Everything but ``protocolVersion`` may be absent (defaults: nothing supported)."""

    protocol_version: int
    agent_capabilities: AgentCapabilities | UnsetType = UNSET
    auth_methods: tuple[AuthMethod, ...] | UnsetType = UNSET
    agent_info: Implementation | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")

    def capabilities(self) -> AgentCapabilities:
        caps = self.agent_capabilities
        return caps if isinstance(caps, AgentCapabilities) else AgentCapabilities()

    def methods(self) -> tuple[AuthMethod, ...]:
        return self.auth_methods if isinstance(self.auth_methods, tuple) else ()


class AuthenticateParams(_Wire):
    method_id: str
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class Empty(_Wire):
    """``{}``: the result of authenticate, set_mode, cancel-like calls, fs writes, kill …"""

    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


# ---- sessions -------------------------------------------------------------------------------


class SessionMode(_Wire):
    id: str
    name: str
    description: str | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class SessionModeState(_Wire):
    current_mode_id: str
    available_modes: tuple[SessionMode, ...] = ()
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class NewSessionParams(_Wire):
    cwd: str
    mcp_servers: tuple[dict[str, Any], ...] = ()
    """Always sent, possibly empty: both SDK agents refuse a session/new without it."""
    additional_directories: tuple[str, ...] | UnsetType = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class NewSessionResult(_Wire):
    session_id: str
    modes: SessionModeState | UnsetType | None = UNSET
    config_options: tuple[ConfigOption, ...] | UnsetType | None = UNSET
    models: Any = UNSET
    """Removed from the schema (June 2026); older agents still send it: tolerated, unused."""
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class LoadSessionParams(_Wire):
    session_id: str
    cwd: str
    mcp_servers: tuple[dict[str, Any], ...] = ()
    additional_directories: tuple[str, ...] | UnsetType = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class LoadSessionResult(_Wire):
    modes: SessionModeState | UnsetType | None = UNSET
    config_options: tuple[ConfigOption, ...] | UnsetType | None = UNSET
    models: Any = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class SessionIdParams(_Wire):
    """``session/cancel`` and ``session/close`` (and ``session/delete``)."""

    session_id: str
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class PromptParams(_Wire):
    session_id: str
    prompt: tuple[ContentBlock, ...]
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


class PromptResult(_Wire):
    stop_reason: str
    usage: dict[str, Any] | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class SetModeParams(_Wire):
    session_id: str
    mode_id: str
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class SetConfigOptionParams(_Wire):
    """A select's value id, or ``type: "boolean"`` with a boolean value."""

    session_id: str
    config_id: str
    value: str | bool
    type: str | UnsetType = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class SetConfigOptionResult(_Wire):
    config_options: tuple[ConfigOption, ...] = ()
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class CancelRequestParams(_Wire):
    """``$/cancel_request``: either side withdraws one of its own requests."""

    request_id: int | str | None


# ---- reverse requests (agent → client) ---------------------------------------------------------

PermissionKind = Literal["allow_once", "allow_always", "reject_once", "reject_always"]


class PermissionOption(_Wire):
    option_id: str
    name: str
    kind: PermissionKind
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class RequestPermissionParams(_Wire):
    session_id: str
    tool_call: ToolCallFields
    options: tuple[PermissionOption, ...]
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class Selected(_Wire, tag_field="outcome", tag="selected"):
    option_id: str
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class Cancelled(_Wire, tag_field="outcome", tag="cancelled"):
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


PermissionOutcome = Selected | Cancelled


class RequestPermissionResult(_Wire):
    outcome: PermissionOutcome
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class ElicitationParams(_Wire):
    """``elicitation/create``: ``mode`` form (``requestedSchema``) or url (``url``,
    ``elicitationId``), scoped to a session (``sessionId`` [+ ``toolCallId``]) or a request."""

    message: str
    mode: str
    session_id: str | UnsetType = UNSET
    tool_call_id: str | UnsetType = UNSET
    request_id: int | str | UnsetType | None = UNSET
    requested_schema: dict[str, Any] | UnsetType = UNSET
    elicitation_id: str | UnsetType = UNSET
    url: str | UnsetType = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


ElicitationValue = str | int | float | bool | list[str]


class ElicitationResult(_Wire):
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, ElicitationValue] | UnsetType = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class ElicitationComplete(_Wire):
    elicitation_id: str
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class ReadTextFileParams(_Wire):
    session_id: str
    path: str
    line: int | UnsetType | None = UNSET
    """1-based first line."""
    limit: int | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class ReadTextFileResult(_Wire):
    content: str
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class WriteTextFileParams(_Wire):
    session_id: str
    path: str
    content: str
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class EnvVariable(_Wire):
    name: str
    value: str


class CreateTerminalParams(_Wire):
    session_id: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[EnvVariable, ...] = ()
    cwd: str | UnsetType | None = UNSET
    output_byte_limit: int | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class CreateTerminalResult(_Wire):
    terminal_id: str
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class TerminalParams(_Wire):
    """``terminal/output``, ``wait_for_exit``, ``kill`` and ``release``."""

    session_id: str
    terminal_id: str
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class TerminalExitStatus(_Wire):
    """Both members always sent: ``{"exitCode": 3, "signal": null}``."""

    exit_code: int | None = None
    signal: str | None = None
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class TerminalOutputResult(_Wire):
    output: str
    truncated: bool
    exit_status: TerminalExitStatus | UnsetType | None = UNSET
    """Only once the command exited."""
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


WaitForExitResult = TerminalExitStatus
"""``terminal/wait_for_exit`` answers the exit status *flat*, not wrapped."""


# ---- method tables ----------------------------------------------------------------------------

INITIALIZE = "initialize"
AUTHENTICATE = "authenticate"
SESSION_NEW = "session/new"
SESSION_LOAD = "session/load"
SESSION_RESUME = "session/resume"
SESSION_CLOSE = "session/close"
SESSION_PROMPT = "session/prompt"
SESSION_CANCEL = "session/cancel"
SESSION_SET_MODE = "session/set_mode"
SESSION_SET_CONFIG = "session/set_config_option"
SESSION_UPDATE = "session/update"
REQUEST_PERMISSION = "session/request_permission"
ELICITATION_CREATE = "elicitation/create"
ELICITATION_COMPLETE = "elicitation/complete"
FS_READ = "fs/read_text_file"
FS_WRITE = "fs/write_text_file"
TERMINAL_CREATE = "terminal/create"
TERMINAL_OUTPUT = "terminal/output"
TERMINAL_WAIT = "terminal/wait_for_exit"
TERMINAL_KILL = "terminal/kill"
TERMINAL_RELEASE = "terminal/release"
CANCEL_REQUEST = "$/cancel_request"

CLIENT_REQUESTS: dict[str, type] = {
    REQUEST_PERMISSION: RequestPermissionParams,
    ELICITATION_CREATE: ElicitationParams,
    FS_READ: ReadTextFileParams,
    FS_WRITE: WriteTextFileParams,
    TERMINAL_CREATE: CreateTerminalParams,
    TERMINAL_OUTPUT: TerminalParams,
    TERMINAL_WAIT: TerminalParams,
    TERMINAL_KILL: TerminalParams,
    TERMINAL_RELEASE: TerminalParams,
}
"""Agent → client requests: method → params type (the client's side of the schema)."""

CLIENT_NOTIFICATIONS: dict[str, type] = {
    SESSION_UPDATE: SessionNotification,
    ELICITATION_COMPLETE: ElicitationComplete,
    CANCEL_REQUEST: CancelRequestParams,
}

AGENT_REQUESTS: dict[str, type] = {
    INITIALIZE: InitializeParams,
    AUTHENTICATE: AuthenticateParams,
    SESSION_NEW: NewSessionParams,
    SESSION_LOAD: LoadSessionParams,
    SESSION_RESUME: LoadSessionParams,
    SESSION_CLOSE: SessionIdParams,
    SESSION_PROMPT: PromptParams,
    SESSION_SET_MODE: SetModeParams,
    SESSION_SET_CONFIG: SetConfigOptionParams,
}
"""Client → agent requests: method → params type (the agent's side of the schema)."""

AGENT_NOTIFICATIONS: dict[str, type] = {
    SESSION_CANCEL: SessionIdParams,
    CANCEL_REQUEST: CancelRequestParams,
}

AGENT_RESULTS: dict[str, type] = {
    INITIALIZE: InitializeResult,
    AUTHENTICATE: Empty,
    SESSION_NEW: NewSessionResult,
    SESSION_LOAD: LoadSessionResult,
    SESSION_RESUME: LoadSessionResult,
    SESSION_CLOSE: Empty,
    SESSION_PROMPT: PromptResult,
    SESSION_SET_MODE: Empty,
    SESSION_SET_CONFIG: SetConfigOptionResult,
}
"""What the agent answers each client request with."""

CLIENT_RESULTS: dict[str, type] = {
    REQUEST_PERMISSION: RequestPermissionResult,
    ELICITATION_CREATE: ElicitationResult,
    FS_READ: ReadTextFileResult,
    FS_WRITE: Empty,
    TERMINAL_CREATE: CreateTerminalResult,
    TERMINAL_OUTPUT: TerminalOutputResult,
    TERMINAL_WAIT: TerminalExitStatus,
    TERMINAL_KILL: Empty,
    TERMINAL_RELEASE: Empty,
}
"""What the client answers each agent request with."""


# ---- the hot path: a whole read of session/update lines in one decode ------------------------


class TextView(_Wire, tag_field="type", tag="text"):
    """A text block as the hot path reads it: the text, and ``_meta`` only to see that a
    block has one (decoded only where present: a chunk with it leaves the inline path)."""

    text: str
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


ContentView = TextView | ImageContent | AudioContent | ResourceLink | EmbeddedResource


class MessageChunkView(_Update, tag="agent_message_chunk"):
    """An ``agent_message_chunk`` as the hot path reads it (``_meta`` as :class:`TextView`'s)."""

    content: ContentView
    message_id: str | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


class ThoughtChunkView(_Update, tag="agent_thought_chunk"):
    content: ContentView
    message_id: str | UnsetType | None = UNSET
    meta: Meta | UnsetType | None = msgspec.field(default=UNSET, name="_meta")


UpdateView = (MessageChunkView | ThoughtChunkView | UserMessageChunk | ToolCall | ToolCallUpdate
              | Plan | AvailableCommandsUpdate | CurrentModeUpdate | ConfigOptionUpdate
              | SessionInfoUpdate | UsageUpdate)
"""The update union of the block decoder: the two chunk kinds (96 % of real traffic) as
narrower views, the rest as themselves; readers treat a view as the frame it views."""


class NotificationView(_Wire):
    session_id: str
    update: UpdateView


class UpdateMessage(_Wire, tag_field="method", tag=SESSION_UPDATE, forbid_unknown_fields=True):
    """One ``session/update`` notification line, decoded with its params in one pass.

    Nothing but ``jsonrpc``, ``method`` and ``params`` is allowed, so a *request*
    named ``session/update`` (an ``id``: a broken peer) or any other odd line makes
    the block go line by line, where JSON-RPC classifies it.
    """

    jsonrpc: Literal["2.0"]
    params: NotificationView


_updates = msgspec.json.Decoder(list[UpdateMessage])
encoder = msgspec.json.Encoder()


def decode_updates(block: bytes) -> list[UpdateMessage]:
    """A JSON array of lines (the kit's block) → notifications, or raise on anything else.

    Raises ``msgspec.ValidationError`` / ``DecodeError`` when any line is not a
    well-formed ``session/update`` of a known kind: the reader then goes line by
    line, and :func:`..frames_lenient.decode_payload` sees the odd one.
    """
    return _updates.decode(block)


class SessionBlock(list):  # type: ignore[type-arg]
    """What a :func:`session_decoder` answers: notifications, every one of ``session_id``.

    Its type is the proof the machine's loop relies on: nothing but
    notifications of its own session, so neither is asked of each line again
    (a read the kit decoded in pieces comes back as a plain list).
    """

    __slots__ = ("session_id",)

    def __init__(self, items: list[Any], session_id: str) -> None:
        super().__init__(items)
        self.session_id = session_id


def session_decoder(session_id: str) -> tuple[type, type, Callable[[bytes], SessionBlock]]:
    """:func:`decode_updates` for one session: its message and notification types and its
    decode.

    The session id is a one-value ``Literal``, so msgspec checks it as it reads
    it (and hands back ``session_id`` itself, no new string); a line of any other
    session fails the block, and the reader goes line by line, where the
    machine reports it.  The message type is an :class:`UpdateMessage`.
    """

    note = msgspec.defstruct("SessionNotificationView",
                             [("session_id", Literal[session_id])],  # type: ignore[valid-type]
                             bases=(NotificationView,))
    message = msgspec.defstruct("SessionUpdateMessage", [("params", note)],
                                bases=(UpdateMessage,), tag=SESSION_UPDATE)
    decode = msgspec.json.Decoder(list[message]).decode  # type: ignore[valid-type]

    def decode_block(block: bytes) -> SessionBlock:
        return SessionBlock(decode(block), session_id)

    return message, note, decode_block


def encode(value: Any) -> bytes:
    return encoder.encode(value)
