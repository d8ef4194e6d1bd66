"""A recorded A2A agent, played back: the server side of a session as its frames recorded it.

The A2A shell recorded every request the driver made (``frame.out`` ``post``,
numbered by the machine's request id) and every piece of every answer
(``frame.in`` ``in``: an SSE read's events, a body, a status, the end, a
transport failure), in the order they happened across all exchanges.  A
playback server walks that order: a recorded request waits for the live
driver's next request (the i-th live request stands for the i-th recorded
one: a deterministic driver numbers and orders them alike), and a recorded
answer piece goes to the live request standing for its exchange.  The card is
served as recorded, its interface URLs moved to the playback's own address.

:class:`A2aPlayback` is the walk without I/O; the Trio/ASGI shell is
:mod:`trio_cap.actors.cli.serve_replay_a2a`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import attrs
import msgspec

from trio_cap.actors.recording import frame_bytes
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import FrameIn, FrameOut


@attrs.frozen
class AwaitRequest:
    """The recorded driver posted request ``rid`` (``method``) here: wait for the live one's."""

    rid: int
    method: str


@attrs.frozen
class Answer:
    """A piece of the answer to request ``rid``: ``kind`` sse | body | status | ended | dropped."""

    rid: int
    kind: str
    data: bytes = b""
    status: int = 200


PlaybackStep = AwaitRequest | Answer


def sse_event(data: bytes, event_id: str | None = None) -> bytes:
    """One SSE event carrying ``data`` (each of its lines a ``data:`` line)."""
    head = f"id: {event_id}\n".encode() if event_id is not None else b""
    lines = b"".join(b"data: " + line + b"\n" for line in data.split(b"\n"))
    return head + lines + b"\n"


class A2aPlayback:
    def __init__(self, recorded: Sequence[Envelope]) -> None:
        frames = [e.event for e in recorded if type(e.event) in (FrameIn, FrameOut)]
        card = next((f for f in frames if type(f) is FrameIn and f.signal == "card"
                     and isinstance(f.frame, dict)), None)
        if card is None:
            bindings = sorted({f.binding for f in frames})  # type: ignore[attr-defined]
            if not frames:
                raise ValueError("the session has no recorded frames (it was run with "
                                 "--record off): there is nothing to play back")
            if bindings != ["a2a"]:
                raise ValueError(f"the session was recorded over {', '.join(bindings)}, "
                                 "not a2a")
            raise ValueError("the session's recording has no agent card (recorded before "
                             "A2A recorded its frames)")
        self.card: dict[str, Any] = card.frame["card"]  # type: ignore[union-attr]
        self.card_url: str = card.frame["card_url"]  # type: ignore[union-attr]
        self.frames = frames

    def card_for(self, base: str) -> bytes:
        """The recorded card, every URL on the recorded agent's origin moved to ``base``."""
        parts = urlsplit(self.card_url)
        old = f"{parts.scheme}://{parts.netloc}"
        return msgspec.json.encode(_moved(self.card, old, base.rstrip("/")))

    def steps(self) -> Iterator[PlaybackStep]:
        for ev in self.frames:
            given = ev.frame if isinstance(ev.frame, dict) else None  # type: ignore[attr-defined]
            if given is None:
                continue
            if type(ev) is FrameOut and "post" in given:
                yield AwaitRequest(int(given["post"]), str(given.get("method") or ""))
            elif type(ev) is FrameIn and "in" in given:
                rid = int(given.get("rid") or 0)
                kind = given["in"]
                if kind == "sse":
                    yield from self._sse(rid, given)
                elif kind == "status":
                    yield Answer(rid, kind, frame_bytes(ev) or b"",  # type: ignore[arg-type]
                                 int(given.get("status") or 500))
                else:
                    yield Answer(rid, kind, frame_bytes(ev) or b"")  # type: ignore[arg-type]

    @staticmethod
    def _sse(rid: int, given: dict[str, Any]) -> Iterator[Answer]:
        datas = [d.encode("utf-8") for d in given.get("datas") or ()]
        if not datas:
            import base64

            datas = [base64.b64decode(d) for d in given.get("datas_b64") or ()]
        last = given.get("last_event_id")
        chunk = b"".join(sse_event(d, last if i == len(datas) - 1 else None)
                         for i, d in enumerate(datas))
        yield Answer(rid, "sse", chunk)


def _moved(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return new + value[len(old):] if value.startswith(old) else value
    if isinstance(value, dict):
        return {k: _moved(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_moved(v, old, new) for v in value]
    return value
