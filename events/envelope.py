"""What the log stores: an event plus where and when it was appended."""

from __future__ import annotations

import msgspec

from trio_cap.events.kinds import AnyEvent


class Envelope(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """``seq`` is given by the log (1, 2, 3 … without gaps); ``at`` comes from the
    log's injected clock; ``stream`` is the session or fleet id (``""`` for the
    log itself); ``cause`` is the seq of the frame or command that led here.

    Stored as a msgpack array: the envelope's shape is fixed, so positional
    encoding saves bytes and decode time on every record.
    """

    seq: int
    at: float
    stream: str
    cause: int | None
    event: AnyEvent

    @property
    def kind(self) -> str:
        return self.event.__struct_config__.tag  # type: ignore[return-value]


def to_json_obj(env: Envelope) -> dict:
    """One flat JSON object per event, as ``cap log show --json`` prints it."""
    body = msgspec.to_builtins(env.event)
    out = {"seq": env.seq, "at": env.at, "stream": env.stream, "cause": env.cause}
    out.update(body)
    return out
