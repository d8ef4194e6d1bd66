"""Keys from the terminal, one at a time, without blocking the Trio loop.

The live view of ``cap fleet run`` answers prompts and takes corrections from the
keyboard while the fleet runs, so stdin goes into cbreak mode (each key as it is typed,
no echo — the view draws what is being typed — but Ctrl-C still interrupts) and is read
only when the loop says it is readable.  The descriptor is never made non-blocking:
stdin usually shares its open file description with stdout, and a non-blocking stdout
would make the view's writes fail with EAGAIN on a slow terminal.
"""

from __future__ import annotations

import codecs
import os
import tty
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager

import trio

from trio_cap.actors.cli.terminal import terminal_mode

ENTER = "enter"
BACKSPACE = "backspace"
ESCAPE = "escape"


def cbreak(fd: int) -> AbstractContextManager[None]:
    """``fd``'s terminal in cbreak mode, and as it was again on every way out (an error,
    a cancel, Ctrl-C's KeyboardInterrupt)."""
    return terminal_mode(fd, tty.setcbreak)


def split_keys(text: str) -> list[str]:
    """Typed text as keys: printable characters as they are, Enter, Backspace and a lone
    Escape by name; escape sequences (arrows, function keys) and other control
    characters are dropped."""
    keys: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        i += 1
        if ch in "\r\n":
            keys.append(ENTER)
        elif ch in "\x7f\b":
            keys.append(BACKSPACE)
        elif ch == "\x1b":
            if i < len(text) and text[i] in "[O":  # CSI / SS3: skip to the final byte
                i += 1
                while i < len(text) and not ("@" <= text[i] <= "~"):
                    i += 1
                i += 1
            else:
                keys.append(ESCAPE)
        elif ch.isprintable():
            keys.append(ch)
    return keys


async def read_keys(fd: int, on_key: Callable[[str], Awaitable[None]]) -> None:
    """Hand every key typed on ``fd`` to ``on_key``, until end of input."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    while True:
        await trio.lowlevel.wait_readable(fd)
        try:
            data = os.read(fd, 1024)
        except BlockingIOError:
            continue  # someone else took it first
        except OSError:  # EIO: the terminal hung up
            return
        if not data:
            return
        for key in split_keys(decoder.decode(data)):
            await on_key(key)
