"""TuiVtScreen: scrollback, the alternate screen, scroll regions, wide characters, erase."""

from __future__ import annotations

import pyte
import pytest

from trio_cap.actors.bindings.pty.machine_screen import SCROLLBACK, TuiVtScreen

ESC = b"\x1b"


def lines(n: int, start: int = 0) -> bytes:
    return b"".join(b"line %d\r\n" % i for i in range(start, start + n))


def test_scrollback_keeps_the_last_ten_thousand_lines_in_order() -> None:
    s = TuiVtScreen(40, 10)
    s.feed(lines(12_345))
    history = list(s.history())
    assert SCROLLBACK >= 10_000 and len(history) == SCROLLBACK
    # 12,345 lines and a cursor on the empty last row: 12,336 scrolled off
    assert history[-1] == "line 12335" and history[0] == f"line {12336 - SCROLLBACK}"
    assert s.rows()[:9] == [f"line {i}" for i in range(12336, 12345)]
    assert s.scrolled == 12336 and s.first_row == 12336 - SCROLLBACK
    assert s.row_text(12_000) == "line 12000"  # by absolute row, in the scrollback …
    assert s.row_text(12_340) == "line 12340"  # … or on the screen
    assert s.row_text(0) is None  # long gone


def test_scrollback_matches_pytes_history_screen() -> None:
    data = lines(300) + b"\x1b[1;31mred\x1b[0m tail\r\n" + "wide 中文 end\r\n".encode()
    ours, theirs = TuiVtScreen(30, 8), pyte.HistoryScreen(30, 8, history=10_000)
    ours.feed(data)
    pyte.ByteStream(theirs).feed(data)
    rendered = ["".join(row[x].data for x in range(30)).rstrip() for row in theirs.history.top]
    assert list(ours.history()) == rendered
    assert ours.rows() == [r.rstrip() for r in theirs.display]


def test_a_scroll_region_not_at_the_top_keeps_its_lines_out_of_the_scrollback() -> None:
    s = TuiVtScreen(20, 10)
    s.feed(b"header\r\n" + ESC + b"[2;8r" + ESC + b"[8;1H" + lines(20) + ESC + b"[r")
    assert list(s.history()) == []  # a status line's region scrolling is not history
    assert s.rows()[0] == "header"
    s = TuiVtScreen(20, 10)
    s.feed(ESC + b"[1;5r" + ESC + b"[5;1H" + lines(7))
    assert list(s.history()) == ["", "", "", "", "line 0", "line 1", "line 2"]  # top region


def test_alternate_screen_1049_saves_and_restores_the_main_screen_and_cursor() -> None:
    s = TuiVtScreen(20, 5)
    s.feed(lines(7) + b"prompt$ ")
    main, cursor, history = s.rows(), (s.cursor.x, s.cursor.y), list(s.history())
    s.feed(ESC + b"[?1049h")
    assert s.alternate and s.rows() == [""] * 5 and s.generation == 1
    s.feed(ESC + b"[2J" + ESC + b"[H" + b"full screen app" + lines(10))
    s.feed(ESC + b"[?1049l")
    assert not s.alternate and s.generation == 2
    assert s.rows() == main and (s.cursor.x, s.cursor.y) == cursor
    assert list(s.history()) == history  # the app's own scrolling is not the shell's history


@pytest.mark.parametrize("mode", [b"47", b"1047"])
def test_alternate_screen_47_and_1047_switch_buffers(mode: bytes) -> None:
    s = TuiVtScreen(20, 4)
    s.feed(b"main text")
    s.feed(ESC + b"[?" + mode + b"h" + ESC + b"[Halt text")
    assert s.rows()[0] == "alt text"
    s.feed(ESC + b"[?" + mode + b"l")
    assert s.rows()[0] == "main text"


def test_the_switch_hook_sees_the_old_buffer() -> None:
    s = TuiVtScreen(20, 4)
    seen: list[list[str]] = []
    s.before_switch = lambda: seen.append(s.rows())
    s.feed(b"before" + ESC + b"[?1049h" + b"during" + ESC + b"[?1049l")
    assert seen[0][0] == "before" and seen[1][0].strip() == "during"


