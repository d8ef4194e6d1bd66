"""Recording a connection's wire traffic as ``frame.in`` / ``frame.out`` events.

Why it exists: ``cap replay --check`` re-feeds what an agent really sent
through the same machines, so the log must hold exactly what each shell fed
its machine, step by step, and exactly what it wrote.  A :class:`Recorder`
is made per session by the session actor (``spec.options["recorder"]``; None
when recording is off) and every binding's shell uses it at two points only:

* inbound: the :class:`~trio_cap.actors.bindings.deliver.Deliverer` takes a
  ``received=`` frame.in made by :meth:`Recorder.bytes_in` (or
  :meth:`frame_in`, :meth:`eof`, :meth:`gone`) and puts it in front of the
  step's events, in the same inbox message, so the log holds it in the same
  record as what it produced;
* outbound: the shell calls :meth:`Recorder.bytes_out` / :meth:`frame_out`
  for what it writes; the session actor logs those after each send
  (:meth:`take_out`), and the Deliverer logs the machine's own replies
  (``ToAgent``) in their place in the step.

Ids a shell draws (a prompt's uuid) go through :meth:`ids`, so they are
listed on the frame.out that carried them and a replay draws the same.
Time is the connection's monotonic clock (Trio's, injected in tests).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Any, Literal

import trio

from trio_cap.events.kinds import FrameIn, FrameOut

RecordMode = Literal["off", "frames", "raw"]
RECORD_MODES: tuple[str, ...] = ("off", "frames", "raw")
"""``off``: no frame events; ``frames``: every wire frame (a PTY's reads and timer steps
included); ``raw``: also the ``cap.pty.raw_bytes`` events a subscriber would see."""


def _bytes_fields(data: bytes) -> dict[str, str]:
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"data_b64": base64.b64encode(data).decode("ascii")}


def frame_bytes(ev: FrameIn | FrameOut) -> bytes | None:
    """The exact bytes a recorded frame holds (None for a whole-message frame or a signal)."""
    if ev.text is not None:
        return ev.text.encode("utf-8")
    if ev.data_b64 is not None:
        return base64.b64decode(ev.data_b64)
    return None


class Recorder:
    """One connection's recording hook; see the module docstring for where shells call it."""

    def __init__(self, binding: str, mode: RecordMode = "frames",
                 now: Callable[[], float] | None = None) -> None:
        if mode not in RECORD_MODES or mode == "off":
            raise ValueError(f"record mode must be frames or raw, not {mode!r}")
        self.binding = binding
        self.mode = mode
        self._now = now or trio.current_time
        self._out: list[FrameOut] = []
        self._drawn: list[str] = []

    @property
    def raw(self) -> bool:
        """Record raw terminal bytes too (PTY)."""
        return self.mode == "raw"

    # ---- inbound ----------------------------------------------------------
    def bytes_in(self, data: bytes) -> FrameIn:
        return FrameIn(binding=self.binding, t=self._now(), **_bytes_fields(data))

    def frame_in(self, frame: Any) -> FrameIn:
        return FrameIn(binding=self.binding, t=self._now(), frame=frame)

    def eof(self) -> FrameIn:
        return FrameIn(binding=self.binding, t=self._now(), eof=True)

    def gone(self, reason: str, exit_code: int | None) -> FrameIn:
        return FrameIn(binding=self.binding, t=self._now(), signal="gone", text=reason,
                       exit_code=exit_code)

    def step_in(self, t: float | None, data: bytes | None = None, *,
                signal: str | None = None, text: str | None = None, frame: Any = None,
                exit_code: int | None = None, ids: Sequence[str] = ()) -> FrameIn:
        """One step of a machine the shell steps with more than bytes (PTY, A2A): bytes
        read at ``t`` (None: now), a ``frame``, or a ``signal`` step (see
        :class:`~trio_cap.events.kinds.FrameIn`)."""
        fields: dict[str, Any] = _bytes_fields(data) if data is not None else {"text": text}
        return FrameIn(binding=self.binding, t=self._now() if t is None else t,
                       signal=signal, frame=frame,
                       exit_code=exit_code, ids=tuple(ids), **fields)

    def turn_ended(self, stop_reason: str) -> FrameIn:
        return FrameIn(binding=self.binding, t=self._now(), signal="turn_ended",
                       text=stop_reason)

    # ---- outbound ---------------------------------------------------------
    def ids(self, factory: Callable[[], str]) -> Callable[[], str]:
        """``factory`` whose ids are listed on the next frame.out."""
        def draw() -> str:
            value = factory()
            self._drawn.append(value)
            return value
        return draw

    def out_event(self, data: bytes | None = None, frame: Any = None) -> FrameOut:
        ids, self._drawn = tuple(self._drawn), []
        fields: dict[str, Any] = _bytes_fields(data) if data is not None else {}
        if frame is not None or data is None:
            fields["frame"] = frame
        return FrameOut(binding=self.binding, t=self._now(), ids=ids, **fields)

    def bytes_out(self, data: bytes) -> None:
        """The shell wrote ``data``; logged by the session actor after the send."""
        if data:
            self._out.append(self.out_event(data))

    def frame_out(self, frame: Any) -> None:
        self._out.append(self.out_event(frame=frame))

    def take_out(self) -> list[FrameOut]:
        out, self._out = self._out, []
        return out
