"""The stream-json part of reading an agent's stdout: which lines are frames, which are not.

The framing, batching and recovery of spliced frames are the kit's
(:mod:`trio_cap.actors.bindings.ndjson`); this module only adapts the one
stream-json decoder (:mod:`frames`) to the reader's contract, so every line
ends up as a frame, an :class:`Unknown` with a reason a reader of the log can
use, or — not whole JSON — a ``msgspec.DecodeError`` for the recovery step.
"""

from __future__ import annotations

import msgspec

from trio_cap.actors.bindings.ndjson import MAX_LINE, NdjsonReader, SpliceRecovery, Unknown
from trio_cap.actors.bindings.stream_json import frames as f

__all__ = ["MAX_LINE", "decode_line", "new_reader"]


def decode_line(line: bytes) -> f.AnyFrame | Unknown:
    """One line → a frame, or :class:`Unknown` for valid JSON that is no frame we can read.

    Raises ``msgspec.DecodeError`` when the line is not one whole JSON object.
    """
    try:
        return f.decode_frame(line)
    except f.UnknownFrame as exc:
        return Unknown(line, f"unknown frame type {exc.frame_type!r}")
    except msgspec.ValidationError as exc:
        # Validation runs while parsing, so the line may still be broken JSON:
        # this untyped decode raises DecodeError then (the recovery step's case).
        obj = msgspec.json.decode(line)
        if not isinstance(obj, dict):
            raise msgspec.DecodeError("not a JSON object") from None
        kind = obj.get("type")
        if not isinstance(kind, str) or kind not in f.FRAME_TYPES:
            return Unknown(line, f"unknown frame type {kind!r}")
        return Unknown(line, f"unreadable {kind} frame: {exc}")


def new_reader(max_line: int = MAX_LINE) -> NdjsonReader[f.AnyFrame]:
    """The reader the driver uses: whole reads decoded at once, spliced frames recovered."""
    return NdjsonReader(decode_line, f.decode_frames, max_line=max_line,
                        recovery=SpliceRecovery())
