"""Bytes from the agent's stdout → one decoded item per frame, surviving bad lines.

Sans-io: :meth:`LineDecoder.feed` takes whatever one read returned and hands
back what it could decode.  Three things real agents get wrong are absorbed
here rather than in the mapping:

* a line that is not JSON becomes :class:`BadLine` (kept raw) and decoding
  goes on with the next line;
* Claude Code has shipped a writer race where an asynchronous frame lands in
  the middle of another line — ``A-head B \\n A-tail \\n`` — so the first line
  holds a complete ``B`` after a broken prefix and the second line is the rest
  of ``A``.  ``B`` is recovered at once, the prefix is held back, and joined
  with the next line if that completes it; two frames glued without a newline
  are split the same way;
* a line longer than ``max_line`` is dropped up to its newline, reported, and
  never buffered whole.
"""

from __future__ import annotations

import attrs
import msgspec

from trio_cap.actors.bindings.stream_json.driver_frames import (
    DriverFrame,
    NotAFrame,
    decode_driver_frame,
)

MAX_LINE = 64 * 1024 * 1024
"""Largest line kept (the SDK's own default is 1 MiB, which tool outputs can exceed)."""

_MAX_SPLIT_TRIES = 64
"""Positions tried when looking for a frame inside a broken line (bounds the work)."""


@attrs.frozen
class Decoded:
    frame: DriverFrame
    raw: bytes
    recovered: bool = False
    """True when the frame was cut out of, or pieced together from, broken lines."""


@attrs.frozen
class Unknown:
    """Valid JSON the driver has no mapping for; kept raw."""

    raw: bytes
    reason: str


@attrs.frozen
class BadLine:
    raw: bytes
    reason: str
    size: int = 0
    """The line's full length when ``raw`` is only its start (an overlong line)."""


Item = Decoded | Unknown | BadLine


def _try(data: bytes, recovered: bool) -> Decoded | Unknown | None:
    try:
        return Decoded(decode_driver_frame(data), data, recovered)
    except NotAFrame as exc:
        return Unknown(data, exc.reason)
    except msgspec.DecodeError:
        return None


class LineDecoder:
    def __init__(self, max_line: int = MAX_LINE) -> None:
        self.max_line = max_line
        self._buf = bytearray()
        self._head: bytes | None = None
        self._skipping = 0  # bytes dropped so far of an overlong line
        self._skip_head = b""

    def feed(self, data: bytes) -> list[Item]:
        out: list[Item] = []
        buf = self._buf
        buf += data
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = bytes(buf[start:nl])
            start = nl + 1
            if self._skipping:
                out.append(self._overlong(len(line)))
                continue
            out += self._line(line)
        del buf[:start]
        if len(buf) > self.max_line:
            if not self._skipping:
                self._skip_head = bytes(buf[:4096])
            self._skipping += len(buf)
            buf.clear()
        return out

    def eof(self) -> list[Item]:
        """The stream ended: whatever is left is a last line without its newline."""
        out: list[Item] = []
        if self._skipping:
            out.append(self._overlong(0))
        elif self._buf:
            out += self._line(bytes(self._buf))
        self._buf.clear()
        if self._head is not None:
            out.append(BadLine(self._head, "incomplete line at end of output"))
            self._head = None
        return out

    def _overlong(self, rest: int) -> BadLine:
        size = self._skipping + rest
        self._skipping = 0
        return BadLine(self._skip_head, f"line longer than {self.max_line} bytes", size)

    def _line(self, line: bytes) -> list[Item]:
        if not line.strip():
            return []
        out: list[Item] = []
        head, self._head = self._head, None
        if len(line) > self.max_line:
            return [BadLine(line[:4096], f"line longer than {self.max_line} bytes", len(line))]
        item = _try(line, False)
        if item is not None:
            if head is not None:
                out.append(BadLine(head, "broken line, never completed"))
            out.append(item)
            return out
        if head is not None:
            joined = _try(head + line, True)
            if joined is not None:
                return [joined]
            out.append(BadLine(head, "broken line, never completed"))
        return out + self._split(line)

    def _split(self, line: bytes) -> list[Item]:
        """A broken line that may hold a whole frame after a cut-off prefix."""
        pos = line.find(b'{"', 1)
        tries = 0
        while pos > 0 and tries < _MAX_SPLIT_TRIES:
            tries += 1
            tail = _try(line[pos:], True)
            if tail is not None:
                prefix = line[:pos]
                whole = _try(prefix, True)
                if whole is not None:
                    return [whole, tail]  # two frames glued together
                self._head = prefix  # the rest of it should be the next line
                return [tail]
            pos = line.find(b'{"', pos + 1)
        return [BadLine(line, "not a JSON object")]
