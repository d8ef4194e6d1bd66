"""What ``cap replay --check`` reports: the first divergence, the counts, and the log's
sessions as the check takes them (one list of envelopes per session stream)."""

from __future__ import annotations

import gc
from collections.abc import Iterable, Sequence
from itertools import groupby
from operator import attrgetter

import attrs
import msgspec

from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import Event, SessionOwned

_STREAM = attrgetter("stream")
_EVENT = attrgetter("event")


class Divergence(Exception):
    """The replay produced something else than the log holds (or nothing where it holds one)."""

    def __init__(self, session: str, seq: int | None, expected: Envelope | None,
                 got: tuple[int | None, Event] | None, why: str = "") -> None:
        self.session = session
        self.seq = seq
        self.expected = expected
        self.got = got
        self.why = why
        super().__init__(self.describe())

    def describe(self) -> str:
        where = f"seq {self.seq}" if self.seq is not None else "after the last recorded event"
        lines = [f"session {self.session}: first divergence at {where}"
                 + (f" ({self.why})" if self.why else "")]
        if self.expected is not None:
            lines.append(f"  expected: cause {self.expected.cause} {_show(self.expected.event)}")
        else:
            lines.append("  expected: nothing (the recorded session ends here)")
        if self.got is not None:
            lines.append(f"  got:      cause {self.got[0]} {_show(self.got[1])}")
        else:
            lines.append("  got:      nothing (the replay did not produce this event)")
        return "\n".join(lines)


def _show(event: Event) -> str:
    text = msgspec.json.encode(event).decode()
    return text if len(text) <= 400 else text[:399] + "…"


@attrs.define
class CheckResult:
    sessions: int = 0
    events: int = 0
    """Events compared."""
    undecoded: set[str] = attrs.field(factory=set)
    """Bindings whose recorded frames had no replay machine: checked from their events."""


def group_sessions(windows: Iterable[Sequence[Envelope]],
                   only: str | None = None) -> dict[str, list[Envelope]]:
    """The log's events per session stream, in seq order (the log's own "" stream is left out).

    A run of one stream's consecutive events (one appended batch, at least) is taken at
    once: a check groups a million events, one Python step each was a tenth of its time.
    """
    streams: dict[str, list[Envelope]] = {}
    was_enabled = gc.isenabled()
    gc.disable()  # what is read here lives on, acyclic: collecting would find nothing
    try:
        _group(windows, only, streams)
    finally:
        if was_enabled:
            gc.enable()
    return streams


def _group(windows: Iterable[Sequence[Envelope]], only: str | None,
           streams: dict[str, list[Envelope]]) -> None:
    for envs in windows:
        for stream, run in groupby(envs, _STREAM):
            if not stream or (only is not None and stream != only):
                continue
            events = list(run)
            if SessionOwned in map(type, map(_EVENT, events)):  # the node's record
                events = [env for env in events if type(env.event) is not SessionOwned]
            got = streams.get(stream)
            if got is None:
                streams[stream] = events
            else:
                got.extend(events)
