"""What the ACP agent-side machine asks its shell to do: plain values, carried out in order.

That list is the machine's whole interface to the world (a test harness can
carry the effects out as well as the Trio shell does).
"""

from __future__ import annotations

from typing import Any

import attrs

from trio_cap.actors.bindings.acp import frames as f
from trio_cap.events.kinds import Event, SessionConfig


@attrs.frozen
class Send:
    """Bytes for stdout (whole lines)."""

    data: bytes


@attrs.frozen
class Record:
    """Append ``events`` to the log in ``stream`` (a session id, or the connection's own)."""

    stream: str | None
    events: tuple[Event, ...]


@attrs.frozen
class Deliver:
    """Frames for one session's core (already recorded)."""

    session_id: str
    frames: tuple[Event, ...]


@attrs.frozen
class StartCore:
    """Start the core of a new (or loaded) session; ``config`` is its first frame, already
    recorded.  Its tools run through the client when ``client`` advertises fs / terminal."""

    session_id: str
    config: SessionConfig
    client: f.ClientCapabilities


@attrs.frozen
class StopCore:
    """End a session's core (``session/close``, stdin closed): its frame channel closes."""

    session_id: str


@attrs.frozen
class ReadHistory:
    """Read ``session_id``'s events from the log and call ``history(request_id, …)``."""

    request_id: Any
    session_id: str
    cwd: str


@attrs.frozen
class ClientError:
    """A reverse request the client refused, or that could not be sent or answered."""

    code: int
    message: str


@attrs.frozen
class Resolve:
    """The answer to a tool host's reverse request ``ticket``: a decoded result or an error."""

    ticket: int
    value: Any


@attrs.frozen
class Finish:
    exit_code: int = 0


@attrs.frozen
class Note:
    """A line for stderr: something the client did that was ignored or refused."""

    text: str


Effect = Send | Record | Deliver | StartCore | StopCore | ReadHistory | Resolve | Finish | Note
