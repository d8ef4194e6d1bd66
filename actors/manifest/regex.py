"""Manifest regexes: RE2 is both the acceptance boundary and the matcher.

CAP §5.4 allows only the RE2-like subset (no backreferences, no look-around).
Validating with one engine and matching with another would let the two drift
apart, so the same RE2 compile that accepts a pattern also produces the object
drivers match with.  RE2 matches in linear time, which matters because the text
matched is whatever a (possibly hostile) agent prints.

Patterns are compiled with ``(?m)`` so ``^`` and ``$`` anchor to each logical
line of the text they are matched against, as §5.4 requires.
"""

from __future__ import annotations

import functools
import re

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would otherwise print every rejection to stderr

_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")
_BACKREF = re.compile(r"invalid escape sequence: \\([1-9]|k|g)")


class PatternError(ValueError):
    """A manifest pattern outside the RE2 subset; the message is user-facing."""


def _explain(message: str) -> str:
    if message.startswith("invalid perl operator: "):
        op = message.removeprefix("invalid perl operator: ")
        if op in _LOOKAROUND:
            return f"look-around is not supported (RE2 subset): {op}"
        if op == "(?>":
            return "atomic groups are not supported (RE2 subset)"
    if _BACKREF.match(message):
        return "backreferences are not supported (RE2 subset)"
    if message.startswith("bad repetition operator: ") and message.endswith("+"):
        return "possessive quantifiers are not supported (RE2 subset)"
    return f"not a valid RE2 pattern: {message}"


@functools.lru_cache(maxsize=512)
def compile_line_pattern(pattern: str) -> re2._Regexp:
    """Compile with per-line anchors; raise :class:`PatternError` outside the subset."""
    if not pattern:
        raise PatternError("must not be empty (it would match every line)")
    try:
        return re2.compile("(?m)" + pattern, _OPTIONS)
    except re2.error as exc:
        raw = exc.args[0] if exc.args else b""
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        text = text.replace("(?m)" + pattern, pattern)  # some messages quote the whole pattern
        raise PatternError(_explain(text)) from None


@functools.lru_cache(maxsize=512)
def compile_text_pattern(pattern: str) -> re2._Regexp:
    """Compile as written (``^``/``$`` anchor to the whole text, as ``re.search`` does).

    For patterns matched against one whole message rather than lines of output
    (the model server's script rules); raises :class:`PatternError` outside the subset.
    """
    if "(?P=" in pattern:  # RE2 reports it as an unknown operator; name what it is
        raise PatternError("backreferences are not supported (RE2 subset)")
    try:
        return re2.compile(pattern, _OPTIONS)
    except UnicodeEncodeError:
        raise PatternError("not valid Unicode text (lone surrogate)") from None
    except re2.error as exc:
        raw = exc.args[0] if exc.args else b""
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        raise PatternError(_explain(text)) from None


def check_pattern(pattern: str) -> str | None:
    """The reason ``pattern`` is rejected, or None when RE2 accepts it."""
    try:
        compile_line_pattern(pattern)
    except PatternError as exc:
        return str(exc)
    return None


def search_lines(pattern: str, text: str) -> re2._Match | None:
    """First match of a manifest pattern anywhere in ``text`` (anchors per line)."""
    return compile_line_pattern(pattern).search(text)
