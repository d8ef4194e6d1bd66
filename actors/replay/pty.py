"""The PTY settle machine as ``cap replay --check`` runs it: recorded steps in, no terminal.

A PTY session's events depend on *when* bytes arrived and when the timer
fired as much as on the bytes, and the shell steps its machine from three
tasks (reads, the timer, the child's exit) plus the session's sends.  So the
shell logs every step that can change the machine as the ``frame.in`` leading
its batch (:mod:`..bindings.pty.connector`), and this replay takes exactly
those steps in log order: bytes with their time, a timer tick, a send or
cancel (the frame itself was logged before as the session's output and is
queued here until its step), a resize, the child's exit.  A tick that could
not act was not logged: it only moved the machine's clock, so a signal step
first moves the clock to the time it recorded, which is that tick again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from trio_cap.actors.bindings.pty.connector import settings_from_record, settings_record
from trio_cap.actors.bindings.pty.machine import PtyMachine
from trio_cap.actors.recording import Recorder, frame_bytes
from trio_cap.actors.replay.bindings import signal_outputs
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import Event, FrameIn, FrameOut, SessionConfig

MACHINE_KEY = "pty_machine"
"""Key of the frame.out (``frame``) holding the machine's settings, creation time and id."""


def machine_record(recorded: Sequence[Envelope]) -> dict[str, Any] | None:
    for env in recorded:
        ev = env.event
        if type(ev) is FrameOut and isinstance(ev.frame, dict) and MACHINE_KEY in ev.frame:
            given = ev.frame[MACHINE_KEY]
            return given if isinstance(given, dict) else None
    return None


class PtyReplay:
    """The PTY machine, stepped as the shell stepped it (see the module docstring)."""

    decodes = True
    shell_steps = False

    @staticmethod
    def replayable(recorded: Sequence[Envelope]) -> bool:
        return machine_record(recorded) is not None

    def __init__(self, config: SessionConfig, ids: deque[str],
                 recorded: Sequence[Envelope]) -> None:
        self.recorder = Recorder("pty", now=lambda: 0.0)
        given = machine_record(recorded) or {}
        self.settings = settings_from_record(given.get("settings") or {})
        self.now = float(given.get("now") or 0.0)
        self.session_id = given.get("session_id")
        self.step_ids: deque[str] = deque()
        self.machine = PtyMachine(self.settings, new_id=self._new_id, now=self.now,
                                  session_id=self.session_id)
        self.queued: deque[tuple[str, Any]] = deque()

    def _new_id(self, prefix: str) -> str:
        return self.step_ids.popleft() if self.step_ids else "replay-has-no-more-recorded-ids"

    def open(self) -> list[FrameOut]:
        record = {"settings": settings_record(self.settings), "now": self.now,
                  "session_id": self.session_id}
        return [self.recorder.out_event(frame={MACHINE_KEY: record})]

    def send(self, frames: Sequence[Event]) -> list[FrameOut]:
        self.queued.extend(("send", f) for f in frames)
        return []  # typed in the step the log shows

    def cancel(self, scope: str) -> list[FrameOut]:
        if scope != "session":  # a session's end is SIGHUP: no machine step
            self.queued.append(("cancel", scope))
        return []

    def feed(self, frame: FrameIn) -> list[Any]:
        signal = frame.signal
        if signal in ("gone", "turn_ended"):
            return signal_outputs(frame) or []
        self.step_ids = deque(frame.ids)
        machine = self.machine
        if signal is None:
            data = frame_bytes(frame)
            return machine.receive_data(data, frame.t) if data is not None else []
        if signal == "tick":
            return machine.tick(frame.t)
        out: list[Any] = machine.tick(frame.t) if frame.t > machine.now else []
        if signal in ("send", "cancel"):
            taken = self.queued.popleft() if self.queued else (signal, None)
            if taken[1] is None:
                return out  # the session's frame is not in this log: a divergence follows
            if taken[0] == "send":
                return out + machine.send(taken[1])
            return out + machine.cancel(taken[1])
        if signal == "resize" and isinstance(frame.frame, list) and len(frame.frame) == 2:
            machine.resize(int(frame.frame[0]), int(frame.frame[1]))
            return out
        if signal == "exited":
            expected = bool((frame.frame or {}).get("expected"))
            return out + machine.process_exited(frame.text or "", frame.exit_code, expected)
        return out
