"""How long to wait out a rate limit: what the agent's error said, else the fleet's backoff.

Agents report the wait in their own shapes (a Retry-After header's seconds, Claude
Code's ``resetsAt`` epoch, Gemini's ``retryDelay`` "30s"); each binding passes them on
in the ``cap.error``'s ``details`` untouched, so this is the one place that reads them.
Pure: the time of the error comes in as an argument.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from trio_cap.actors.fleet.model import RateLimit

_SECONDS = ("retry_after", "retry_after_s", "retryAfter", "retry-after")
_MILLIS = ("retry_after_ms", "retryAfterMs", "retry-after-ms")
_EPOCH = ("resetsAt", "resets_at", "reset_at", "resetAt")
_DURATION = re.compile(r"^\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>ms|s)?\s*$")


def retry_after(details: Mapping[str, Any] | None, at: float | None) -> float | None:
    """Seconds to wait from ``at`` (the error's log time), or None when nothing says."""
    if not details:
        return None
    for keys, scale in ((_SECONDS, 1.0), (_MILLIS, 0.001)):
        for key in keys:
            if (n := _number(details.get(key))) is not None:
                return max(0.0, n * scale)
    for key in _EPOCH:
        if (n := _number(details.get(key))) is not None and at is not None:
            epoch = n / 1000 if n > 1e12 else n  # milliseconds since the epoch
            return max(0.0, epoch - at)
    delay = details.get("retryDelay")
    if isinstance(delay, str) and (m := _DURATION.match(delay)):
        return float(m["n"]) / (1000 if m["unit"] == "ms" else 1)
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def next_delay(policy: RateLimit, attempt: int, said: float | None,
               last: float | None) -> float:
    """The wait for the ``attempt``-th rate limit in a row: the first honours what the
    agent said (else ``backoff_s``); each repeat waits at least twice the last; never more
    than ``max_backoff_s`` unless the agent said so, never less than it said."""
    base = said if said is not None else policy.backoff_s
    if attempt > 1 and last is not None:
        base = max(base, 2 * last)
    return max(min(base, policy.max_backoff_s), said or 0.0)
