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
    """Time-ordered random ids: sortable in log listings, unique across runs."""

    def new(self, prefix: str) -> str:
        stamp = int(time.time() * 1000)
        rand = int.from_bytes(os.urandom(3), "big")
        return f"{prefix}-{_b32(stamp, 8)}{_b32(rand, 4)}"


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
