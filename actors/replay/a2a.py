"""The A2A driver machine as ``cap replay --check`` runs it: recorded exchanges in, no server.

The A2A shell steps its machine from many tasks (one per HTTP exchange, plus the
session's sends), so it logs every step as the ``frame.in`` leading its batch
(:mod:`..bindings.a2a.connector`, "recording"): first the card it read and what
chose among its interfaces, then each SSE read, body, status, end or transport
failure of an exchange, and each send or cancel the machine took.  This replay
builds the driver from that card (the interface choice is re-made, so a changed
:func:`~..bindings.a2a.machine_card.choose` shows too) and takes the steps in
log order; the requests the machine makes come out as the ``frame.out`` events
the shell logged for them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import msgspec

from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.actors.bindings.a2a.connector import incoming, open_warnings, out_event
from trio_cap.actors.bindings.a2a.machine import A2aDriver, CloseExchange, Post
from trio_cap.actors.bindings.a2a.machine_card import CardRefused, choose
from trio_cap.actors.recording import Recorder
from trio_cap.actors.replay.bindings import signal_outputs
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import Cancel, CapError, Event, FrameIn, FrameOut, SessionConfig


def _card_of(recorded: Sequence[Envelope]) -> FrameIn | None:
    for env in recorded:
        ev = env.event
        if type(ev) is FrameIn and ev.signal == "card" and isinstance(ev.frame, dict):
            return ev
    return None


class A2aReplay:
    """The A2A driver, stepped as the shell stepped it (see the module docstring)."""

    decodes = True
    shell_steps = False

    @staticmethod
    def replayable(recorded: Sequence[Envelope]) -> bool:
        return _card_of(recorded) is not None

    def __init__(self, config: SessionConfig, ids: deque[str],
                 recorded: Sequence[Envelope]) -> None:
        self.recorder = Recorder("a2a", now=lambda: 0.0)
        self.machine: A2aDriver | None = None
        self.step_ids: deque[str] = deque()
        self.queued: deque[Event] = deque()

    def _new_id(self) -> str:
        return self.step_ids.popleft() if self.step_ids else "replay-has-no-more-recorded-ids"

    def open(self) -> list[FrameOut]:
        return []

    def send(self, frames: Sequence[Event]) -> list[FrameOut]:
        self.queued.extend(frames)
        return []  # posted in the step the log shows

    def cancel(self, scope: str) -> list[FrameOut]:
        self.queued.append(Cancel(scope=scope))  # type: ignore[arg-type]
        return []

    def feed(self, frame: FrameIn) -> list[Any]:
        signal = frame.signal
        if signal in ("gone", "turn_ended"):
            return signal_outputs(frame) or []
        if signal == "card":
            return self._open(frame.frame)
        self.step_ids = deque(frame.ids)
        machine = self.machine
        if machine is None:
            return [CapError(code="parse_failed", message="a step before the card")]
        if signal in ("send", "cancel"):
            taken = self.queued.popleft() if self.queued else None
            if taken is None:
                return []  # the session's frame is not in this log: a divergence follows
            outputs = machine.send([taken])
        else:
            fed = incoming(frame)
            outputs = machine.receive_frame(fed) if fed is not None else []
        rec = self.recorder
        return [out_event(rec, o) if type(o) is Post or type(o) is CloseExchange else o
                for o in outputs]

    def _open(self, given: dict[str, Any]) -> list[Any]:
        """The machine from the recorded card, and the warnings the shell logged with it."""
        try:
            card = f.decode_card(msgspec.json.encode(given["card"]))
            choice = choose(card, given["card_url"], mode=given.get("mode", "warn"),
                            token=bool(given.get("token")))
        except (KeyError, f.FrameError, CardRefused) as exc:
            return [CapError(code="parse_failed", message=f"the recorded card: {exc}")]
        self.machine = A2aDriver(choice, new_id=self._new_id,
                                 metadata=given.get("metadata") or {},
                                 max_resubscribes=int(given.get("max_resubscribes", 3)))
        return list(open_warnings(card.name, choice, bool(given.get("token"))))
