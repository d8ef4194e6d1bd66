"""The one newline framer every NDJSON binding uses (stream-json now, ACP next).

Sans-io: bytes in exactly as the pipe gave them, decoded items out.  Speed is
why it works on *blocks*, not lines: every complete line of one read is
decoded in one msgspec call (the lines joined into a JSON array), so a read of
256 KiB costs one parse and no per-line Python object, and only a read that
holds a bad line pays for going line by line.

Rules (the framer, :class:`LineFramer`):

1. a line ends at ``\\n``; a ``\\r`` before it is JSON whitespace and stays;
2. the complete lines of one read come out together, the unfinished tail is
   kept for the next read, so bytes may arrive one at a time or in any chunks;
3. a line longer than ``max_line`` is never buffered whole: once the kept tail
   passes ``max_line`` it is dropped as it arrives, up to its newline, and
   reported once as :class:`Overlong` (its first bytes and its full size);
4. at end of input the kept tail is a last line without its newline.

=========  ==================================  =========  ==========================
state      input                               next       output
=========  ==================================  =========  ==========================
LINE       bytes holding a newline             LINE       the block of complete lines
LINE       bytes, no newline, tail <= max      LINE       nothing
LINE       bytes, no newline, tail > max       SKIP       nothing (tail dropped)
SKIP       bytes, no newline                   SKIP       nothing (counted)
SKIP       bytes holding a newline             LINE       Overlong, then as LINE
LINE       eof                                 LINE       the tail as a block, if any
SKIP       eof                                 LINE       Overlong
=========  ==================================  =========  ==========================

Rules (the reader, :class:`NdjsonReader`, framer + decoding):

5. a block is decoded in one call; a block that fails that (one bad line is
   enough) is decoded line by line, so one bad line never costs its
   neighbours;
6. a line is decoded by the binding's ``decode_line``: a frame, an
   :class:`Unknown` (valid JSON it has no frame for) or ``msgspec.DecodeError``
   (not whole JSON); blank lines are skipped;
7. a line that is not whole JSON goes to the pluggable :class:`Recovery` step
   (:class:`SpliceRecovery` pieces spliced frames back together;
   :class:`NoRecovery` reports it), which answers with items too;
8. nothing raises on input: every line becomes a frame, an :class:`Unknown`
   or a :class:`BadLine`, in input order, and the raw bytes of each stay
   reachable (:meth:`Lines.raw`) for the log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import msgspec

MAX_LINE = 64 * 1024 * 1024
"""Default longest line kept (the SDK's own default is 1 MiB, which tool outputs exceed)."""

HEAD = 4096
"""Bytes of an overlong line kept to show what it was (never more than the limit)."""

_WINDOW = 16 * 1024
"""Bytes searched each side of where a wanted line should be (see :meth:`Lines.raw`)."""

NEVER_COMPLETED = "broken line, never completed"
NOT_JSON = "not a JSON object"

T = TypeVar("T")


# ---- typed problems ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Overlong:
    """A line longer than the limit: only its head was kept."""

    head: bytes
    size: int


@dataclass(frozen=True, slots=True)
class Unknown:
    """Valid JSON the binding has no frame for (an unknown type, or a shape it cannot read)."""

    raw: bytes
    reason: str


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line that could not be used: not JSON, broken and never completed, or overlong."""

    raw: bytes
    reason: str
    size: int = 0
    """The line's full length when ``raw`` is only its start (an overlong line)."""


Problem = Unknown | BadLine


# ---- the framer ----------------------------------------------------------------------


class LineFramer:
    """Rules 1-4: bytes → blocks of complete lines (``bytes``, no final newline) or Overlong.

    ``wrap`` is put around every block while it is copied anyway (the reader's
    ``[``/``]``: the one copy of a read is then already the JSON array's).
    """

    def __init__(self, max_line: int = MAX_LINE, wrap: tuple[bytes, bytes] = (b"", b"")) -> None:
        self.max_line = max_line
        self._open, self._close = wrap
        self._head_size = min(HEAD, max_line)  # the same head however the bytes arrived
        self._tail = bytearray()
        self._skipped = 0  # > 0: in SKIP, this many bytes of an overlong line dropped
        self._skip_head = b""

    def feed(self, data: bytes) -> list[bytes | Overlong]:
        out: list[bytes | Overlong] = []
        if self._skipped:
            nl = data.find(b"\n")
            if nl < 0:
                self._skipped += len(data)
                return out
            out.append(Overlong(self._skip_head, self._skipped + nl))
            self._skipped, self._skip_head = 0, b""
            data = data[nl + 1:]
        last = data.rfind(b"\n")
        tail = self._tail
        if last < 0:
            tail += data
            if len(tail) > self.max_line:
                self._skip_head = bytes(tail[:self._head_size])
                self._skipped = len(tail)
                tail.clear()
            return out
        block = b"".join((self._open, tail, memoryview(data)[:last], self._close))  # one copy
        tail.clear()
        tail += memoryview(data)[last + 1:]
        if len(tail) > self.max_line:
            self._skip_head = bytes(tail[:self._head_size])
            self._skipped = len(tail)
            tail.clear()
        self._emit(block, out)
        return out

    def eof(self) -> list[bytes | Overlong]:
        out: list[bytes | Overlong] = []
        if self._skipped:
            out.append(Overlong(self._skip_head, self._skipped))
            self._skipped, self._skip_head = 0, b""
        elif self._tail:
            self._emit(b"".join((self._open, self._tail, self._close)), out)
            self._tail.clear()
        return out

    def _emit(self, block: bytes, out: list[bytes | Overlong]) -> None:
        wrapping = len(self._open) + len(self._close)
        if len(block) - wrapping <= self.max_line:
            out.append(block)  # no line in it can be longer than the whole
            return
        kept: list[bytes] = []
        inner = block[len(self._open):len(block) - len(self._close)]
        for line in inner.split(b"\n"):
            if len(line) <= self.max_line:
                kept.append(line)
                continue
            if kept:
                out.append(b"".join((self._open, b"\n".join(kept), self._close)))
                kept = []
            out.append(Overlong(line[:self._head_size], len(line)))
        if kept:
            out.append(b"".join((self._open, b"\n".join(kept), self._close)))


# ---- recovery steps ------------------------------------------------------------------

TryDecode = Callable[[bytes], "object | None"]
"""A line → its frame or :class:`Unknown`, or None when it is not whole JSON."""

Pair = tuple[object, bytes]
"""An item and the raw bytes it came from."""


class Recovery(Protocol):
    """Rule 7: what happens to lines that are not whole JSON."""

    @property
    def holding(self) -> bool:
        """True while a piece is held back waiting for the next line (no block decoding)."""
        ...

    def line(self, line: bytes, decode: TryDecode) -> list[Pair]:
        """Every line of a block that goes line by line: its items."""
        ...

    def eof(self) -> list[Pair]:
        """The input ended: whatever is held back, as items."""
        ...


class NoRecovery:
    """Lines that are not JSON are reported, nothing else."""

    holding = False

    def line(self, line: bytes, decode: TryDecode) -> list[Pair]:
        item = decode(line)
        return [(item if item is not None else BadLine(line, NOT_JSON), line)]

    def eof(self) -> list[Pair]:
        return []


class SpliceRecovery:
    """Frames spliced into each other by a racing writer, pieced back together.

    Claude Code has shipped a writer race where an asynchronous frame lands in
    the middle of another line — ``A-head B \\n A-tail \\n`` — so the first
    line holds a complete ``B`` after a broken prefix and the second is the
    rest of ``A``.  ``B`` is recovered at once, the prefix is held back and
    joined with the next line if that completes it; two objects glued without
    a newline are split the same way.  The search is bounded (``max_tries``
    candidate starts per line) so a hostile line costs linear work, not more.
    """

    def __init__(self, max_tries: int = 64) -> None:
        self.max_tries = max_tries
        self._head: bytes | None = None

    @property
    def holding(self) -> bool:
        return self._head is not None

    def line(self, line: bytes, decode: TryDecode) -> list[Pair]:
        head, self._head = self._head, None
        out: list[Pair] = []
        item = decode(line)
        if item is not None:
            if head is not None:
                out.append((BadLine(head, NEVER_COMPLETED), head))
            out.append((item, line))
            return out
        if head is not None:
            joined = head + line
            item = decode(joined)
            if item is not None:
                return [(item, joined)]
            out.append((BadLine(head, NEVER_COMPLETED), head))
        return out + self._split(line, decode)

    def _split(self, line: bytes, decode: TryDecode) -> list[Pair]:
        pos = line.find(b'{"', 1)
        tries = 0
        while pos > 0 and tries < self.max_tries:
            tries += 1
            tail = line[pos:]
            item = decode(tail)
            if item is not None:
                prefix = line[:pos]
                whole = decode(prefix)
                if whole is not None:
                    return [(whole, prefix), (item, tail)]  # two frames glued together
                self._head = prefix  # the rest of it should be the next line
                return [(item, tail)]
            pos = line.find(b'{"', pos + 1)
        return [(BadLine(line, NOT_JSON), line)]

    def eof(self) -> list[Pair]:
        head, self._head = self._head, None
        return [] if head is None else [(BadLine(head, "incomplete line at end of output"), head)]


# ---- the reader ----------------------------------------------------------------------


class Lines(Generic[T]):
    """What one read decoded to: the items in input order and, on demand, each one's bytes.

    Raw bytes are only needed for the few frames a binding logs raw, so a block
    decoded in one call keeps the block and splits it only when asked.
    """

    __slots__ = ("_block", "_raws", "_trim", "items")

    def __init__(self, items: list[T | Problem], block: bytes | None = None,
                 raws: list[bytes] | None = None, trim: int = 0) -> None:
        self.items = items
        self._block = block  # the lines not split yet (after those in _raws) …
        self._trim = trim  # … between this many bytes of wrapping at each end
        self._raws = raws if raws is not None else []

    def raw(self, index: int, near: bytes = b"",
            same: Callable[[bytes], bool] | None = None) -> bytes:
        """Line ``index`` as it was read.

        Splitting a whole read costs more than decoding a few of its lines, so
        a caller that knows a piece of the line (``near``: an id it carried)
        and can recognise it (``same``: decodes to the item it has) gets it by
        one search near where it should be; otherwise the read is split, only
        as far as ``index``.
        """
        raws = self._raws
        block = self._block
        if near and same is not None and block is not None and index >= len(raws):
            found = self._near(block, index - len(raws), near, same)
            if found is not None:
                return found
        if self._trim and self._block is not None:
            self._block, self._trim = self._block[self._trim:-self._trim], 0
        while index >= len(raws) and self._block is not None:
            # split only as far as asked: few lines of a read are ever wanted raw
            need = index + 1 - len(raws)
            parts = self._block.split(b"\n", need)
            self._block = parts.pop() if len(parts) > need else None
            raws += parts
        return raws[index].rstrip(b"\r")

    def _near(self, block: bytes, index: int, near: bytes,
              same: Callable[[bytes], bool]) -> bytes | None:
        first, past = self._trim, len(block) - self._trim
        guess = first + (past - first) * index // max(1, len(self.items) - len(self._raws))
        for lo, hi in ((guess - _WINDOW, guess + _WINDOW), (first, past)):
            at = block.find(near, max(first, lo), min(past, hi))
            if at >= 0:
                newline = block.rfind(b"\n", first, at)
                start = newline + 1 if newline >= 0 else first
                end = block.find(b"\n", at, past)
                line = block[start:end if end >= 0 else past].rstrip(b"\r")
                if same(line):
                    return line
        return None


class NdjsonReader(Generic[T]):
    """Rules 5-8: the framer plus a binding's decoders.

    ``decode_block`` takes a JSON array (the block's lines joined) and returns
    one frame per element, raising on anything wrong; ``decode_line`` takes one
    line and returns a frame or :class:`Unknown`, raising ``msgspec.DecodeError``
    when the line is not whole JSON.
    """

    def __init__(self, decode_line: Callable[[bytes], T | Unknown],
                 decode_block: Callable[[bytes], list[T]] | None = None, *,
                 max_line: int = MAX_LINE, recovery: Recovery | None = None) -> None:
        wrap = (b"[", b"]") if decode_block is not None else (b"", b"")
        self.framer = LineFramer(max_line, wrap)
        self._trim = len(wrap[0])
        self.recovery: Recovery = recovery if recovery is not None else SpliceRecovery()
        self._decode_line = decode_line
        self._decode_block = decode_block

    @property
    def max_line(self) -> int:
        return self.framer.max_line

    def feed(self, data: bytes) -> Lines[T]:
        return self._decode(self.framer.feed(data), end=False)

    def eof(self) -> Lines[T]:
        return self._decode(self.framer.eof(), end=True)

    def _try(self, line: bytes) -> T | Unknown | None:
        try:
            return self._decode_line(line)
        except msgspec.DecodeError:
            return None

    def _decode(self, pieces: list[bytes | Overlong], end: bool) -> Lines[T]:
        if len(pieces) == 1 and not end and type(pieces[0]) is bytes:
            block = pieces[0]
            items = self._block(block)
            if items is not None:
                return Lines(items, block=block, trim=self._trim)
        if not pieces and not end:
            return Lines([], raws=[])
        items_out: list[T | Problem] = []
        raws: list[bytes] = []
        for piece in pieces:
            if type(piece) is Overlong:
                items_out.append(BadLine(piece.head, f"line longer than {self.max_line} bytes",
                                         piece.size))
                raws.append(piece.head)
                continue
            block = piece  # type: ignore[assignment]
            items = self._block(block)
            inner = block[self._trim:len(block) - self._trim]
            if items is not None:
                items_out += items
                raws += [line.rstrip(b"\r") for line in inner.split(b"\n")]
                continue
            for line in inner.split(b"\n"):
                if not line.strip():
                    continue
                for item, raw in self.recovery.line(line.rstrip(b"\r"), self._try):
                    items_out.append(item)  # type: ignore[arg-type]
                    raws.append(raw)
        if end:
            for item, raw in self.recovery.eof():
                items_out.append(item)  # type: ignore[arg-type]
                raws.append(raw)
        return Lines(items_out, raws=raws)

    def _block(self, block: bytes) -> list[T] | None:
        """Every line of the block in one call, or None to go line by line.

        The lines are joined into one JSON array with ``,\\n``.  That array
        says what the lines say one by one exactly when each line holds one
        value, and the cheap checks see to it:

        * a line cut inside a string cannot join the next into one valid
          string: the newline stays, and raw control characters are invalid
          JSON; a blank line makes ``,,``, and frames glued without a comma
          (a racing writer's splice) are not an array's syntax: all invalid;
        * the value count must equal the line count (the commas added: no
          ``bytes.count`` pass), so two lines making one value fail too.

        (Only a line of two comma-separated objects *and* a cut elsewhere in
        the same read could pass; no writer race produces the comma.)
        Everything else goes line by line, where the recovery step sees it.
        """
        decode = self._decode_block
        if decode is None or self.recovery.holding:
            return None
        joined = block.replace(b"\n", b",\n")  # the framer already put the brackets around
        try:
            items = decode(joined)
        except (msgspec.DecodeError, ValueError, TypeError):
            return None
        if len(items) != len(joined) - len(block) + 1:  # one comma was added per newline
            return None
        return items
