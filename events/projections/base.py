"""Projections are folds over envelopes: ``apply(state, envelope) -> state``.

A fold owns its state: ``apply`` may update it in place and returns it.  It
reads nothing but the envelope (no clock, no I/O, no randomness), so the same
events always fold to an equal state — which is what makes a projection
rebuilt from the file equal to the one built live.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import Event

S = TypeVar("S")
Handler = Callable[[Any, Envelope], None]


class Projection(Generic[S]):
    """Dispatches each event type to a handler; unknown types pass through."""

    name: str = ""
    handlers: dict[type[Event], Handler] = {}

    def initial(self) -> S:
        raise NotImplementedError

    def apply(self, state: S, env: Envelope) -> S:
        handler = self.handlers.get(type(env.event))
        if handler is not None:
            handler(state, env)
        return state
