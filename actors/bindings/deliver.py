"""The one loop from a machine's outputs to the session actor's inbox.

Every binding's shell calls a :class:`Deliverer` with whatever its machine
(or brain) returned for one step, so the rules of delivery are the same for
all of them:

* all events of one step travel as **one** :class:`AgentBatch` (one inbox
  message and, downstream, one log append: DESIGN §3.6, batch at every hop);
* :class:`TurnEnded` and :class:`AgentGone` are forwarded **in order**: the
  events before them are flushed first, so a turn's last text is logged
  before the turn ends and a crash report is logged before the session fails;
* :class:`ToAgent` bytes go to the ``write`` callback at once, in order (they
  do not split the batch: the agent and the inbox are different places);
* :class:`KillAgent` flushes the events before it (its reason is in them)
  then calls ``kill``.

With a :class:`~trio_cap.actors.recording.Recorder` (``--record``), the step's
``received`` frame.in leads its first batch and each ToAgent write is logged as
a frame.out at its place among the step's events (docs/architecture.md,
"Recording a binding").

A machine may use its own ToAgent-shaped class (any value with a ``data``
attribute of bytes); anything else that is not an event is a bug in the
machine and raises ``TypeError`` at once rather than being dropped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import trio

from trio_cap.actors.bindings.base import AgentBatch, AgentGone, KillAgent, ToAgent, TurnEnded
from trio_cap.actors.recording import Recorder
from trio_cap.events.kinds import Event

Write = Callable[[bytes], Awaitable[Any]]
Kill = Callable[[str], Awaitable[Any]]

_EVENT, _FORWARD, _KILL, _WRITE = range(4)
_ROUTES: dict[type, int] = {TurnEnded: _FORWARD, AgentGone: _FORWARD, KillAgent: _KILL,
                            ToAgent: _WRITE}
"""Output type → what to do with it, learned once per type: this loop runs for every
event of every binding, and a dict lookup costs less than a chain of isinstance calls."""


def _classify(item: object) -> int:
    kind = type(item)
    if isinstance(item, Event):
        route = _EVENT
    elif isinstance(item, TurnEnded | AgentGone):
        route = _FORWARD
    elif isinstance(item, KillAgent):
        route = _KILL
    elif isinstance(getattr(item, "data", None), bytes):
        route = _WRITE  # a machine's own ToAgent-shaped class
    else:
        raise TypeError(f"a machine returned {item!r}, which is not an output")
    _ROUTES[kind] = route
    return route


class Deliverer:
    """Batches one step's outputs into the session inbox; see the module rules."""

    def __init__(self, inbox: trio.MemorySendChannel[Any], *, write: Write | None = None,
                 kill: Kill | None = None, recorder: Recorder | None = None) -> None:
        self.inbox = inbox
        self._write = write
        self._kill = kill
        self.recorder = recorder

    async def __call__(self, outputs: Iterable[object], received: Event | None = None) -> None:
        """Deliver one step; ``received`` is the step's recorded input (a frame.in), if any."""
        events: list[Event] = [] if received is None else [received]
        routes = _ROUTES
        for item in outputs:
            route = routes.get(type(item))
            if route is None:
                route = _classify(item)
            if route == _EVENT:
                events.append(item)  # type: ignore[arg-type]
                continue
            if route != _WRITE and events:  # a turn end, exit or kill comes after its events
                await self.inbox.send(AgentBatch(events))
                events = []
            if route == _FORWARD:
                await self.inbox.send(item)
            elif route == _KILL:
                if self._kill is None:
                    raise TypeError(f"{item!r}: this shell cannot end its agent")
                await self._kill(item.reason)  # type: ignore[attr-defined]
            else:
                if self._write is None:
                    raise TypeError(f"{type(item).__name__}: this shell has no agent to write to")
                if self.recorder is not None:
                    events.append(self.recorder.out_event(item.data))  # type: ignore[attr-defined]
                await self._write(item.data)  # type: ignore[attr-defined]
        if events:
            await self.inbox.send(AgentBatch(events))

    async def events(self, events: list[Event]) -> None:
        """Deliver events the shell made itself (stderr, for instance) as one batch."""
        if events:
            await self.inbox.send(AgentBatch(events))
