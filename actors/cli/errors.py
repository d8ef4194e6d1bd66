"""One place that turns anything escaping a command into one line and an exit code.

A user should never see a traceback: Trio wraps errors in exception groups
and the actor runtime wraps an actor's error in ``ActorFailed``, so the
helpers here open both and answer with the cause.  Known categories get their
own message (bad usage: 2; a log that cannot be written: 1; interrupted:
130); anything else is a bug in trio-cap, reported in one line with exit 70
and the way to see the traceback (``CAP_DEBUG=1``).
"""

from __future__ import annotations

import errno
import os
import sys
import traceback

from trio_cap.actors.cli.common import (
    EXIT_FAILED,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    RunFailed,
    UsageError,
    leaves,
)

SINK_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO, errno.EROFS}
"""Write failures that mean "the disk or device will not take it", not a bug."""


def _log_write_errors() -> tuple[type[BaseException], ...]:
    from trio_cap.events.log import LogWriteError

    return (LogWriteError,)


def report(exc: BaseException, prog: str = "cap") -> int:
    """Print what went wrong in one line (two with CAP_DEBUG's traceback) and return the exit
    code.  ``SystemExit`` passes through untouched."""
    found = leaves(exc)
    if any(isinstance(e, SystemExit) for e in found):
        raise exc
    if any(isinstance(e, KeyboardInterrupt) for e in found):
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if found and all(isinstance(e, BrokenPipeError) for e in found):
        # the reader went away (e.g. `| head`); not an error of ours
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return EXIT_OK
    for e in found:
        if isinstance(e, UsageError):
            print(f"{prog}: error: {e}", file=sys.stderr)
            return EXIT_USAGE
    for e in found:
        if isinstance(e, RunFailed):
            print(f"{prog}: {e}", file=sys.stderr)
            return EXIT_FAILED
    for e in found:
        if isinstance(e, _log_write_errors()) or (
            isinstance(e, OSError) and e.errno in SINK_ERRNOS
        ):
            print(f"{prog}: cannot write: {_one_line(e)}; the run stopped", file=sys.stderr)
            return EXIT_FAILED
    first = found[0] if found else exc
    debug = os.environ.get("CAP_DEBUG", "") not in ("", "0")
    if debug:
        traceback.print_exception(exc)
    hint = "" if debug else " (run with CAP_DEBUG=1 for the traceback)"
    print(f"{prog}: internal error: {type(first).__name__}: {_one_line(first)}{hint}",
          file=sys.stderr)
    return EXIT_INTERNAL


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename + ': ' if exc.filename else ''}{exc.strerror}"
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:299] + "…"
