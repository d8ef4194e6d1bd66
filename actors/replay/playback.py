"""A recorded agent, played back: the agent side of a session as its ``frame.in`` recorded it.

Why: a driver under development should meet a real past conversation, byte
for byte, without the agent (or its model, or the network).  The recording
already holds both directions in order, so playing back is a walk over the
session's frames:

* a ``frame.in`` is written to the driver as recorded (its exact bytes);
  ``eof`` closes the output; ``signal gone`` ends the agent with the
  recorded exit code; the other signals (a PTY's ticks, sends, its child's
  exit) are the driver's own steps, not the agent's: skipped;
* a ``frame.out`` means "the recorded driver wrote this here": the playback
  waits until the live driver has written as many lines (stream-json, ACP:
  line-framed) or bytes (PTY: keys), their content being the new driver's
  business, and learns the ids it used instead of the recorded ones
  (``uuid``, ``request_id``, ``session_id``), so the answers that echo them
  carry the live ids; a frame.out that holds no bytes (the connection's
  settings) is no write;
* stderr the agent wrote (``agent.raw`` from stderr) goes to stderr.

Each step carries its recorded time (``at``, the connection's clock), so the
shell can keep the original gaps between what the driver wrote and what the
agent answered (a PTY's settle rules read time), or go as fast as it can.

:class:`Playback` is the walk without I/O (what to write, how many lines to
wait for); the Trio shell is :mod:`trio_cap.actors.cli.serve_replay`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import msgspec

from trio_cap.actors.recording import frame_bytes
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import AgentRaw, FrameIn, FrameOut

ID_KEYS = ("uuid", "request_id", "session_id", "tool_use_id")


SERVABLE = ("stream-json", "acp", "pty")
"""Bindings a recorded agent is played back over on stdio (PTY: the terminal's)."""


@attrs.frozen
class Write:
    data: bytes
    stderr: bool = False
    at: float | None = None


@attrs.frozen
class Expect:
    """Wait for this many lines from the driver (``lines=0, eof=True``: for stdin to close)."""

    lines: int
    recorded: bytes
    eof: bool = False
    size: int = 0
    """Bytes to wait for instead of lines (a PTY's keys are no lines)."""
    at: float | None = None


@attrs.frozen
class CloseOutput:
    pass


@attrs.frozen
class Exit:
    code: int
    reason: str


@attrs.frozen
class Hold:
    """The recording ends with the agent still there: stay until the driver lets it go
    (closes its input, or hangs up the terminal), as the agent did."""


Step = Write | Expect | CloseOutput | Exit | Hold


class Playback:
    def __init__(self, recorded: Sequence[Envelope], binding: str = "stream-json") -> None:
        frames = [e.event for e in recorded if type(e.event) in (FrameIn, FrameOut)]
        if not frames:
            raise ValueError("the session has no recorded frames (it was run with --record "
                             "off): there is nothing to play back")
        bindings = {f.binding for f in frames}  # type: ignore[attr-defined]
        if bindings != {binding}:
            raise ValueError(f"the session was recorded over {', '.join(sorted(bindings))}, "
                             f"not {binding}")
        self.recorded = recorded
        self.binding = binding
        self.subs: dict[str, str] = {}

    def steps(self) -> Iterator[Step]:
        for env in self.recorded:
            ev = env.event
            kind = type(ev)
            if kind is FrameOut:
                if ev.frame == {"stdin": "closed"}:  # type: ignore[attr-defined]
                    yield Expect(0, b"", eof=True)
                    continue
                data = frame_bytes(ev)  # type: ignore[arg-type]
                if data is None:
                    continue  # the connection's settings, recorded: nothing was written
                if self.binding == "pty":
                    yield Expect(0, data, size=len(data), at=ev.t)  # type: ignore[attr-defined]
                else:
                    yield Expect(data.count(b"\n"), data, at=ev.t)  # type: ignore[attr-defined]
            elif kind is FrameIn:
                signal = ev.signal  # type: ignore[attr-defined]
                if signal == "gone":
                    yield Exit(ev.exit_code or 0, ev.text or "")  # type: ignore[attr-defined]
                    return
                if signal is not None:
                    continue  # the driver's own step (a tick, a send), not the agent's
                if ev.eof:  # type: ignore[attr-defined]
                    yield CloseOutput()
                    continue
                data = frame_bytes(ev)  # type: ignore[arg-type]
                if data:
                    yield Write(self.substitute(data), at=ev.t)  # type: ignore[attr-defined]
            elif kind is AgentRaw and ev.source == "stderr":  # type: ignore[attr-defined]
                yield Write((ev.text + "\n").encode(), stderr=True)  # type: ignore[attr-defined]
        yield Hold()

    def learn(self, recorded: bytes, live: bytes) -> None:
        """Ids the live driver used where the recorded one used others (same lines, in order)."""
        for old, new in zip(recorded.splitlines(), live.splitlines(), strict=False):
            try:
                _pair(msgspec.json.decode(old), msgspec.json.decode(new), self.subs)
            except msgspec.DecodeError:
                continue

    def substitute(self, data: bytes) -> bytes:
        for old, new in self.subs.items():
            data = data.replace(old.encode(), new.encode())
        return data


def _pair(old: Any, new: Any, subs: dict[str, str]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key, value in old.items():
            other = new.get(key)
            if key in ID_KEYS and isinstance(value, str) and isinstance(other, str):
                if value != other and value:
                    subs[value] = other
            else:
                _pair(value, other, subs)
    elif isinstance(old, list) and isinstance(new, list):
        for a, b in zip(old, new, strict=False):
            _pair(a, b, subs)
