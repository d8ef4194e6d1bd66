"""Which prompts are running, and which of them a ``result`` ends.

Claude Code merges prompts queued mid-turn into one turn, names every prompt
a ``result`` closes (``user_message_uuids``) and has shipped a bug that sends
a turn's ``result`` twice.  This ledger turns that into exact turn ends:
each prompt we sent ends once, a result that closes nothing running is a
duplicate, and an agent that names no uuids ends the oldest running prompt.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from trio_cap.actors.bindings.stream_json import frames as f
from trio_cap.events.kinds import StopReason

_STOP_REASONS: frozenset[str] = frozenset({"end_turn", "max_tokens", "tool_use", "stop_sequence"})


class Turns:
    def __init__(self) -> None:
        self.pending: deque[str] = deque()  # prompt uuids still running, oldest first
        self.sent: set[str] = set()
        self.interrupting = False
        self._last_key: tuple[Any, ...] | None = None
        self._last_uuid: str | None = None

    def prompt(self, uuid: str) -> None:
        self.pending.append(uuid)
        self.sent.add(uuid)

    def interrupt(self) -> bool:
        """Whether an interrupt should go out now (a turn runs, none was sent for it)."""
        if not self.pending or self.interrupting:
            return False
        self.interrupting = True
        return True

    def close(self, frame: f.Result) -> list[str]:
        """The prompts this result ends, now no longer running (empty: a duplicate)."""
        live = self._closes(frame)
        for uuid in live:
            self.pending.remove(uuid)
        if live:
            self._last_key, self._last_uuid = _result_key(frame), frame.uuid
        return live

    def stop_reason(self, frame: f.Result) -> StopReason:
        """How the turn ended: cancelled (our interrupt), error, or the model's reason."""
        aborted = (frame.subtype == "error_during_execution"
                   or (frame.terminal_reason or "").startswith("aborted"))
        if self.interrupting and aborted:
            return "cancelled"
        if frame.is_error or frame.subtype != "success":
            return "error"
        return frame.stop_reason if frame.stop_reason in _STOP_REASONS else "end_turn"  # type: ignore[return-value]

    def idle(self) -> bool:
        """No prompt runs any more (and the interrupt, if any, is spent)."""
        if self.pending:
            return False
        self.interrupting = False
        return True

    def _closes(self, frame: f.Result) -> list[str]:
        covered = list(frame.user_message_uuids or ())
        if not covered and frame.user_message_uuid:
            covered = [frame.user_message_uuid]
        ours = [u for u in covered if u in self.sent]
        if ours:
            return [u for u in dict.fromkeys(ours) if u in self.pending]
        # No usable uuids (an older CLI, or an agent that ignores them): the oldest
        # running turn — unless this is the previous result repeated.
        if not self.pending or self._repeats_last(frame):
            return []
        return [self.pending[0]]

    def _repeats_last(self, frame: f.Result) -> bool:
        if frame.uuid is not None and frame.uuid == self._last_uuid:
            return True
        return _result_key(frame) == self._last_key


def _result_key(frame: f.Result) -> tuple[Any, ...]:
    return (frame.subtype, frame.total_cost_usd, frame.duration_ms, frame.num_turns,
            frame.result)
