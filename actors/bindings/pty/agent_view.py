"""What trio-cap's TUI agent draws: the screen as rows of text, and the bytes that repaint it.

The layout copies what real agent TUIs draw (docs/research/cap-protocol/
real-agent-tuis-pty.md), so a PTY driver meets the same difficulties here as
there: a header, a transcript that scrolls inside an alternate screen (no
terminal scrollback), a status row whose spinner repaints ten times a second,
and a box-drawn input box whose bottom border carries the key hint.  Only the
rows that changed are repainted, cursor-addressed, the way full-screen TUIs
do, so a driver that diffs raw bytes instead of the rendered screen sees
garbage.

Pure: rows in, bytes out; widths follow East Asian Width (wide characters
take two cells, combining marks none) as terminals and pyte count them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

ENTER_SCREEN = b"\x1b[?1049h\x1b[?2004h\x1b[H\x1b[2J"
"""Alternate screen on, bracketed paste on, home, clear."""
LEAVE_SCREEN = b"\x1b[?2004l\x1b[?25h\x1b[?1049l"

HINT_IDLE = "? for shortcuts"
HINT_WORKING = "esc to interrupt"
HINT_ASKING = "y/n to answer"
HINT_ANSWER = "type your answer · enter to send"
HINT_NUDGE = "press enter again to send"
PROMPT_GLYPH = "\u276f"  # ❯ (heavy right-pointing angle), as Claude Code draws it  # noqa: RUF003
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def cell_width(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def text_width(text: str) -> int:
    return sum(cell_width(ch) for ch in text)


def clip(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` cells (a wide character never half-shown)."""
    out, used = [], 0
    for ch in text:
        w = cell_width(ch)
        if used + w > width:
            break
        out.append(ch)
        used += w
    return "".join(out)


def wrap(text: str, width: int) -> list[str]:
    """Hard-wrap one logical line to ``width`` cells, as a terminal would."""
    if width <= 0:
        return [text]
    rows, row, used = [], [], 0
    for ch in text:
        w = cell_width(ch)
        if used + w > width:
            rows.append("".join(row))
            row, used = [], 0
        row.append(ch)
        used += w
    rows.append("".join(row))
    return rows


def box_line(inner: str, cols: int, left: str = "│", right: str = "│") -> str:
    room = max(0, cols - 2)
    body = clip(inner, room)
    return left + body + " " * (room - text_width(body)) + right


def border(cols: int, top: bool, hint: str = "") -> str:
    left, right = ("╭", "╮") if top else ("╰", "╯")
    room = max(0, cols - 2)
    label = f"─ {hint} " if hint else ""
    label = clip(label, room)
    return left + label + "─" * (room - text_width(label)) + right


def layout(*, cols: int, rows: int, header: str, transcript: Sequence[str], status: str,
           input_text: str, hint: str) -> list[str]:
    """The whole screen, ``rows`` strings: header, blank, transcript tail, status, input box."""
    body_rows = max(0, rows - 6)
    wrapped: list[str] = []
    for line in transcript:
        wrapped.extend(wrap(line, cols))
    tail = wrapped[-body_rows:] if body_rows else []
    screen = [clip(header, cols), ""]
    screen += tail + [""] * (body_rows - len(tail))
    screen.append(clip(status, cols))
    screen.append(border(cols, True))
    screen.append(box_line(f" {PROMPT_GLYPH} {input_text}", cols))
    screen.append(border(cols, False, hint))
    return screen[:rows]


def input_cursor(cols: int, rows: int, input_text: str) -> tuple[int, int]:
    """(row, col), 1-based, where the cursor sits in the input box."""
    col = min(cols - 1, 2 + text_width(f"{PROMPT_GLYPH} {input_text}"))
    return rows - 1, max(1, col)


def repaint(old: Sequence[str] | None, new: Sequence[str], cursor: tuple[int, int] | None,
            ) -> bytes:
    """Bytes that turn screen ``old`` into ``new``: only changed rows, each cleared to its end.

    ``old`` None repaints everything after a clear (first frame, resize).  The cursor
    ends in the input box, or is hidden while there is nowhere to type."""
    out = [b"\x1b[?25l"]
    if old is None:
        out.append(b"\x1b[H\x1b[2J")
    for i, row in enumerate(new):
        if old is not None and i < len(old) and old[i] == row:
            continue
        out.append(f"\x1b[{i + 1};1H".encode())
        out.append(row.rstrip(" ").encode())
        out.append(b"\x1b[K")
    if cursor is not None:
        out.append(f"\x1b[{cursor[0]};{cursor[1]}H\x1b[?25h".encode())
    return b"".join(out)
