"""What every command module shares: exit codes, the usage error, and input-file readers."""

from __future__ import annotations

from pathlib import Path

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 70
"""EX_SOFTWARE: trio-cap itself failed (a bug); the message says how to get the traceback."""
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
EXIT_HANGUP = 129


class UsageError(Exception):
    """Bad usage or an invalid input file: printed, exit code 2."""


class RunFailed(Exception):
    """The command ran but could not finish (the log cannot be written, …): printed, exit 1."""


def read_text_file(flag: str, path: str) -> str:
    """A text input file named on the command line, or a UsageError that names it and says why.

    Binary files are refused rather than decoded loosely: a prompt or script
    silently mangled by a lenient decoder is worse than a clear refusal.
    """
    try:
        data = Path(path).read_bytes()
    except IsADirectoryError:
        raise UsageError(f"{flag} {path}: is a directory, not a file") from None
    except OSError as exc:
        raise UsageError(f"{flag} {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{flag} {path}: not UTF-8 text (a binary file?): bad byte at offset {exc.start}"
        ) from None
    if "\x00" in text:
        raise UsageError(f"{flag} {path}: a binary file (it contains NUL bytes), not text")
    return text


def check_log_target(path: str) -> None:
    """Refuse a ``--log`` that cannot name a log before anything is created: a URL of any
    scheme but postgresql:// (it would become a relative file path) or a directory."""
    import os
    import re

    from trio_cap.events.log.urls import is_url

    if is_url(path):
        return
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", path):
        raise UsageError(f"--log {path}: only a postgresql://USER@HOST/DB URL names a shared "
                         "log; give that or a file path")
    if os.path.isdir(path):
        raise UsageError(f"--log {path}: is a directory, not a log file")


def brain_script(path: str | None):  # -> Script | None
    """The scripted brain's script named on the command line; an invalid one is a usage error."""
    from trio_cap.actors.agent.script import ScriptError, load_script

    if not path:
        return None
    read_text_file("--script", path)  # binary and unreadable files get a one-line refusal
    try:
        return load_script(path)
    except ScriptError as exc:
        raise UsageError(str(exc)) from None
    except RecursionError:
        raise UsageError(
            f"--script {path}: not a script: arrays or tables nested too deeply to read"
        ) from None


def leaves(exc: BaseException) -> list[BaseException]:
    """The real errors inside ``exc``: exception groups opened, and an actor's failure
    followed to the error that caused it, so the user is told the cause, not the wrapping."""
    from trio_cap.actors.runtime import ActorFailed

    out: list[BaseException] = []
    stack = [exc]
    while stack:
        e = stack.pop()
        if isinstance(e, BaseExceptionGroup):
            stack.extend(reversed(e.exceptions))
        elif isinstance(e, ActorFailed) and e.__cause__ is not None:
            stack.append(e.__cause__)
        else:
            out.append(e)
    return out


def say_torn_tail(prog: str, path: str, log) -> None:  # type: ignore[no-untyped-def]
    """One line on stderr when opening ``log`` for a resume cut a torn last append: the
    person resuming learns that bytes were dropped, and how many."""
    if log.recovered:
        import sys

        print(f"{prog}: {path}: cut a torn tail of {log.recovered.dropped_bytes} bytes "
              f"({log.recovered.detail})", file=sys.stderr)
