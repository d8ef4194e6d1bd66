"""A2A wire frames, both spellings and both directions: the one place that knows the shapes.

A2A is in use in two spellings (``../shared/protocols/a2a.md``): the draft one
(v0.3: ``message/stream``, ``kind``-tagged parts, lowercase states) in
:mod:`.frames_v03` and the current one (v1.0: ``SendStreamingMessage``, oneof
wrappers, ``TASK_STATE_*``) in :mod:`.frames_v1`, imported here as ``v03`` and
``v1``; the agent card (either spelling, or a2a-sdk's hybrid) is
:mod:`.frames_card`.  Both the driver (``machine.py``) and the publisher decode
and encode with these Structs, so what one writes the other reads.

The transport is JSON-RPC 2.0 over HTTP; a streaming answer is SSE whose every
``data:`` is one whole JSON-RPC response carrying the request's id.  One
decoder per wire, each a single typed pass over the bytes (the envelope and
its ``result`` together, never decode-then-decode-again):

* :func:`decode_card` — ``/.well-known/agent-card.json`` (or ``agent.json``);
* :func:`decode_stream` — one SSE ``data`` payload in the given spelling;
* :func:`decode_reply` — a plain JSON-RPC response (``tasks/cancel`` …) in the given spelling.

Each raises :class:`FrameError` with a one-line reason; the machine turns it
into a typed ``cap.error`` and keeps the bytes.  Requests are encoded by
``bindings/jsonrpc.py`` (ids, pending map) with the params Structs below.

CAP events that A2A has no part for travel as a *CAP data part*
(CAP core §11.3): a data part whose ``data`` is the CAP event in its CAP wire
form (``{"kind": "cap.ask_user", "ask_id": …}``) and whose ``metadata`` —
A2A's annotation object, CAP's ``_meta`` — has ``"cap.kind"`` naming it
(:func:`cap_part_metadata`).  :func:`cap_kind` reads that and the other
spellings seen in the wild (cap-rs writes ``"_meta": {"cap": {"kind": …}}``
beside the part).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from trio_cap.actors.bindings.a2a import frames_v03 as v03
from trio_cap.actors.bindings.a2a import frames_v1 as v1
from trio_cap.actors.bindings.a2a.frames_card import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    bearer_declared,
    extension,
    interfaces,
)

__all__ = [
    "CAP_EXTENSION",
    "CARD_PATHS",
    "CURRENT",
    "DRAFT",
    "EXTENSIONS_HEADER",
    "METHODS",
    "VERSION_HEADER",
    "AgentCapabilities",
    "AgentCard",
    "AgentExtension",
    "AgentInterface",
    "AgentProvider",
    "AgentSkill",
    "ErrorObject",
    "FrameError",
    "Methods",
    "ReplyV03",
    "ReplyV1",
    "Spelling",
    "StreamV03",
    "StreamV1",
    "bearer_declared",
    "cap_kind",
    "cap_part_metadata",
    "decode_card",
    "decode_reply",
    "decode_stream",
    "decode_stream_batch",
    "draft_state",
    "extension",
    "interfaces",
    "state_class",
    "v03",
    "v1",
    "v1_state",
]

# ---- spellings, methods, headers --------------------------------------------------------

Spelling = Literal["0.3", "1.0"]
DRAFT: Spelling = "0.3"
CURRENT: Spelling = "1.0"

CAP_EXTENSION = "cap-protocol/v1"
"""The extension URI a card declares to say it speaks CAP over A2A (CAP core §6.5, §11.1)."""

CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
"""Tried in this order: v0.3.0 and later, then the older path."""

VERSION_HEADER = "A2A-Version"
EXTENSIONS_HEADER: dict[Spelling, str] = {DRAFT: "X-A2A-Extensions", CURRENT: "A2A-Extensions"}


class Methods(msgspec.Struct, frozen=True):
    send: str
    stream: str
    get: str
    cancel: str
    resubscribe: str


METHODS: dict[Spelling, Methods] = {
    DRAFT: Methods("message/send", "message/stream", "tasks/get", "tasks/cancel",
                   "tasks/resubscribe"),
    CURRENT: Methods("SendMessage", "SendStreamingMessage", "GetTask", "CancelTask",
                     "SubscribeToTask"),
}

# ---- task states --------------------------------------------------------------------------

StateClass = Literal["active", "interrupted", "terminal", "unknown"]

_DRAFT_STATES: dict[str, StateClass] = {
    "submitted": "active", "working": "active",
    "input-required": "interrupted", "auth-required": "interrupted",
    "completed": "terminal", "canceled": "terminal", "failed": "terminal",
    "rejected": "terminal", "unknown": "unknown",
}
_V1_TO_DRAFT = {"TASK_STATE_" + s.upper().replace("-", "_"): s for s in _DRAFT_STATES}
_V1_TO_DRAFT["TASK_STATE_UNSPECIFIED"] = "unknown"
del _V1_TO_DRAFT["TASK_STATE_UNKNOWN"]
_DRAFT_TO_V1 = {d: v for v, d in _V1_TO_DRAFT.items()}


def draft_state(state: str) -> str:
    """Either spelling of a state as the draft's lowercase name (unknown ones pass through)."""
    return _V1_TO_DRAFT.get(state, state)


