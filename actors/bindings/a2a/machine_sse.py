"""Sans-io SSE: ``text/event-stream`` bytes in, each event's ``data`` out (WHATWG §9.2.6).

The connector reads every stream through it (one HTTP read's events are one
machine step), and so do the frames bench and recorded traffic; ``httpx-sse``'s
parser is its test oracle (``tests/driver_a2a/test_fuzz.py``).  A2A only needs
``data``: every event is one JSON-RPC response on one ``data:`` line (a2a-sdk),
so the common case — an event that is exactly one
``data: …`` line — is split out in the read (:func:`split`: one memchr pass in C,
``_sse_split.c``, when built; :func:`split_py` the reference); anything else (several
data lines, ``event:`` / ``id:`` fields, comments such as a2a-sdk's
``: ping``) goes through the general line rules:

* lines end in CRLF, LF or CR (a CR at the end of a read waits for the next
  read, which may start with its LF);
* a blank line dispatches the event: its data lines joined with LF; an event
  with no data line is not dispatched;
* ``data:`` loses one leading space; a line starting with ``:`` is a comment;
  other fields are ignored; a field line with no colon is a field name with
  an empty value;
* at the end of the stream an event not closed by a blank line is dropped
  (the spec's rule: it may be incomplete).

``max_event`` bounds what one event may hold before its blank line; past it the
event is dropped and counted in :attr:`SseReader.oversized`, so a peer that
never sends a blank line cannot grow memory without bound.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

try:
    from trio_cap.actors.bindings.a2a import _sse_split  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - built wherever the tests run
    _sse_split = None

NATIVE = _sse_split is not None
"""True when the C split runs (``_sse_split.c``; the tests insist on it)."""

_SEP = b"\r\n\r\ndata: "
"""Between two events of a2a-sdk's stream."""


def split_py(held: bytes, chunk: bytes) -> tuple[list[bytes], bytes] | None:
    """a2a-sdk's stream, every event one ``data: `` line and CRLF, split in the read itself:
    (the data of every event the read completes, what to hold for the next read).

    ``held`` is the start of an event the last read left (no line break in it, so no
    separator spans it and the read): joined to the read's first piece only, not the
    read copied behind it.  None: fewer than one separator, or some other line break
    in the read (the general rules take it).  The reference of ``_sse_split.c``'s
    ``split`` (``tests/driver_a2a/test_sse_split.py``) and its fallback where no C
    compiler was there at install.
    """
    datas = chunk.split(_SEP)
    n = len(datas)
    if n < 2:
        return None
    tail = datas[-1]
    if tail[-4:] == b"\r\n\r\n":  # the read ends with an event
        datas[-1] = tail[:-4]
        rest = b""
    else:  # the read ends inside an event: held for the next one
        rest = tail
        datas.pop()
    joined = b"".join(datas)
    if b"\n" in joined or b"\r" in joined or b"\n" in rest or b"\r" in rest:
        return None
    datas[0] = held[6:] + datas[0] if held else datas[0][6:]
    return datas, (b"data: " + rest if tail is rest else rest)


split: Callable[[bytes, bytes], tuple[Sequence[bytes], bytes] | None] = (
    split_py if _sse_split is None else _sse_split.split)
"""The split the reader runs: in C when built (~300 ns an event less than
:func:`split_py`, a sixth of the A2A hot read), the same events either way.  The C
split's datas are a ``Payloads``: the read and where each event's data lies in it, a
bytes object made only for an event someone indexes; the C byte-shape match reads a
run of text events in place (``bindings/_byte_shape.c``), so most never become one."""


