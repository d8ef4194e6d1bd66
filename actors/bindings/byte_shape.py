"""The byte shape of a stream's text events: learnt from a decoded one, matched in bytes.

Part of the binding kit: any binding whose agent writes a turn's text as a run of
frames that differ only in string values can match that run in bytes.  For
example, an A2A server writes a turn's text as a run of events that differ only in a few
string values: a2a-sdk's ``artifactUpdate`` chunks differ only in their text,
Gemini-style ``statusUpdate`` WORKING messages in their text, ``messageId``
and ``timestamp``.  Everything else (ids, key order, spacing, the JSON-RPC
envelope) is the same bytes every time.  A :class:`Shape` is those bytes cut
at the varying values: constant segments with a JSON string *hole* between
each two.  A payload matches when it is the segments with anything between
them (``startswith`` / ``find`` / ``endswith``, all memcmp/memchr); the holes
of a run are then decoded in one ``msgspec`` call as a list of strings.

Why that is the full typed decode: a shape is learnt only from a payload
the full Structs decoded, and only after a *probe* (the payload with every
hole set to a marker string) decoded to the same frame with the markers in
the fields the holes name.  JSON is context free: putting any other string
token in a string token's place changes that value and nothing else.  So a
payload that is the segments around valid string bodies decodes, with the
full Structs, to the learnt frame with those values, and the holes' decode
checks they are valid string bodies: a hole holding an unescaped quote adds
list items (or breaks the list), so the count tells.  Anything else is not a
match and goes through the full decode.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from itertools import repeat
from operator import getitem

import msgspec

try:
    from trio_cap.actors.bindings import _byte_shape  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - built wherever the tests run
    _byte_shape = None

__all__ = ["NATIVE", "Markers", "Matcher", "Shape", "Sized", "Taken", "decode_holes", "learn",
           "pinnable"]

NATIVE = _byte_shape is not None
"""True when :meth:`Shape.match` runs the C match (``_byte_shape.c``; the bench says which)."""


def pinnable(pins: Mapping[str, bytes]) -> bool:
    """Whether every id may fill in a pinned hole (:meth:`Shape.pinned_to`)."""
    return all(_PLAIN.fullmatch(pin) for pin in pins.values())


_strings = msgspec.json.Decoder(list[str])
_NONE: tuple[str, ...] = ()
"""The values of a hole not read (only checked, or joined)."""
Taken = tuple[int, "list[Sequence[str]] | None", "str | None"]
"""What a match took: (the index of the first payload not taken, each hole's values for the
payloads taken, a hole's values joined); see :meth:`Shape.match`."""
Sized = tuple[int, "list[Sequence[str]] | None", "str | None", int]
"""A :data:`Taken` and the UTF-8 size of its joined text; see :meth:`Matcher.sized`."""
_string = msgspec.json.Decoder(str)
_MARKED = tuple(f"\x01{k}" for k in range(16))
"""The probe's marker strings, hole by hole (a shape has a few holes), and as JSON:"""
_MARKS = tuple(b"\\u0001" + str(k).encode() for k in range(16))
_NUMBER_MARK = 987_654_300
"""A pinned number hole's marker in the probe: this plus the hole's place."""
_QUOTE = 0x22
_PLAIN = re.compile(rb"[\x20\x21\x23-\x5b\x5d-\x7e]+")
"""A string id :meth:`Shape.pinned_to` fills in: printable ASCII, no quote, no backslash."""
_BACKSLASH = 0x5C


class Shape:
    """Constant segments around string holes; ``names`` says which key each hole is the
    value of, in the payload's order."""

    __slots__ = ("_plan", "_py", "names", "pinned", "segments", "whole", "widths")

    def __init__(self, segments: list[bytes], names: tuple[str, ...],
                 widths: list[int], pinned: tuple[int, ...] = ()) -> None:
        self.segments = segments
        self.whole = tuple(segments)
        self.names = names
        self.widths = widths
        """Each hole's width but the last's, in the payload learnt."""
        self.pinned = pinned
        """The holes that stand for ids (see :func:`learn`): :meth:`pinned_to` fills them
        in; a shape with any is matched only that way."""
        self._py: _PyParts | None = None
        self._plan: _PinPlan | None = None

    @property
    def py(self) -> _PyParts:
        """What the Python match needs, made when it first runs (the C match needs only
        the segments, and a shape is learnt once a turn)."""
        if self._py is None:
            self._py = _PyParts(self.segments, self.widths)
        return self._py

    @property
    def first(self) -> bytes:
        return self.segments[0]

    @property
    def last(self) -> bytes:
        return self.segments[-1]

    @property
    def cut(self) -> bytes:
        return self.py.cut

    @property
    def slices(self) -> tuple[slice, ...]:
        return self.py.slices

    def pinned_to(self, pins: Mapping[str, bytes]) -> Shape | None:
        """This shape for one turn's ids: each pinned hole filled in with the raw bytes
        ``pins`` gives its key, joining the segments around it; the other holes are left.
        None if a pin could change more than its own value: a string id must be printable
        ASCII with no quote or backslash (a JSON encoder writes such a one as it is), a
        number id digits only.

        Why this is as sound as a probe: the probe found each pinned hole's marker in a
        field of its key; another plain string in a string's place, or other digits in a
        number's, changes that value and nothing else (JSON is context free), so a payload
        of the filled-in shape is the learnt one with these ids and its own texts."""
        plan = self._plan
        if plan is None:
            plan = self._plan = _PinPlan(self)
        for name, number in plan.checks:
            pin = pins.get(name)
            if pin is None or not (pin.isdigit() if number else _PLAIN.fullmatch(pin)):
                return None
        segments = [piece[0] if len(piece) == 1
                    else b"".join([x if type(x) is bytes else pins[x] for x in piece])
                    for piece in plan.pieces]
        return Shape(segments, plan.names, plan.widths)

    def match(self, datas: Sequence[bytes], i: int, unread: Collection[int] = (),
              joined: int = -1) -> Taken:
        """The payloads of ``datas[i:]`` that have this shape, up to the first that has not:
        (its index, each hole's values for them, a list per name, the text of hole
        ``joined``).  The holes in ``unread`` are only checked, and hole ``joined``'s values
        come concatenated, as that text (its list is empty then): what the caller does not
        use costs no string per payload.  Values None: a hole is no JSON string body, so
        the shape is not to be trusted further (the caller forgets it).  The C match when
        it was built, else :meth:`match_py`, its reference.  A caller matching many runs
        with the same holes unread and joined keeps a :class:`Matcher` instead."""
        return Matcher(self, unread, joined)(datas, i)

    def match_py(self, datas: Sequence[bytes], i: int, unread: Collection[int] = (),
                 joined: int = -1) -> Taken:
        """:meth:`match` in Python: the run of payloads that end as this shape does tried
        whole (:meth:`run`), else one by one (:meth:`take`)."""
        tails = self.tails(datas[i:])
        try:
            j = tails.index(False) + i
        except ValueError:
            j = len(datas)
        columns = self.run(datas, i, j, unread) if j > i else None
        if columns is None:
            holes: list[bytes] = []
            j = self.take(datas, i, holes)
            if j == i:
                return i, [], None
            decoded = decode_holes(holes)
            if decoded is None:
                return i, None, None
            width = len(self.names)
            columns = [_NONE if k in unread else decoded[k::width] for k in range(width)]
        text = None
        if joined >= 0:
            text, columns[joined] = "".join(columns[joined]), _NONE
        return j, columns, text

    def tails(self, datas: Sequence[bytes]) -> list[bool]:
        """Which payloads end as this shape does (one C call per payload, no Python step)."""
        try:
            return list(map(bytes.endswith, datas, repeat(self.last)))
        except TypeError:  # not bytes: none is taken so
            return [False] * len(datas)

    def run(self, datas: Sequence[bytes], i: int, j: int,
            unread: Collection[int] = ()) -> list[list[str]] | None:
        """The values of each hole (a list per name) if every payload of ``datas[i:j]`` has
        this shape with its holes where :attr:`slices` guess; else None (:meth:`take`
        tells them apart one by one).  Whole-run bytes operations, no Python step per
        payload: the holes are cut out at the guessed places, put back between the
        segments, and the run has the shape iff that rebuilds the payloads joined with
        LF.  (Neither the segments nor a string body hold an LF, so the rebuilt bytes
        have LFs only between payloads: each payload is its own rebuilt one.)

        In a shape of several holes, those numbered in ``unread`` are checked only (their
        lists come back empty): what the caller does not use (a timestamp) costs no
        string per payload."""
        run = datas[i:j] if i or j < len(datas) else datas
        n = len(run)
        py = self.py
        checked: list[list[bytes]] = []
        if len(py.slices) == 1:
            holes = list(map(getitem, run, repeat(py.slices[0])))
            middle, last = py.cut.join(holes), self.last
        else:  # hole after hole, each column's cut after it: one join over all
            width = 2 * len(py.slices)
            pieces: list[bytes] = [b""] * (width * n)
            holes = []
            for k, (sl, seg) in enumerate(zip(py.slices, py.cuts, strict=True)):
                column = list(map(getitem, run, repeat(sl)))
                if k in unread:
                    checked.append(column)
                else:
                    holes += column
                pieces[2 * k::width] = column
                pieces[2 * k + 1::width] = [seg] * n
            pieces[-1] = self.last
            middle, last = b"".join(pieces), b""
        # rebuilt == joined, without building the rebuilt bytes (compared in place)
        joined, first = b"\n".join(run), self.first
        if len(joined) != len(first) + len(middle) + len(last) or not joined.startswith(first) \
                or not joined.startswith(middle, len(first)) or not joined.endswith(last):
            return None
        values = decode_holes(holes) if holes else []
        if values is None or not all(map(_bodies, checked)):
            return None
        if not checked:
            return [values[k:k + n] for k in range(0, len(values), n)]
        at, out = 0, []
        for k in range(len(py.slices)):
            if k in unread:
                out.append(_NONE)
            else:
                out.append(values[at:at + n])
                at += n
        return out

    def take(self, datas: Sequence[bytes], i: int, holes: list[bytes]) -> int:
        """Match ``datas[i:]`` one by one while they have this shape, their holes added to
        ``holes`` (``len(names)`` per payload, in order); the index of the first that does
        not.  A payload has the shape iff it starts with the first segment, ends with the
        last, and holds each middle one in order in between, each where its needle (its
        start up to its second quote) is first found: a string body holds no unescaped
        quote, so a needle is not found inside a hole the decode accepts.  (A short
        needle: ``find`` reads its needle through before it searches.)"""
        py = self.py
        first, last, fixed, n = self.first, self.last, py.fixed, len(datas)
        lf, ll = len(first), len(last)
        append = holes.append
        if not py.middle:  # one hole (an artifact chunk's text): no search at all
            while i < n:
                d = datas[i]
                if len(d) < fixed or not d.startswith(first) or not d.endswith(last):
                    break
                append(d[lf:len(d) - ll])
                i += 1
            return i
        middle = py.middle
        while i < n:
            d = datas[i]
            if len(d) < fixed or not d.startswith(first) or not d.endswith(last):
                break
            end = len(d) - ll
            at = lf
            got = []
            for needle, seg in middle:
                k = d.find(needle, at, end)
                if k < 0 or not d.startswith(seg, k):
                    break
                got.append(d[at:k])
                at = k + len(seg)
            else:
                holes += got
                append(d[at:end])
                i += 1
                continue
            break
        return i


class Matcher:
    """:meth:`Shape.match` with one choice of holes unread and joined, worked out once: a
    driver matches every run of a turn against one shape the same way, and a run is ~30
    events, so what is worked out per call shows."""

    __slots__ = ("joined", "mask", "read", "read_all", "shape", "unread", "whole")

    def __init__(self, shape: Shape, unread: Collection[int] = (), joined: int = -1) -> None:
        if shape.pinned:
            raise ValueError("a shape with pinned holes is matched once they are filled in "
                             "(Shape.pinned_to)")
        self.shape, self.whole, self.joined = shape, shape.whole, joined
        self.unread, self.mask, self.read_all, self.read = _layout(
            len(shape.names), tuple(unread), joined)

    def __call__(self, datas: Sequence[bytes], i: int) -> Taken:
        j, columns, text, _ = self.sized(datas, i)
        return j, columns, text

    def sized(self, datas: Sequence[bytes], i: int) -> Sized:
        """What a call gives, and the UTF-8 size of the joined text (0 without one): the C
        match counts it while it joins, for less than ``len(text.encode())`` costs."""
        if _byte_shape is None or (type(datas) is not list and not hasattr(datas, "spans")):
            j, columns, text = self.shape.match_py(datas, i, self.unread, self.joined)
            return j, columns, text, len(text.encode()) if text else 0
        j, array, text, size = _byte_shape.take(datas, i, self.whole, self.mask, self.joined)
        if j == i:
            return i, [], None, 0
        read = self.read if text is not None else self.read_all
        try:
            values = _strings.decode(array) if array is not None else []
            joined_text = _string.decode(text) if text is not None else None
        except msgspec.DecodeError:
            return i, None, None, 0
        width = len(read)
        if len(values) != width * (j - i):
            return i, None, None, 0
        columns: list[Sequence[str]] = [_NONE] * len(self.shape.names)
        if width == 1:
            columns[read[0]] = values
        else:
            for rank, k in enumerate(read):
                columns[k] = values[rank::width]
        if text is None and self.joined >= 0:  # the run's first body was not joinable
            joined_text = "".join(columns[self.joined])
            columns[self.joined] = _NONE
            size = len(joined_text.encode())
        return j, columns, joined_text, size


@functools.lru_cache(maxsize=256)
def _layout(holes: int, unread: tuple[int, ...], joined: int) -> tuple[
        tuple[int, ...], int, tuple[int, ...], tuple[int, ...]]:
    """A :class:`Matcher`'s choice of holes worked out (a driver makes one per turn, with
    the same choice): the unread holes, as a mask too; the holes in the array when the
    run's text is not joined; and when it is."""
    read_all = tuple(k for k in range(holes) if k not in unread)
    return unread, sum(1 << k for k in unread), read_all, tuple(k for k in read_all if k != joined)


class _PinPlan:
    """What :meth:`Shape.pinned_to` does for any turn's ids, worked out once: a shape is
    filled in at every turn's first text event, and per turn the work showed (~5 us)."""

    __slots__ = ("checks", "names", "pieces", "widths")

    def __init__(self, shape: Shape) -> None:
        pieces: list[list[bytes | str]] = [[shape.segments[0]]]
        names: list[str] = []
        widths: list[int] = []
        checks: dict[tuple[str, bool], None] = {}
        for k, name in enumerate(shape.names):
            after = shape.segments[k + 1]
            if k in shape.pinned:
                checks[name, after[:1] != b'"'] = None  # a number's hole is not quoted
                pieces[-1] += [name, after]
            else:
                names.append(name)
                if k < len(shape.widths):
                    widths.append(shape.widths[k])
                pieces.append([after])
        self.checks = tuple(checks)
        """(key, whether its pin is a number): what each pin must be."""
        self.pieces = tuple(tuple(piece) for piece in pieces)
        """Each segment of the filled-in shape: constant bytes and the keys of pins."""
        self.names = tuple(names)
        self.widths = widths[:len(names) - 1]


class _PyParts:
    """A shape's segments as the Python match reads them."""

    __slots__ = ("cut", "cuts", "fixed", "middle", "slices")

    def __init__(self, segments: list[bytes], widths: list[int]) -> None:
        first, last = segments[0], segments[-1]
        self.middle = tuple((_needle(seg), seg) for seg in segments[1:-1])
        self.fixed = sum(map(len, segments))
        self.cut = last + b"\n" + first
        self.cuts = (*segments[1:-1], self.cut)
        """What follows each hole in payloads joined with LF."""
        at, slices = len(first), []
        for width, seg in zip(widths, segments[1:-1], strict=True):
            slices.append(slice(at, at + width))
            at += width + len(seg)
        slices.append(slice(at, -len(last)))
        self.slices = tuple(slices)
        """Where the holes are if all but the last are as wide as in the payload learnt
        (a timestamp's, an id's usually are): :meth:`Shape.run`'s guess."""


def _needle(segment: bytes) -> bytes:
    """A segment's start up to its second quote (a segment after a hole starts with the
    hole's closing quote and ends with the next one's opening quote)."""
    second = segment.find(b'"', 1)
    return segment[:second + 1] if second > 0 else segment


def _bodies(holes: list[bytes]) -> bool:
    """Whether every hole is a JSON string's body, in one decode into one string: joined
    with ``x``, which ends no escape and is no hex digit, no surrogate and no UTF-8
    continuation, so the joined bytes are a string's body iff every hole is one."""
    try:
        _string.decode(b'"' + b"x".join(holes) + b'"')
    except msgspec.DecodeError:
        return False
    return True


def decode_holes(holes: list[bytes]) -> list[str] | None:
    """Every hole's string value, or None if one is not a JSON string's body."""
    try:
        values = _strings.decode(b'["' + b'","'.join(holes) + b'"]')
    except msgspec.DecodeError:
        return None
    return values if len(values) == len(holes) else None


def _value_span(data: bytes, name: str) -> tuple[int, int] | None:
    """Where the string value of the only key ``name`` lies (inside its quotes), if it has one."""
    spans = _value_spans(data, name)
    return spans[0] if spans is not None and len(spans) == 1 else None


def _value_spans(data: bytes, name: str) -> list[tuple[int, int]] | None:
    """Where the string value of every key ``name`` lies; None if one is not a string (or
    there is none)."""
    key = b'"' + name.encode() + b'":'
    spans = []
    at = data.find(key)
    while at >= 0:
        span = _string_after(data, at + len(key))
        if span is None:
            return None
        spans.append(span)
        at = data.find(key, span[1])
    return spans or None


def _string_after(data: bytes, start: int) -> tuple[int, int] | None:
    """The body of the string value that starts at ``start`` after blanks, if one does."""
    while start < len(data) and data[start] in b" \t":
        start += 1
    if start >= len(data) or data[start] != _QUOTE:
        return None
    start += 1
    end = start
    while True:
        end = data.find(b'"', end)
        if end < 0:
            return None
        back = end - 1
        while data[back] == _BACKSLASH:
            back -= 1
        if (end - 1 - back) % 2 == 0:  # not escaped: the string ends here
            return start, end
        end += 1


def _number_span(data: bytes, name: str) -> tuple[int, int] | None:
    """Where the value of the only key ``name`` lies if it is a whole number token: digits
    after blanks, then ``,``, ``}``, ``]`` or a blank."""
    key = b'"' + name.encode() + b'":'
    at = data.find(key)
    if at < 0 or data.find(key, at + 1) >= 0:
        return None
    start = at + len(key)
    while start < len(data) and data[start] in b" \t":
        start += 1
    end = start
    while end < len(data) and 0x30 <= data[end] <= 0x39:
        end += 1
    if end == start or end >= len(data) or data[end] not in b",}] \t":
        return None
    return start, end


Markers = dict[str, list["str | int"]]
"""The probe's markers by key: one per hole of that key, as the full decode must give them."""


def learn(data: bytes, names: tuple[str, ...], optional: frozenset[str],
          check: Callable[[bytes, Markers], bool], pinned: tuple[str, ...] = (),
          numbers: tuple[str, ...] = ()) -> Shape | None:
    """The shape of ``data`` with the values of keys ``names`` as holes (those in ``optional``
    only if present), or None.  The string values of every key in ``pinned`` and the number
    value of each key in ``numbers`` are holes too, *pinned*: a :class:`Matcher` compares
    them with the values it is given instead of reading them, so the shape outlives the ids
    of one turn.  ``check(probe, markers)`` decodes the probe with the full Structs and says
    whether each named field holds its marker (a key with several holes: its fields hold
    those markers, in any order)."""
    if b"\n" in data:  # Shape.run joins payloads with LF
        return None
    spans: list[tuple[int, int, str, bool]] = []  # (start, end, key, a number)
    for name in names:
        span = _value_span(data, name)
        if span is not None:
            spans.append((*span, name, False))
        elif name not in optional:
            return None
    for name in pinned:
        found = _value_spans(data, name)
        if found is None:
            return None
        spans += [(start, end, name, False) for start, end in found]
    for name in numbers:
        span = _number_span(data, name)
        if span is None:
            return None
        spans.append((*span, name, True))
    if len(spans) > len(_MARKS):
        return None
    spans.sort()
    segments: list[bytes] = []
    probe: list[bytes] = []
    markers: Markers = {}
    at = 0
    for k, (start, end, name, number) in enumerate(spans):
        if start < at:
            return None
        segment = data[at:start]
        segments.append(segment)
        mark: str | int = _NUMBER_MARK + k if number else _MARKED[k]
        probe += (segment, str(mark).encode() if number else _MARKS[k])
        markers.setdefault(name, []).append(mark)
        at = end
    segments.append(data[at:])
    probe.append(segments[-1])
    if not check(b"".join(probe), markers):
        return None
    pinned_at = tuple(k for k, (_, _, name, _) in enumerate(spans)
                      if name in pinned or name in numbers)
    return Shape(segments, tuple(name for _, _, name, _ in spans),
                 [end - start for start, end, _, _ in spans[:-1]], pinned_at)
