"""The contract every binding machine follows, and the outputs all of them share.

A binding is three layers (docs/architecture.md, "The binding kit"): wire
frames, a sans-io *machine*, and a thin Trio *shell*.  This module is the
machine's side of that split, so it imports only ``events/`` and the pure
parts of the standard library: a machine that imports it can still be run,
replayed and fuzzed with no event loop, process, socket, clock or randomness.

Rules every machine keeps (as h11 does):

* input is bytes (``receive_data``; ``receive_eof`` once at the end) or, for
  bindings whose transport already frames messages, decoded frames
  (``receive_frame``); orchestrator → agent frames come in through ``send``;
  time only enters as ``now`` in ``tick``;
* every call returns a list of :data:`Output` values, in the order they must
  take effect; a machine never raises on bad input: broken bytes become
  ``agent.raw`` / ``cap.error`` events;
* ids and clocks are constructor arguments (callables), never read from the
  world.

The shell's side of the contract: write :class:`ToAgent` bytes in order, end
the agent on :class:`KillAgent`, and hand everything else to
``deliver.py``, which batches events into one :class:`AgentBatch` per step
and forwards :class:`TurnEnded` / :class:`AgentGone` to the session inbox.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from trio_cap.events.kinds import Event, StopReason

# ---- _meta keys a binding and the session agree on ---------------------------------

UPDATED_INPUT = "cap.updated_input"
"""``_meta`` key of a ``cap.permission.response`` that allows the call with a rewritten input
(stream-json's ``updatedInput``): the tool runs with that input instead of its own."""

AGENT_RISK = "cap.agent_risk"
"""``_meta`` key of a ``cap.permission.request``: the risk the agent itself claimed, passed
through untouched; the session machine's own rating is the ``risk_level`` it logs."""

REFUSAL_MESSAGE = "cap.message"
"""``_meta`` key of a refusing ``cap.permission.response``: why, in words the model can use."""

DECIDED_BY = "cap.decided_by"
"""``_meta`` key of a ``cap.permission.response``: the policy or person that decided."""

BRIDGED = "cap.bridged"
"""``_meta`` key on a bridge's ``cap.session.ready``: which agent, binding and session it
drives (the driven session's id is the stream to read in the bridge's own log)."""

MEMBER = "cap.member"
"""``_meta`` key of what a fleet face relays (text, tool calls, questions, plan entries):
the fleet member it comes from, so an agent side can name it to its client."""

CALL_ID = "cap.call_id"
"""``_meta`` key of a fleet face's ``cap.permission.request``: the relayed tool call it is
about (members' calls interleave, so the turn's last call need not be its own)."""

RAW_LINE = "script_raw_line"
"""``agent.raw`` reason of a scripted ``raw`` step: the stream-json agent side writes its
text to stdout as one line, verbatim; everywhere else it is only logged."""


# ---- outputs -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AgentBatch:
    """Events decoded from one read (or one machine step): logged together."""

    events: Sequence[Event]


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """The agent finished a turn (CAP has no turn-end event; every binding knows when)."""

    stop_reason: StopReason = "end_turn"


@dataclass(frozen=True, slots=True)
class AgentGone:
    """The agent is no longer there: exited, crashed, disconnected or never answered."""

    reason: str
    exit_code: int | None = None


@dataclass(frozen=True, slots=True)
class ToAgent:
    """Bytes the shell must write to the agent, on the machine's own account."""

    data: bytes


@dataclass(frozen=True, slots=True)
class KillAgent:
    """The machine gives up on the agent (hard cancel): the shell ends its process."""

    reason: str


Output = Event | TurnEnded | AgentGone | ToAgent | KillAgent
"""What a machine returns: events to log, and instructions for its shell."""

Inbound = AgentBatch | TurnEnded | AgentGone
"""What a session actor's inbox receives from its connection."""


# ---- the machine contract ------------------------------------------------------------


class ByteMachine(Protocol):
    """A binding whose transport is a byte stream (stdio pipes, a pseudo-terminal)."""

    def receive_data(self, data: bytes) -> list[Output]:
        """Feed bytes exactly as read; partial frames are kept for the next call."""
        ...

    def receive_eof(self) -> list[Output]:
        """The agent closed its output."""
        ...

    def send(self, frames: Sequence[Event]) -> list[Output]:
        """Orchestrator → agent CAP frames, as outputs (usually :class:`ToAgent`)."""
        ...


class FrameMachine(Protocol):
    """A binding whose transport delivers whole messages (HTTP bodies, SSE events)."""

    def receive_frame(self, frame: object) -> list[Output]:
        """Feed one decoded wire frame."""
        ...

    def send(self, frames: Sequence[Event]) -> list[Output]:
        """Orchestrator → agent CAP frames, as outputs."""
        ...


class Ticking(Protocol):
    """A machine with timers: the shell calls ``tick`` with the injected clock's time."""

    def tick(self, now: float) -> list[Output]:
        ...
