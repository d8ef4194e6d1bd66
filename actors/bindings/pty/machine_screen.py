"""The PTY driver's terminal: a pyte screen with cheap scrollback and the alternate screen.

What the settle machine's regexes see is the *rendered* screen (CAP §6.1,
Appendix A1), never the raw bytes, so the driver needs a real VT emulator.
pyte is one, with two gaps this module fills:

* **Scrollback, cheaply.** pyte's ``HistoryScreen`` wraps every attribute
  access of the screen in a Python closure (``__getattribute__``), which
  costs it most of its speed on a redraw-heavy stream.  Here the only hook is
  :meth:`index`: a line that scrolls off the top of a full-height scroll
  region is appended, as the very row object pyte drops, to a bounded deque
  (10,000 lines by default).  Nothing is copied or rendered until someone
  reads it.
* **The alternate screen** (private modes 47, 1047, 1049), which pyte
  ignores: entering swaps in a fresh buffer (1049 also saves the cursor),
  leaving restores the main one.  Each switch starts a new *generation*, so
  the machine knows its row numbers refer to another buffer now.

Rows are numbered absolutely within a generation: row ``n`` is
``scrolled + y`` for screen row ``y``, so a line keeps its number while it
scrolls into the scrollback.  :attr:`touched` is the smallest absolute row any
write reached since :meth:`take_touched`; the machine uses it to tell lines a
TUI is still redrawing from lines that are done.

Wide characters take two cells; pyte stores an empty string in the second, so
joining a row's cells renders it correctly.  Bracketed-paste mode (2004) is
tracked so input is only wrapped for a program that asked for it.

Pure: pyte and the standard library only (a machine helper, DESIGN §2a).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import pyte
from pyte import modes as _modes
from wcwidth import wcwidth

SCROLLBACK = 10_000
"""Lines kept after they scroll off the top (CAP Appendix A5 asks for at least 10,000)."""

_ALT_MODES = frozenset({47, 1047, 1049})
_OWN_QUERIES = re.compile(rb"\x1b\[>0?c|\x1b\](1[01]);\?(\x07|\x1b\\)")
"""Queries answered here, not by pyte: the secondary DA (pyte drops the ``>`` and would
answer a primary one) and the default colour queries OSC 10/11 (pyte reads them as an
icon name).  Codex, asked nothing else, hangs on a prompt typed while it still waits
for the colours (seen here three times in four runs)."""
SECONDARY_DA_REPLY = "\x1b[>0;10;0c"
"""Secondary device attributes as a VT100-class terminal gives them (type 0, version 10)."""
COLOUR_REPLIES = {b"10": "rgb:ffff/ffff/ffff", b"11": "rgb:0000/0000/0000"}
"""The default foreground and background a query is told: white on black."""


def _own_reply(query: re.Match[bytes]) -> str:
    which = query.group(1)
    if which is None:
        return SECONDARY_DA_REPLY
    end = query.group(2).decode()
    return f"\x1b]{which.decode()};{COLOUR_REPLIES[which]}{end}"
_PASTE_MODE = 2004
_NO_TOUCH = 1 << 62
_IRM = _modes.IRM
_DECAWM = _modes.DECAWM


class TuiVtScreen(pyte.Screen):
    """A pyte ``Screen`` with bounded scrollback, the alternate screen and write tracking."""

    def __init__(self, columns: int, lines: int, scrollback: int = SCROLLBACK) -> None:
        self.scrollback: deque[Any] = deque(maxlen=scrollback)
        """Rows that scrolled off the top, oldest first (pyte's own row objects)."""
        self.scrolled = 0
        """Rows scrolled off in this generation (the absolute number of screen row 0)."""
        self.generation = 0
        """Bumped at every switch between the main and the alternate screen."""
        self.alternate = False
        self.paste_mode = False
        """The program enabled bracketed paste (``CSI ? 2004 h``)."""
        self.touched = _NO_TOUCH
        self._main: tuple[Any, int, deque[Any]] | None = None
        self._rows: list[str] | None = None
        self.wrapped: set[int] = set()
        """Absolute rows whose line went on in the next row (autowrap, not a line feed):
        the machine reads them as one logical line (CAP Appendix A2)."""
        self._drawing = False
        self._cells: dict[Any, dict[str, Any]] = {}
        """Cursor attributes → character → its cell: one cell object per character and
        colour, made once (cells are immutable)."""
        self.before_switch: Callable[[], None] | None = None
        """Called just before a buffer switch, while the old buffer is still readable."""
        self.replies: list[str] = []
        """What a terminal answers to the program's queries (device attributes, status,
        cursor position), oldest first; the machine writes them back to the program."""
        super().__init__(columns, lines)
        self._stream = pyte.ByteStream(self)

    # ---- input --------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        """Bytes exactly as read from the PTY master (UTF-8 split across reads is fine)."""
        self._rows = None
        if (b"\x1b[>" in data or b"\x1b]1" in data) and _OWN_QUERIES.search(data):
            at = 0
            for query in _OWN_QUERIES.finditer(data):
                self._stream.feed(data[at:query.start()])
                self.write_process_input(_own_reply(query))
                at = query.end()
            data = data[at:]
        self._stream.feed(data)

    def write_process_input(self, data: str) -> None:
        """pyte's hook for a query's answer.  Programs built on crossterm (Codex) or
        blessed send ``CSI c`` / ``CSI 6 n`` and wait for the answer as a real terminal
        gives it; unanswered, they stall on a timeout (Codex once took a submitted prompt
        and never sent it on)."""
        self.replies.append(data)

    def take_replies(self) -> bytes:
        out, self.replies = self.replies, []
        return "".join(out).encode()

    # ---- reading ------------------------------------------------------------
    def render_row(self, row: Any, strip: bool = True) -> str:
        """One row's text, trailing blanks stripped unless ``strip`` is false (a row that
        wraps on: its blanks belong to the line); a wide character's stub cell is ''.

        Rows are sparse (erased cells are dropped), so only the cells present are visited."""
        if not row:
            return "" if strip else " " * self.columns
        columns = self.columns
        cells = [" "] * columns
        for x, cell in row.items():
            if x < columns:
                cells[x] = cell.data
        text = "".join(cells)
        return text.rstrip() if strip else text

    def rows(self) -> list[str]:
        """The visible screen, one rendered string per row (kept until the next feed:
        a settle asks several questions of the same screen)."""
        rows = self._rows
        if rows is None:
            buffer, render = self.buffer, self.render_row
            rows = self._rows = [render(buffer[y]) if y in buffer else ""
                                 for y in range(self.lines)]
        return rows

    @property
    def cursor_row(self) -> int:
        """The cursor's absolute row in this generation."""
        return self.scrolled + self.cursor.y

    @property
    def first_row(self) -> int:
        """The oldest absolute row still kept (in the scrollback or on screen)."""
        return self.scrolled - len(self.scrollback)

    def row_text(self, n: int, strip: bool = True) -> str | None:
        """Absolute row ``n`` of this generation, or None when it is gone or not yet there."""
        if n >= self.scrolled:
            y = n - self.scrolled
            if y >= self.lines:
                return None
            return self.render_row(self.buffer.get(y, {}), strip)
        i = n - self.first_row
        if i < 0:
            return None
        return self.render_row(self.scrollback[i], strip)

    def history(self) -> Iterator[str]:
        """The scrollback, rendered, oldest first."""
        for row in self.scrollback:
            yield self.render_row(row)

    def take_touched(self) -> int:
        """The smallest absolute row written since the last call (a large number if none)."""
        touched, self.touched = self.touched, _NO_TOUCH
        return touched

    # ---- scrolling: the one scrollback hook ------------------------------------
    def index(self) -> None:
        """Line feed at the bottom of the scroll region scrolls it; the row leaving a
        full-height region goes to the scrollback as it is.  Rows are moved, not copied,
        and an empty row is left absent (pyte would create it), so the buffer stays
        sparse; pyte's dirty-row bookkeeping, which nothing here reads, is skipped."""
        margins = self.margins
        top, bottom = (margins.top, margins.bottom) if margins else (0, self.lines - 1)
        cursor = self.cursor
        if cursor.y != bottom:
            if cursor.y < self.lines - 1:
                cursor.y += 1
            return
        buffer = self.buffer
        gone = buffer.pop(top, None)
        if top == 0:
            self.scrollback.append({} if gone is None else gone)
            self.scrolled += 1  # rows move up and keep their absolute numbers
            if len(self.wrapped) > 2 * (self.scrollback.maxlen or 1):
                self._forget_wrapped(0, 0)
        pop = buffer.pop
        for y in range(top, bottom):
            row = pop(y + 1, None)
            if row is not None:
                buffer[y] = row

    # ---- writes: tracked for the machine's "done" lines ---------------------------
    def _touch(self, y: int) -> None:
        row = self.scrolled + y
        if row < self.touched:
            self.touched = row

    def draw(self, data: str) -> None:
        """Text at the cursor.  The common case — every character one cell wide, autowrap
        on, insert mode off — is written here with one cached cell per character and
        colour; anything else (wide or combining characters, IRM, no autowrap) from the
        first such character on goes through pyte's own ``draw``."""
        cursor = self.cursor
        row = self.scrolled + cursor.y
        if row < self.touched:
            self.touched = row
        mode = self.mode
        if _IRM in mode or _DECAWM not in mode:
            self._slow_draw(data)
            return
        data = data.translate(self.g1_charset if self.charset else self.g0_charset)
        attrs = cursor.attrs
        cells = self._cells.get(attrs)
        if cells is None:
            if len(self._cells) > 64:
                self._cells.clear()
            cells = self._cells[attrs] = {}
        columns = self.columns
        x = cursor.x
        line = self.buffer[cursor.y]
        for i, char in enumerate(data):
            cell = cells.get(char)
            if cell is None:
                if wcwidth(char) != 1:
                    cursor.x = x
                    self._slow_draw(data[i:])
                    return
                cell = cells[char] = attrs._replace(data=char)
            if x == columns:  # past the last column: wrap first, as a terminal does
                cursor.x = 0
                self.wrapped.add(self.scrolled + cursor.y)
                self.index()
                line = self.buffer[cursor.y]
                x = 0
            line[x] = cell
            x += 1
        cursor.x = x

    def _slow_draw(self, data: str) -> None:
        """pyte's own ``draw``; a wrap it makes goes through :meth:`linefeed`, marked."""
        self._drawing = True
        try:
            super().draw(data)
        finally:
            self._drawing = False

    def linefeed(self) -> None:
        if self._drawing:  # pyte's draw wrapping the line, not the program's line feed
            self.wrapped.add(self.scrolled + self.cursor.y)
        super().linefeed()

    def erase_in_line(self, how: int = 0, private: bool = False) -> None:
        """Erased cells are dropped from the row (a missing cell renders as a blank, the
        same text pyte's space-filled cells give, for far fewer writes)."""
        cursor = self.cursor
        row = self.scrolled + cursor.y
        if row < self.touched:
            self.touched = row
        if how == 2:
            self.wrapped.discard(row)
        line = self.buffer.get(cursor.y)
        if not line:
            return
        if how == 2:
            line.clear()
            return
        xs = range(cursor.x, self.columns) if how == 0 else range(min(cursor.x + 1,
                                                                       self.columns))
        pop = line.pop
        for x in xs:
            pop(x, None)

    def erase_characters(self, count: int | None = None) -> None:
        self._touch(self.cursor.y)
        super().erase_characters(count)

    def delete_characters(self, count: int | None = None) -> None:
        self._touch(self.cursor.y)
        super().delete_characters(count)

    def insert_characters(self, count: int | None = None) -> None:
        self._touch(self.cursor.y)
        super().insert_characters(count)

    def insert_lines(self, count: int | None = None) -> None:
        self._touch(self.cursor.y)
        super().insert_lines(count)

    def delete_lines(self, count: int | None = None) -> None:
        self._touch(self.cursor.y)
        super().delete_lines(count)

    def select_graphic_rendition(self, *attrs: int, private: bool = False) -> None:
        if private:  # CSI > 4;2 m (xterm modifyOtherKeys, Gemini CLI sends it): not a colour
            return
        super().select_graphic_rendition(*attrs)

    def reverse_index(self) -> None:
        top = self.margins.top if self.margins else 0
        if self.cursor.y == top:
            self._touch(top)
        super().reverse_index()

    def erase_in_display(self, how: int = 0, *args: Any, **kwargs: Any) -> None:
        """As :meth:`erase_in_line`: erased rows are dropped, not filled with blanks."""
        y = self.cursor.y
        self._touch(0 if how in (1, 2, 3) else y)
        buffer = self.buffer
        if self.wrapped:
            self._forget_wrapped(self.scrolled + (0 if how in (1, 2, 3) else y),
                                 self.scrolled + (y if how == 1 else self.lines))
        if how in (2, 3):
            buffer.clear()
        else:
            for row in (range(y + 1, self.lines) if how == 0 else range(y)):
                buffer.pop(row, None)
            self.erase_in_line(how)
        if how == 3:  # "erase saved lines": the program cleared its scrollback
            self.scrollback.clear()

    # ---- modes: the alternate screen and bracketed paste ----------------------------
    def set_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private"):
            rest = [m for m in modes if m not in _ALT_MODES and m != _PASTE_MODE]
            if _PASTE_MODE in modes:
                self.paste_mode = True
            for mode in modes:
                if mode in _ALT_MODES:
                    self._enter_alternate(save_cursor=mode == 1049)
            if not rest:
                return
            modes = tuple(rest)
        super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private"):
            rest = [m for m in modes if m not in _ALT_MODES and m != _PASTE_MODE]
            if _PASTE_MODE in modes:
                self.paste_mode = False
            for mode in modes:
                if mode in _ALT_MODES:
                    self._leave_alternate(restore_cursor=mode == 1049)
            if not rest:
                return
            modes = tuple(rest)
        super().reset_mode(*modes, **kwargs)

    def _fresh_buffer(self) -> Any:
        return type(self.buffer)(self.buffer.default_factory)

    def _enter_alternate(self, *, save_cursor: bool) -> None:
        if self.alternate:
            return
        if self.before_switch is not None:
            self.before_switch()
        if save_cursor:
            self.save_cursor()
        self._main = (self.buffer, self.scrolled, self.scrollback)
        self.buffer = self._fresh_buffer()
        self.scrollback = deque(maxlen=self.scrollback.maxlen)
        self.scrolled = 0
        self._switched(alternate=True)

    def _leave_alternate(self, *, restore_cursor: bool) -> None:
        if not self.alternate or self._main is None:
            return
        if self.before_switch is not None:
            self.before_switch()
        self.buffer, self.scrolled, self.scrollback = self._main
        self._main = None
        self._switched(alternate=False)
        if restore_cursor:
            self.restore_cursor()

    def _forget_wrapped(self, first: int, last: int) -> None:
        self.wrapped.difference_update(range(first, last))
        if len(self.wrapped) > 2 * (self.scrollback.maxlen or 1):  # rows long gone
            oldest = self.first_row
            self.wrapped = {n for n in self.wrapped if n >= oldest}

    def _switched(self, *, alternate: bool) -> None:
        self._rows = None
        self.wrapped = set()
        self.alternate = alternate
        self.generation += 1
        self.touched = _NO_TOUCH
        self.dirty.update(range(self.lines))

    def resize(self, lines: int | None = None, columns: int | None = None) -> None:
        self._rows = None
        super().resize(lines, columns)
        self.touched = min(self.touched, self.scrolled)  # everything may be redrawn
