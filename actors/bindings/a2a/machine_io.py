"""The driver machine's values: what its shell feeds in, what it carries out, and its books.

Pure data (``machine.py`` is the machine): an exchange is one HTTP request and its
answer, named by the JSON-RPC id of the request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trio_cap.actors.bindings.a2a import frames as f

RESUBSCRIBE_DELAYS = (0.5, 1.0, 2.0)

# ---- what the shell feeds in --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SseData:
    """One SSE event's ``data`` (all its data lines joined), as bytes."""

    request_id: int
    data: bytes


@dataclass(frozen=True, slots=True)
class SseBatch:
    """The data of every SSE event completed by one read (``machine_sse.SseReader.feed``),
    and the stream's last event ID after them (``SseReader.last_id``)."""

    request_id: int
    datas: Sequence[bytes]
    last_event_id: str | None = None


@dataclass(frozen=True, slots=True)
class Body:
    """A whole 2xx ``application/json`` answer (a streaming call may answer so, e.g. errors)."""

    request_id: int
    data: bytes


@dataclass(frozen=True, slots=True)
class HttpStatus:
    """A non-2xx answer; ``body`` is its start, for the message."""

    request_id: int
    status: int
    body: bytes = b""


@dataclass(frozen=True, slots=True)
class Ended:
    """The answer ended cleanly (the SSE stream closed, the body was read)."""

    request_id: int


@dataclass(frozen=True, slots=True)
class Dropped:
    """The exchange failed in transport: no connection, a timeout, a stream cut mid-way."""

    request_id: int
    detail: str
    timeout: bool = False
    responded: bool = False


Incoming = SseBatch | SseData | Body | HttpStatus | Ended | Dropped

# ---- what the shell carries out -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Post:
    """POST ``body`` to ``url`` with the spelling's headers; stream the answer if ``streaming``."""

    request_id: int
    method: str
    body: bytes
    url: str
    spelling: f.Spelling
    streaming: bool
    delay: float = 0.0
    last_event_id: str | None = None
    """For a resubscribe: sent as ``Last-Event-ID`` (a server that honours it resumes after
    that event instead of sending the snapshot; one that does not sends the snapshot)."""


@dataclass(frozen=True, slots=True)
class CloseExchange:
    """Stop reading this exchange's answer (the turn it served is over)."""

    request_id: int


SEND, RESUBSCRIBE, CANCEL, GET = "send", "resubscribe", "cancel", "get"


@dataclass(slots=True)
class Exchange:
    purpose: str
    spelling: f.Spelling
    turn: bool
    """It serves the open turn (its end or failure ends the turn)."""
    got_event: bool = False
    resend: tuple[Any, ...] | None = None
    """(text, data parts, task id) of a send, to repeat it in the other spelling (D17)."""


@dataclass(slots=True)
class ArtifactState:
    count: int = 0
    parts: tuple[Any, ...] = ()
    name: str = ""
    text_bytes: int = 0
    other: list[tuple[int, Any]] = field(default_factory=list)
    call_id: str | None = None
    output: list[str] = field(default_factory=list)
    closed: bool = False
    cap: bool = False
    """It carries CAP data parts: those are its meaning, its text only their rendering."""
    quiet: bool = False
    """Its text repeats what the turn already streamed: not streamed again."""

