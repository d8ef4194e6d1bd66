"""The in-memory backend: the default when an embedding app gives no log."""

from __future__ import annotations

import trio

from trio_cap.events.envelope import Envelope
from trio_cap.events.log.base import EventLog


class MemoryEventLog(EventLog):
    def __init__(self, clock=None) -> None:
        super().__init__(clock)
        self._events: list[Envelope] = []

    async def _store(self, envs: list[Envelope]) -> None:
        self._events.extend(envs)
        self._publish(envs[-1].seq)
        await trio.lowlevel.checkpoint()

    def _read_range(self, from_seq: int, to_seq: int) -> list[Envelope]:
        return self._events[from_seq - 1 : to_seq]
