"""A per-session budget on stored raw agent output.

Raw output is ``agent.raw`` (unknown frames, stderr), ``cap.pty.raw_bytes``, and the
``cap.error`` ``parse_failed`` events that carry an unreadable line (their text is the
agent's output too: a flood of garbage lines must not get around the budget).

Why: raw output has no CAP meaning and no natural bound; an agent that floods
its stdout with unknown lines would grow the log without limit (200 MB of
output made a 240 MB log).  So the session stores raw output up to a budget
of characters (:data:`DEFAULT_RAW_BUDGET`, 1 MiB), then counts what it drops
instead of storing it: ONE ``session.warning`` (``raw_output_dropped``) marks
the moment the budget ran out, and a second one with the final count is
written when the session ends.  Typed events (text, tool calls, other errors)
are never dropped.  Pure: it sees events, not bytes or time.
"""

from __future__ import annotations

from collections.abc import Sequence

from trio_cap.events.kinds import AgentRaw, CapError, Event, PtyRawBytes, SessionWarning

DEFAULT_RAW_BUDGET = 1 << 20
"""Characters of raw agent output one session stores (1 MiB)."""

WARNING_CODE = "raw_output_dropped"


class RawBudget:
    def __init__(self, budget: int = DEFAULT_RAW_BUDGET) -> None:
        self.budget = max(0, budget)
        self.stored = 0
        self.dropped_events = 0
        self.dropped_chars = 0

    def admit(self, events: Sequence[Event]) -> list[Event]:
        """The events to store: raw ones past the budget are counted and left out."""
        out: list[Event] = []
        for event in events:
            size = _raw_size(event)
            if size is None:
                out.append(event)
                continue
            if self.dropped_events == 0 and self.stored + size <= self.budget:
                self.stored += size
                out.append(event)
                continue
            if self.dropped_events == 0:
                out.append(SessionWarning(
                    code=WARNING_CODE,
                    message=f"raw agent output passed this session's budget of {self.budget} "
                    "characters; further raw lines are counted, not stored",
                ))
            self.dropped_events += 1
            self.dropped_chars += size
        return out

    def final(self) -> list[Event]:
        """The count of what was dropped, for the end of the session (nothing if none was)."""
        if not self.dropped_events:
            return []
        return [SessionWarning(
            code=WARNING_CODE,
            message=f"{self.dropped_events} raw output events ({self.dropped_chars} characters) "
            f"were counted, not stored, past the budget of {self.budget} characters",
        )]


def _raw_size(event: Event) -> int | None:
    kind = type(event)
    if kind is AgentRaw:
        return len(event.text) + 1  # type: ignore[attr-defined]
    if kind is PtyRawBytes:
        return len(event.bytes_b64) + 1  # type: ignore[attr-defined]
    if kind is CapError and event.code == "parse_failed":  # type: ignore[attr-defined]
        raw = (event.details or {}).get("raw")  # type: ignore[attr-defined]
        if isinstance(raw, str):
            return len(raw) + len(event.message) + 1  # type: ignore[attr-defined]
    return None