def v1_state(state: str) -> str:
    """A draft state name as v1's ``TASK_STATE_*`` enum name."""
    return _DRAFT_TO_V1.get(state, "TASK_STATE_UNSPECIFIED")


def state_class(state: str) -> StateClass:
    """active | interrupted (input/auth required: the turn ends) | terminal | unknown."""
    return _DRAFT_STATES.get(_V1_TO_DRAFT.get(state, state), "unknown")


# ---- JSON-RPC envelopes, one typed pass -----------------------------------------------------


class ErrorObject(msgspec.Struct, frozen=True, gc=False):
    """A JSON-RPC error; ``data`` is the peer's (v1: a list of ``@type`` details)."""

    code: int
    message: str = ""
    data: Any = None


class _Envelope(msgspec.Struct, frozen=True, gc=False):
    jsonrpc: str = ""
    id: int | str | None = None


class StreamV1(_Envelope, frozen=True, gc=False):
    result: v1.StreamResponse | None = None
    error: ErrorObject | None = None


class StreamV03(_Envelope, frozen=True, gc=False):
    result: v03.StreamResult | None = None
    error: ErrorObject | None = None


class ReplyV1(_Envelope, frozen=True, gc=False):
    """``CancelTask`` / ``GetTask`` answer with a bare Task."""

    result: v1.Task | None = None
    error: ErrorObject | None = None


class ReplyV03(_Envelope, frozen=True, gc=False):
    """``tasks/cancel`` / ``tasks/get`` answer with a bare Task (``kind`` optional)."""

    result: v03.Task | None = None
    error: ErrorObject | None = None


class FrameError(ValueError):
    """Bytes that are not the frame they should be; the message is one line."""


_card = msgspec.json.Decoder(AgentCard)
_stream = {CURRENT: msgspec.json.Decoder(StreamV1), DRAFT: msgspec.json.Decoder(StreamV03)}
_reply = {CURRENT: msgspec.json.Decoder(ReplyV1), DRAFT: msgspec.json.Decoder(ReplyV03)}


def _decode(decoder: msgspec.json.Decoder, data: bytes | str, what: str) -> Any:
    try:
        return decoder.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise FrameError(f"{what}: {reason}") from None


def decode_card(data: bytes | str) -> AgentCard:
    return _decode(_card, data, "agent card")


def decode_stream(spelling: Spelling, data: bytes | str) -> StreamV1 | StreamV03:
    return _decode(_stream[spelling], data, f"A2A {spelling} stream event")


_batch = {CURRENT: msgspec.json.Decoder(list[StreamV1]),
          DRAFT: msgspec.json.Decoder(list[StreamV03])}


def decode_stream_batch(spelling: Spelling,
                        datas: Sequence[bytes]) -> list[StreamV1 | StreamV03 | FrameError]:
    """Several SSE payloads in one decoder call; a payload that does not decode is its own
    :class:`FrameError` in its place, and the others are decoded all the same."""
    if len(datas) > 1:
        try:
            envs = _batch[spelling].decode(b"[" + b",".join(datas) + b"]")
        except (msgspec.DecodeError, RecursionError):
            envs = None
        if envs is not None and len(envs) == len(datas):
            return envs
    # One is broken, or one holds two values glued by a comma: say which, one by one.
    out: list[StreamV1 | StreamV03 | FrameError] = []
    for data in datas:
        try:
            out.append(decode_stream(spelling, data))
        except FrameError as exc:
            out.append(exc)
    return out


def decode_reply(spelling: Spelling, data: bytes | str) -> ReplyV1 | ReplyV03:
    return _decode(_reply[spelling], data, f"A2A {spelling} reply")


# ---- CAP data parts -------------------------------------------------------------------------

CAP_KIND = "cap.kind"


def cap_part_metadata(kind: str) -> dict[str, Any]:
    """The ``metadata`` of a data part that carries the CAP event ``kind``."""
    return {CAP_KIND: kind}


def cap_kind(data: Any, metadata: dict[str, Any] | None,
             meta: dict[str, Any] | None = None) -> str | None:
    """The CAP kind a data part carries, or None for an ordinary data part.

    Accepted, first match wins: ``metadata["cap.kind"]`` (ours),
    ``metadata["_meta"]["cap.kind"]``, ``_meta.cap.kind`` beside the part (cap-rs,
    also under ``metadata``), then the payload's own ``kind`` when it starts with
    ``cap.``.  Only ``cap.``-prefixed names count.
    """
    for holder in (metadata, (metadata or {}).get("_meta"), meta):
        if isinstance(holder, dict):
            kind = holder.get(CAP_KIND)
            if kind is None and isinstance(holder.get("cap"), dict):
                kind = holder["cap"].get("kind")
            if isinstance(kind, str) and kind.startswith("cap."):
                return kind
    if isinstance(data, dict):
        kind = data.get("kind")
        if isinstance(kind, str) and kind.startswith("cap."):
            return kind
    return None
