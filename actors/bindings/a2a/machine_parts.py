"""A2A parts of either spelling as one view, and the CAP events a data part can carry.

Pure helpers of the driver machine (``machine.py``): what kind of part this is
(text, data or file) whatever its spelling, the CAP core event a CAP data part
holds (``frames.cap_kind``), and the bounded text kept of input that maps to
nothing, so a log entry never grows with a hostile peer's frame.
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec
from msgspec import UNSET

from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.events.kinds import AGENT_EVENTS, AgentRaw, AnyEvent, CapError, Event

BINDING = "a2a"
RAW_CAP = 4096
"""Characters of unusable input kept in an ``agent.raw`` / ``cap.error`` (the rest is counted)."""

TEXT, DATA, FILE, EMPTY = range(4)
_AGENT_KINDS = frozenset(t.__struct_config__.tag for t in AGENT_EVENTS)
_AGENT_ROLES = frozenset({"agent", f.v1.ROLE_AGENT})


def is_agent(role: str) -> bool:
    return role in _AGENT_ROLES


def part_view(part: Any) -> tuple[int, Any]:
    """(TEXT, str) | (DATA, value) | (FILE, (uri, b64, name, mime)) | (EMPTY, None)."""
    kind = type(part)
    if kind is f.v1.Part:
        if part.text is not None:
            return TEXT, part.text
        if part.data is not UNSET:
            return DATA, part.data
        if part.raw is not None or part.url is not None:
            return FILE, (part.url, part.raw, part.filename, part.media_type)
        return EMPTY, None
    if kind is f.v03.TextPart:
        return TEXT, part.text
    if kind is f.v03.DataPart:
        return DATA, part.data
    if kind is f.v03.FilePart:
        file = part.file
        return FILE, (file.uri, file.data_b64, file.name, file.mime_type)
    return EMPTY, None


def part_cap_kind(part: Any, data: Any) -> str | None:
    return f.cap_kind(data, part.metadata, part.meta)


def capped(text: str) -> tuple[str, int]:
    if len(text) <= RAW_CAP:
        return text, 0
    return text[:RAW_CAP], len(text) - RAW_CAP


def raw(reason: str, text: str) -> AgentRaw:
    kept, dropped = capped(text)
    return AgentRaw(binding=BINDING, reason=reason, text=kept, truncated=dropped)


def json_text(value: Any) -> str:
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, OverflowError, msgspec.EncodeError):
        return repr(value)


def cap_event(kind: str, data: Any) -> list[Event]:
    """The CAP event a CAP data part carries; a typed error (and the part, kept) if it is not one.

    Only agent → orchestrator kinds are accepted: a peer cannot make trio-cap log a
    ``permission.decided`` or a ``cap.session.config`` as if it were its own.
    Numbers that came back as floats (v1 data goes through ``google.protobuf.Value``)
    are accepted where the field is an integer and the value whole.
    """
    if kind not in _AGENT_KINDS:
        return [raw("a2a_cap_part_not_agent_event", json_text(data))]
    body = dict(data) if isinstance(data, dict) else {}
    body["kind"] = kind
    try:
        event = msgspec.convert(body, AnyEvent, strict=False)
    except (msgspec.ValidationError, RecursionError) as exc:
        text, _ = capped(json_text(data))
        return [CapError(code="parse_failed", message=f"A2A data part {kind}: {exc}",
                         details={"part": text}),
                raw("a2a_cap_part_invalid", json_text(data))]
    return [event]


def file_size(b64: str | None) -> int:
    if not b64:
        return 0
    try:
        return len(base64.b64decode(b64, validate=False))
    except (ValueError, TypeError):
        return 0
