"""A terminal's mode changed for a while and put back on every way out.

Shared by ``cap replay --serve pty`` (raw: the recorded program's own echo is in
the recording) and ``cap fleet run``'s live view (cbreak: keys one at a time, Ctrl-C
still interrupts); the restore is the part that must never be skipped.
"""

from __future__ import annotations

import termios
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def terminal_mode(fd: int, set_mode: Callable[[int], object]) -> Iterator[None]:
    """``fd``'s terminal set by ``set_mode`` (``tty.setraw``, ``tty.setcbreak``), and as it
    was again after an error, a cancel or Ctrl-C's KeyboardInterrupt."""
    saved = termios.tcgetattr(fd)
    set_mode(fd)
    try:
        yield
    finally:
        try:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        except termios.error:
            pass  # the terminal is gone (hung up): nothing left to restore
