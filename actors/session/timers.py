"""Turn and idle timeouts, as rules with no clock of their own.

An agent that hangs mid-turn must not hold its session (and ``cap run``)
forever, but only the session actor knows when a turn runs and when the agent
last spoke.  So the actor reports what it sees (:meth:`TurnTimer.observe`)
with the time read from its injected clock, asks when to wake up next
(:meth:`TurnTimer.deadline`) and, when woken, what expired
(:meth:`TurnTimer.expire`).  Nothing here sleeps or reads the time, so the
rules are tested with plain numbers and replayed exactly.

Rules:

* a turn runs from the moment a turn is in flight until none is; when the
  oldest turn in flight changes (queued input), the next turn starts afresh;
* the *turn timeout* bounds a turn's total time, waits on a human included:
  it is the owner's ceiling on one turn;
* the *idle timeout* bounds the agent's silence during a turn: any event from
  the agent restarts it; it is paused while the session waits on a human
  (``input_required``: the agent is waiting on us, not hung) and restarts
  when the session resumes;
* ``None`` or ``0`` turns a timeout off;
* the first expiry in a turn is *soft*: the shell logs a ``cap.error``
  (``turn_timeout`` / ``idle_timeout``) and sends CAP cancel; if the turn has
  not ended ``grace`` seconds later, the same timeout expires again as *hard*:
  the shell ends the connection (and with it the agent's process group);
  nothing expires after that.

Transition table (``T`` = turn timeout, ``I`` = idle timeout, ``G`` = grace)::

    state        event                          next        output of expire()
    idle         observe(turn=k)                running     -
    running      observe(activity)              running     - (idle clock restarts)
    running      observe(waiting=True)          waiting     - (idle clock paused)
    waiting      observe(waiting=False)         running     - (idle clock restarts)
    running      now >= start+T or last+I       fired       soft Expired
    waiting      now >= start+T                 fired       soft Expired
    fired        now >= fired_at+G              gave_up     hard Expired
    any          observe(turn=None)             idle        -
    any          observe(turn=k' != k)          running     - (a new turn)
"""

from __future__ import annotations

import math
from typing import Literal

import attrs

TimeoutCode = Literal["turn_timeout", "idle_timeout"]

DEFAULT_GRACE = 5.0
"""Seconds the agent gets to end a cancelled turn before the connection is ended."""


def _on(value: float | None) -> float | None:
    return value if value is not None and value > 0 else None


@attrs.frozen
class Timeouts:
    """A session's time limits in seconds; ``None`` or ``0`` means no limit."""

    turn: float | None = None
    idle: float | None = None
    grace: float = DEFAULT_GRACE

    @property
    def enabled(self) -> bool:
        return _on(self.turn) is not None or _on(self.idle) is not None


@attrs.frozen
class Expired:
    code: TimeoutCode
    message: str
    hard: bool
    """True when a cancelled turn outlived the grace: the connection must be ended."""


class TurnTimer:
    def __init__(self, timeouts: Timeouts) -> None:
        self.timeouts = timeouts
        self._turn_limit = _on(timeouts.turn)
        self._idle_limit = _on(timeouts.idle)
        self._turn: int | None = None
        self._started = 0.0
        self._last = 0.0
        self._waiting = False
        self._fired: Expired | None = None
        self._fired_at = 0.0
        self._gave_up = False

    def observe(self, now: float, *, turn: int | None, waiting: bool, activity: bool) -> None:
        """What the actor saw at ``now``: the turn in flight (None: none), whether the session
        waits on a human, and whether the agent said anything since the last call."""
        if turn is None:
            self._turn = None
            return
        if turn != self._turn:
            self._turn = turn
            self._started = self._last = now
            self._waiting = waiting
            self._fired = None
            self._gave_up = False
            return
        if activity:
            self._last = now
        if waiting != self._waiting:
            self._waiting = waiting
            if not waiting:
                self._last = now

    def deadline(self) -> float | None:
        """When :meth:`expire` may next return something; None when nothing can expire."""
        if self._turn is None or self._gave_up:
            return None
        if self._fired is not None:
            return self._fired_at + self.timeouts.grace
        candidates = []
        if self._turn_limit is not None:
            candidates.append(self._started + self._turn_limit)
        if self._idle_limit is not None and not self._waiting:
            candidates.append(self._last + self._idle_limit)
        return min(candidates) if candidates else None

    def expire(self, now: float) -> Expired | None:
        """What has expired at ``now``, once each: soft first, then hard after the grace."""
        deadline = self.deadline()
        if deadline is None or now < deadline:
            return None
        if self._fired is not None:
            self._gave_up = True
            grace = _seconds(self.timeouts.grace)
            return attrs.evolve(
                self._fired,
                hard=True,
                message=f"{self._fired.message}; the agent did not end the turn within "
                f"{grace} of the cancel, so its connection was closed",
            )
        turn_limit, idle_limit = self._turn_limit, self._idle_limit
        if turn_limit is not None and now >= self._started + turn_limit:
            fired = Expired(
                "turn_timeout",
                f"turn {self._turn} ran longer than the turn timeout of {_seconds(turn_limit)}",
                hard=False,
            )
        else:
            assert idle_limit is not None
            fired = Expired(
                "idle_timeout",
                f"no event from the agent for {_seconds(idle_limit)} during turn {self._turn} "
                "(the idle timeout)",
                hard=False,
            )
        self._fired, self._fired_at = fired, now
        return fired


def _seconds(value: float) -> str:
    if math.isfinite(value) and value == int(value):
        return f"{int(value)} s"
    return f"{value:g} s"