def test_wide_characters_take_two_cells_and_render_once() -> None:
    s = TuiVtScreen(10, 3)
    s.feed("中文ab".encode())
    assert s.rows()[0] == "中文ab" and s.cursor.x == 6
    s.feed("\r\n一二三四五六".encode())  # 12 cells on a 10-column screen: wraps
    assert s.rows()[1] == "一二三四五" and s.rows()[2] == "六"


def test_erase_in_line_and_display_and_cursor_moves() -> None:
    s = TuiVtScreen(20, 4)
    s.feed(b"hello world\r\nsecond\r\nthird")
    s.feed(ESC + b"[1;6H" + ESC + b"[K")  # erase to the end of row 1 from column 6
    assert s.rows()[0] == "hello"
    s.feed(ESC + b"[2;1H" + ESC + b"[2K")
    assert s.rows()[1] == ""
    s.feed(ESC + b"[3;3H" + ESC + b"[1K")  # erase from the start through column 3
    assert s.rows()[2] == "   rd"
    s.feed(ESC + b"[2J")
    assert s.rows() == [""] * 4


def test_erase_saved_lines_clears_the_scrollback() -> None:
    s = TuiVtScreen(20, 3)
    s.feed(lines(10))
    assert list(s.history())
    s.feed(ESC + b"[3J")
    assert list(s.history()) == []


def test_writes_are_tracked_by_absolute_row() -> None:
    s = TuiVtScreen(20, 5)
    s.feed(lines(8))
    s.take_touched()
    s.feed(ESC + b"[2;1Hx")  # screen row 1 = absolute row scrolled + 1
    assert s.take_touched() == s.scrolled + 1
    assert s.take_touched() > 1 << 40  # nothing since


def test_bracketed_paste_mode_is_tracked() -> None:
    s = TuiVtScreen(20, 3)
    assert not s.paste_mode
    s.feed(ESC + b"[?2004h")
    assert s.paste_mode
    s.feed(ESC + b"[?2004l")
    assert not s.paste_mode


def test_utf8_split_across_reads_is_one_character() -> None:
    s = TuiVtScreen(10, 2)
    data = "é中".encode()
    for i in range(len(data)):
        s.feed(data[i:i + 1])
    assert s.rows()[0] == "é中"


def test_a_wrapped_line_is_marked_and_a_line_feed_is_not() -> None:
    s = TuiVtScreen(10, 6)
    s.feed(b"0123456789abc\r\nshort\r\n" + "一二三四五六".encode())
    assert s.rows()[:2] == ["0123456789", "abc"]
    assert 0 in s.wrapped and 1 not in s.wrapped and 2 not in s.wrapped
    assert 3 in s.wrapped  # wide characters wrap through pyte's own draw
    s.feed(b"\x1b[1;1H\x1b[2K")
    assert 0 not in s.wrapped  # the row was erased: nothing continues from it


def test_terminal_queries_are_answered_in_order_and_draw_nothing() -> None:
    """Codex's start-up queries, as it sends them: each answer a terminal gives, in order;
    the colour queries never become an icon name and nothing is drawn."""
    s = TuiVtScreen(80, 24)
    s.feed(b"ab" + ESC + b"[?u" + ESC + b"[?1007$p" + ESC + b"[c" + ESC + b"[6n"
           + ESC + b"]10;?" + ESC + b"\\" + ESC + b"]11;?\x07" + ESC + b"[>c" + ESC + b"[5n")
    assert s.take_replies() == (ESC + b"[?6c" + ESC + b"[1;3R"
                                + ESC + b"]10;rgb:ffff/ffff/ffff" + ESC + b"\\"
                                + ESC + b"]11;rgb:0000/0000/0000\x07"
                                + ESC + b"[>0;10;0c" + ESC + b"[0n")
    assert s.take_replies() == b""
    assert s.rows()[0] == "ab" and s.icon_name == ""


def test_the_machine_writes_the_answers_back_at_once() -> None:
    from trio_cap.actors.bindings.base import ToAgent
    from trio_cap.actors.bindings.pty.machine import PtyMachine, PtySettings

    machine = PtyMachine(PtySettings(), new_id=lambda prefix: f"{prefix}_1", now=0.0)
    out = machine.receive_data(b"hi" + ESC + b"[6n", 0.01)
    assert [o for o in out if isinstance(o, ToAgent)] == [ToAgent(ESC + b"[1;3R")]
