"""Binding machines as ``cap replay --check`` runs them: fed recorded frames, no I/O.

Each entry of :data:`REPLAY_BINDINGS` builds, for one recorded session, the
same sans-io machine the binding's shell drove, with the ids the shell drew
(read back from the session's ``frame.out`` events, :func:`recorded_ids`: the
factory takes that queue and pops from it), the recorded config and the
recorded events from the connection's start (for what only the shell knew).
It answers four calls, mirroring its shell exactly:

* ``open()``: what the shell wrote during its handshake, as frame.out events;
* ``feed(frame_in)``: the machine's outputs for one recorded step (the kit's
  outputs: events, ``TurnEnded``, ``AgentGone``, ``ToAgent``);
* ``send(frames)`` / ``cancel(scope)``: what the shell wrote for those, as
  frame.out events; nothing for a shell whose sends are steps of their own in
  the log (ACP, PTY, A2A): the frame waits there until its step comes;
* ``replayable(recorded)`` (optional, static): whether the log holds what the
  machine is built from (a log from before the binding recorded it: checked
  from its events);
* ``shell_step(recorded, i)`` (only with ``shell_steps``): a step the shell took
  with no read (ACP: its sends and served answers are batches of their own),
  run when the check reaches it; None when ``recorded[i]`` starts none;
* ``recorder``: the replay's own :class:`~trio_cap.actors.recording.Recorder`
  (time 0), so the Deliverer's frame.out for a ``ToAgent`` is made the same way.

A new binding adds its entry here (docs/architecture.md, "Recording a binding").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from trio_cap.actors.bindings.base import AgentGone, TurnEnded
from trio_cap.actors.recording import Recorder, frame_bytes
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import Cancel, Event, FrameIn, FrameOut, SessionConfig


class ReplayBinding(Protocol):
    recorder: Recorder
    decodes: bool
    """True when the machine makes the agent's events from the recorded frames."""
    shell_steps: bool

    def open(self) -> list[FrameOut]: ...

    def feed(self, frame: FrameIn) -> list[Any]: ...

    def send(self, frames: Sequence[Event]) -> list[FrameOut]: ...

    def cancel(self, scope: str) -> list[FrameOut]: ...


def recorded_ids(recorded: Sequence[Envelope]) -> deque[str]:
    """Every id the session's connections drew, in order (one queue for all of them: a
    resumed session's second connection goes on drawing where the first stopped)."""
    return deque(i for env in recorded if type(env.event) is FrameOut
                 for i in env.event.ids)  # type: ignore[attr-defined]


def signal_outputs(frame: FrameIn) -> list[Any] | None:
    """What the shell itself saw (no machine involved): the agent's end, a bare turn end."""
    if frame.signal == "gone":
        return [AgentGone(frame.text or "", frame.exit_code)]
    if frame.signal == "turn_ended":
        return [TurnEnded(frame.text or "end_turn")]  # type: ignore[arg-type]
    return None


class InprocReplay:
    """In process the frames are the events themselves: nothing to decode, nothing written."""

    decodes = False
    """Its agent events are not made from frames: the log's own events are the inputs."""
    shell_steps = False

    def __init__(self, config: SessionConfig, ids: deque[str],
                 recorded: Sequence[Envelope] = ()) -> None:
        self.recorder = Recorder("inproc", now=lambda: 0.0)

    def open(self) -> list[FrameOut]:
        return []

    def feed(self, frame: FrameIn) -> list[Any]:
        return signal_outputs(frame) or []

    def send(self, frames: Sequence[Event]) -> list[FrameOut]:
        return []

    def cancel(self, scope: str) -> list[FrameOut]:
        return []


class StreamJsonReplay:
    """The stream-json driver, as :mod:`..bindings.stream_json.connector` drives it."""

    decodes = True
    shell_steps = False

    def __init__(self, config: SessionConfig, ids: deque[str],
                 recorded: Sequence[Envelope] = ()) -> None:
        from trio_cap.actors.bindings.stream_json.driver import StreamJsonDriver

        self.recorder = rec = Recorder("stream-json", now=lambda: 0.0)
        new_uuid = rec.ids(lambda: ids.popleft() if ids else "replay-has-no-more-recorded-ids")
        agent_session = config.session_resume_id or new_uuid()
        self.driver = StreamJsonDriver(new_uuid=new_uuid, session_id=agent_session,
                                       cwd=config.cwd)

    def open(self) -> list[FrameOut]:
        self.recorder.bytes_out(self.driver.initialize())
        return self.recorder.take_out()

    def feed(self, frame: FrameIn) -> list[Any]:
        signal = signal_outputs(frame)
        if signal is not None:
            return signal
        if frame.eof:
            return self.driver.receive_eof()
        data = frame_bytes(frame)
        return self.driver.receive_data(data) if data is not None else []

    def send(self, frames: Sequence[Event]) -> list[FrameOut]:
        self.recorder.bytes_out(b"".join(self.driver.send(f) for f in frames))
        return self.recorder.take_out()

    def cancel(self, scope: str) -> list[FrameOut]:
        if scope == "session":
            self.recorder.frame_out({"stdin": "closed"})
        else:
            self.recorder.bytes_out(self.driver.send(Cancel(scope="current_turn")))
        return self.recorder.take_out()


ReplayFactory = Callable[[SessionConfig, deque[str], Sequence[Envelope]], ReplayBinding]

REPLAY_BINDINGS: dict[str, ReplayFactory] = {
    "inproc": InprocReplay,
    "stream-json": StreamJsonReplay,
}
"""Binding name → its replay machine; a binding that records frames registers here."""


def replayable(factory: ReplayFactory | None, recorded: Sequence[Envelope]) -> bool:
    """Whether ``factory``'s machine can re-make this session's events from its frames (a
    binding may need something its shell records, and a log from before that lacks it)."""
    if factory is None or not getattr(factory, "decodes", False):
        return False
    check = getattr(factory, "replayable", None)
    return check is None or bool(check(recorded))


def _register_late() -> None:
    """Bindings whose replay module imports this one (for :func:`signal_outputs`)."""
    from trio_cap.actors.replay.a2a import A2aReplay
    from trio_cap.actors.replay.acp import AcpReplay
    from trio_cap.actors.replay.pty import PtyReplay

    REPLAY_BINDINGS["acp"] = AcpReplay
    REPLAY_BINDINGS["pty"] = PtyReplay
    REPLAY_BINDINGS["a2a"] = A2aReplay


_register_late()
