"""Injected id sources, so a replayed run can reproduce every id it made."""

from __future__ import annotations

import itertools
import os
import time
from typing import Protocol

import attrs


class IdSource(Protocol):
    def new(self, prefix: str) -> str:
        """A fresh id such as ``sess-01HF…`` or ``sess-1``."""
        ...


_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


class RandomIds:
    """Time-ordered random ids: sortable in log listings, unique across runs.

    A millisecond stamp and 40 random bits, made monotonic as ULIDs are: an id made in the
    same millisecond as the last one takes the last one's random part plus one, so ids of
    one source never repeat (thousands of sessions start within a millisecond; 24 random
    bits once gave two of them one id) and still sort in the order they were made."""

    def __init__(self) -> None:
        self._last = (0, 0)

    def new(self, prefix: str) -> str:
        stamp = int(time.time() * 1000)
        last_stamp, last_rand = self._last
        if stamp <= last_stamp:
            stamp, rand = last_stamp, last_rand + 1
        else:
            rand = int.from_bytes(os.urandom(5), "big") >> 1  # room to count up
        self._last = (stamp, rand)
        return f"{prefix}-{_b32(stamp, 8)}{_b32(rand, 8)}"


def _b32(value: int, width: int) -> str:
    out = []
    for _ in range(width):
        value, rem = divmod(value, 32)
        out.append(_ALPHABET[rem])
    return "".join(reversed(out))


@attrs.define
class SequentialIds:
    """Deterministic: ``sess-1``, ``sess-2`` … per prefix."""

    _counters: dict[str, itertools.count] = attrs.field(factory=dict)

    def new(self, prefix: str) -> str:
        counter = self._counters.setdefault(prefix, itertools.count(1))
        return f"{prefix}-{next(counter)}"


def run_id() -> str:
    """Name of a run's default log file: local time first so `ls` sorts runs."""
    rand = int.from_bytes(os.urandom(3), "big")
    return time.strftime("%Y%m%d-%H%M%S") + f"-{_b32(rand, 4)}"
