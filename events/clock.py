"""Injected time.  Everything that stamps an event asks a Clock, never ``time``
directly, so a run can be reproduced byte for byte with a deterministic one."""

from __future__ import annotations

import time
from typing import Protocol

import attrs


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the Unix epoch."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()


@attrs.define
class StepClock:
    """Deterministic: starts at ``start`` and advances ``step`` seconds per reading."""

    start: float = 1_700_000_000.0
    step: float = 0.001
    _readings: int = 0

    def now(self) -> float:
        value = self.start + self._readings * self.step
        self._readings += 1
        return value
