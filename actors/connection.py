"""The contract between a session actor and a binding.

A binding is a :class:`Connector`: ``open(spec, deliver)`` spawns or connects
to the agent and yields a :class:`Connection`.  Inbound frames, already decoded
into CAP core events, are delivered in batches to the session actor's inbox as
:class:`AgentBatch` messages, together with :class:`TurnEnded` (CAP has no
turn-end event, but every binding knows when a turn ends: stream-json's
``result``, ACP's prompt response, the PTY idle pattern) and one final
:class:`AgentGone` when the agent is no longer there.  Outbound CAP frames go
through ``send``; the connection encodes them for its wire.  Leaving the
``open`` context closes the session at the agent and reaps any process.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import attrs
import trio

from trio_cap.actors.ids import IdSource
from trio_cap.events.kinds import CancelScope, Event, SessionConfig


class ConnectError(Exception):
    """The binding could not spawn, connect or handshake; the next binding may be tried."""


@attrs.frozen
class AgentSpec:
    """What a connector needs to start one agent session."""

    name: str
    binding: str
    config: SessionConfig
    argv: tuple[str, ...] = ()
    url: str | None = None
    options: dict[str, Any] = attrs.field(factory=dict)
    """Binding-specific settings (e.g. the inproc brain's script)."""
    ids: IdSource | None = None
    """The orchestrator's id source: a connector that needs ids (agent session ids,
    prompt uuids) takes them from here, so a run with deterministic ids is deterministic
    end to end.  None: the connector makes random ones."""


class Connection(Protocol):
    async def send(self, frames: Sequence[Event]) -> None:
        """Deliver orchestrator → agent frames (config, inject, answers)."""
        ...

    async def cancel(self, scope: CancelScope) -> None:
        """Cancel the current turn (the binding's interrupt) or the whole session."""
        ...


class Connector(Protocol):
    binding: str

    def open(
        self, spec: AgentSpec, deliver: trio.MemorySendChannel[Any]
    ) -> AbstractAsyncContextManager[Connection]:
        """Spawn/connect; raise ConnectError when this binding cannot be had."""
        ...
