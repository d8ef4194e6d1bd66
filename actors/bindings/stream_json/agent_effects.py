"""What the agent-side machine asks its shell to do, and the per-turn state it keeps.

Effects are plain values, carried out in order by the shell (or by a test
harness): that list *is* the machine's whole interface to the world.
"""

from __future__ import annotations

from typing import Any

import attrs

from trio_cap.actors.bindings.stream_json import frames as f
from trio_cap.events.kinds import Event, Usage

# ---- effects ---------------------------------------------------------------------------


@attrs.frozen
class Send:
    data: bytes


@attrs.frozen
class Record:
    """Append ``events`` to the log, then pass the envelopes to ``logged(envs, after)``."""

    events: tuple[Event, ...]
    after: str | None = None


@attrs.frozen
class Deliver:
    """Frames for the core (already recorded)."""

    frames: tuple[Event, ...]


@attrs.frozen
class SetModel:
    model: str | None


@attrs.frozen
class ReadTranscript:
    """Read the session's log and call ``transcript_ready(envs, artifact_id)``."""

    artifact_id: str


@attrs.frozen
class Finish:
    exit_code: int = 0


@attrs.frozen
class Note:
    """A line for stderr: something the client did that we ignored."""

    text: str


Effect = Send | Record | Deliver | SetModel | ReadTranscript | Finish | Note


# ---- per-turn state ------------------------------------------------------------------------


@attrs.define
class Call:
    """A tool call of the current turn: the brain's input and Claude Code's shape of it."""

    tool_use_id: str
    name: str
    intent: dict[str, Any]
    wire: dict[str, Any]


@attrs.define
class Prompt:
    """A ``can_use_tool`` request waiting on the client (a permission or an ask)."""

    request_id: str
    kind: str  # "permission" | "ask"
    ref: str  # req_id | ask_id
    call: Call
    question: str = ""


@attrs.define
class Turn:
    """What one turn's ``result`` needs, gathered while it runs."""

    user_uuid: str | None
    cause: int | None = None
    calls: dict[str, Call] = attrs.field(factory=dict)
    last_call: Call | None = None
    denials: list[f.PermissionDenial] = attrs.field(factory=list)
    deny_messages: dict[str, str] = attrs.field(factory=dict)
    errors: list[str] = attrs.field(factory=list)
    usage: Usage | None = None
    round_trips: int = 1
    interrupted: bool = False
    aborted_tools: bool = False
    refused: str | None = None