class SseReader:
    def __init__(self, *, max_event: int = 16 << 20) -> None:
        self._buf = b""
        self._max = max_event
        self.oversized = 0
        self._skipping = False
        self.last_id: str | None = None
        """The stream's last event ID (the ``id:`` field, kept across events as the spec
        says): what a reconnect sends as ``Last-Event-ID``."""

    def feed(self, chunk: bytes) -> Sequence[bytes]:
        """The data of every event completed by this chunk, in order."""
        held = self._buf
        if not self._skipping and (held[:6] == b"data: " if held else chunk[:6] == b"data: ") \
                and b"\n" not in held and b"\r" not in held:
            datas = self._split(held, chunk)
            if datas is not None:
                return datas
        return self._feed(held + chunk if held else chunk)

    def _split(self, held: bytes, chunk: bytes) -> Sequence[bytes] | None:
        """a2a-sdk's stream split in the read (:func:`split`, in C when built); what it
        leaves of an event is held for the next read.  None: the general rules take it."""
        got = split(held, chunk)
        if got is None:
            return None
        datas, rest = got
        self._keep(rest)
        return datas

    def _feed(self, buf: bytes) -> list[bytes]:
        self._buf = b""
        out: list[bytes] = []
        end = buf.rfind(b"\r\n\r\n")
        if end >= 0 and not self._skipping and buf[:6] == b"data: ":
            # a2a-sdk's stream: every event one "data: " line, CRLF.  Split at the separators
            # ("\r\n\r\ndata: "); the split was right iff no event holds another line break,
            # which two memchr passes over the datas joined tell (counting the breaks in the
            # buffer instead reads it byte by byte, twice, several times slower).
            datas = buf[6:end].split(b"\r\n\r\ndata: ")
            joined = b"".join(datas)
            if b"\n" not in joined and b"\r" not in joined:
                rest = buf[end + 4:]
                if b"\n" in rest or b"\r" in rest:
                    datas += self._mixed(rest)
                else:
                    self._keep(rest)
                return datas
        if end >= 0:  # CRLF, as a2a-sdk writes: split without normalising
            blocks = buf.split(b"\r\n\r\n")
            rest = blocks.pop()
            if self._skipping:
                blocks[0] = b""  # the tail of an event already dropped as oversized
                self._skipping = False
            for block in blocks:
                if block[:6] == b"data: " and b"\n" not in block and b"\r" not in block:
                    out.append(block[6:])  # a2a-sdk's one line per event
                elif block:
                    out += self._complete(block)
        else:
            rest = buf
        if b"\n" in rest or b"\r" in rest:
            out += self._mixed(rest)
        else:
            self._keep(rest)
        return out

    def _mixed(self, buf: bytes) -> list[bytes]:
        """Any line endings: normalise, dispatch what a blank line closed, keep the rest."""
        hold = buf.endswith(b"\r")
        if hold:
            buf = buf[:-1]
        buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if hold:
            buf += b"\r"  # its LF may be the next read's first byte
        end = buf.rfind(b"\n\n")
        if end < 0:
            self._keep(buf)
            return []
        head, rest = buf[:end], buf[end + 2:]
        if self._skipping:
            head = head.partition(b"\n\n")[2]
            self._skipping = False
        self._keep(rest)
        return self._complete(head)

    def _complete(self, block: bytes) -> list[bytes]:
        """Events closed by blank lines (the last one by the caller's): each event's data."""
        if b"\r" in block:
            block = block.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        out = []
        for piece in block.split(b"\n\n"):
            data, event_id = _general(piece)
            if event_id is not None:
                self.last_id = event_id
            if data is not None:
                out.append(data)
        return out

    def _keep(self, rest: bytes) -> None:
        if len(rest) > self._max:
            self.oversized += 1
            self._skipping = True
            rest = b""
        self._buf = rest

    def feed_eof(self) -> list[bytes]:
        """The stream ended: a CR held for a possible LF ends its line after all; an event
        still not closed by a blank line is dropped, as the spec says."""
        buf, self._buf = self._buf, b""
        out = self._mixed(buf[:-1] + b"\n") if buf.endswith(b"\r") else []
        self._buf = b""
        self._skipping = False
        return out


def _general(block: bytes) -> tuple[bytes | None, str | None]:
    """(the event's data or None, its ``id`` field or None)."""
    data: list[bytes] = []
    event_id: str | None = None
    for line in block.lstrip(b"\n").split(b"\n"):
        if not line or line[:1] == b":":
            continue
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            data.append(value)
        elif name == b"id" and b"\0" not in value:
            event_id = value.decode("utf-8", "replace")
    return (b"\n".join(data) if data else None), event_id
