"""Value checks for manifest fields, one function per kind of value.

Each check takes the raw TOML value and either returns the typed value or
raises :class:`FieldIssues`, which can carry several problems with sub-paths
(``[0]``, ``[2]``) so that one bad argv reports every bad element at once.
The checks are strict on purpose: cattrs' default hooks would turn the shell
string ``"claude -p"`` into the argv ``("c", "l", ...)`` and ``5`` into ``"5"``.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from trio_cap.actors.manifest.regex import check_pattern


class FieldIssues(Exception):
    """One or more problems with a field's value: ``(sub_path, message)`` pairs."""

    def __init__(self, issues: Sequence[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{p}: {m}" if p else m for p, m in issues))
        self.issues = list(issues)


def fail(message: str, sub_path: str = "") -> FieldIssues:
    return FieldIssues([(sub_path, message)])


def toml_type(value: Any) -> str:
    """How TOML calls the type of ``value``, for messages a manifest author reads."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "table"
    if isinstance(value, datetime.date | datetime.time):
        return "date/time"
    return type(value).__name__


def expect(value: Any, kind: type | tuple[type, ...], name: str) -> None:
    ok = isinstance(value, kind) and not (
        isinstance(value, bool) and kind in (int, float, (int, float))
    )
    if not ok:
        raise fail(f"expected {name}, got {toml_type(value)}")


# --------------------------------------------------------------------------
# scalars
# --------------------------------------------------------------------------

def boolean(value: Any) -> bool:
    expect(value, bool, "a boolean")
    return value


def string(value: Any) -> str:
    expect(value, str, "a string")
    if "\0" in value:
        raise fail("must not contain NUL")
    return value


def nonempty_string(value: Any) -> str:
    text = string(value)
    if not text.strip():
        raise fail("must not be empty")
    return text


def positive_int(value: Any, *, maximum: int | None = None) -> int:
    expect(value, int, "an integer")
    if value < 1:
        raise fail("must be greater than zero")
    if maximum is not None and value > maximum:
        raise fail(f"must be at most {maximum}")
    return value


def terminal_size(value: Any) -> int:
    return positive_int(value, maximum=65535)


def positive_number(value: Any) -> float:
    expect(value, (int, float), "a number")
    if not value > 0:
        raise fail("must be greater than zero")
    return float(value)


def one_of(*choices: str) -> Callable[[Any], str]:
    listed = ", ".join(f'"{c}"' for c in choices)

    def check(value: Any) -> str:
        expect(value, str, "a string")
        if value not in choices:
            raise fail(f'"{value}" is not one of {listed}')
        return value

    check.__name__ = f"one_of_{'_'.join(choices)}"
    return check


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def is_agent_name(text: str) -> bool:
    return bool(_NAME.fullmatch(text))


def agent_name(value: Any) -> str:
    text = string(value)
    if not is_agent_name(text):
        raise fail(
            "must start with a letter or digit and hold only letters, digits, '.', '_' "
            "or '-' (it names a manifest file)"
        )
    return text


_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_name(value: Any) -> str:
    text = string(value)
    if not _ENV.fullmatch(text):
        raise fail("must be an environment variable name (letters, digits, '_')")
    return text


def revision(value: Any) -> str:
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value.isoformat()  # an unquoted TOML date is a fine way to write it
    text = string(value)
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        raise fail(f'"{text}" is not a date in YYYY-MM-DD form') from None
    if len(text) != 10:
        raise fail(f'"{text}" is not a date in YYYY-MM-DD form')
    return text


_CURRENCY = re.compile(r"[A-Z]{3}")


def currency(value: Any) -> str:
    text = string(value)
    if not _CURRENCY.fullmatch(text):
        raise fail(f'"{text}" is not an ISO 4217 currency code such as "USD"')
    return text


def pattern(value: Any) -> str:
    text = string(value)
    reason = check_pattern(text)
    if reason:
        raise fail(reason)
    return text


# --------------------------------------------------------------------------
# programs and argv: the safety rules
# --------------------------------------------------------------------------

_PLAIN_PROGRAM = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.+-]*")
_ABSOLUTE_PROGRAM = re.compile(r"(/[A-Za-z0-9_.+@-]+)+")
PROGRAM_RULE = (
    "must be a plain program name (found on PATH) or an absolute path, "
    "without spaces or shell metacharacters"
)


def is_safe_program(text: str) -> bool:
    """Plain name or absolute path: safe to exec and to probe with ``--cap-manifest``."""
    if text in (".", ".."):
        return False
    return bool(_PLAIN_PROGRAM.fullmatch(text) or _ABSOLUTE_PROGRAM.fullmatch(text))


def program(value: Any) -> str:
    text = string(value)
    if not is_safe_program(text):
        raise fail(f'"{text}" {PROGRAM_RULE}')
    return text


SHELL_STRING = "must be an array of strings (argv), not a shell string"


def argv(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        raise fail(SHELL_STRING)
    expect(value, list, "an array of strings (argv)")
    if not value:
        raise fail("must not be empty (argv[0] is the program)")
    issues: list[tuple[str, str]] = []
    for i, part in enumerate(value):
        if not isinstance(part, str):
            issues.append((f"[{i}]", f"expected a string, got {toml_type(part)}"))
        elif "\0" in part:
            issues.append((f"[{i}]", "must not contain NUL"))
        elif i == 0 and not is_safe_program(part):
            issues.append(("[0]", f'"{part}" {PROGRAM_RULE}'))
    if issues:
        raise FieldIssues(issues)
    return tuple(value)


def bool_or_argv(value: Any) -> bool | tuple[str, ...]:
    """``false`` (not offered), ``true`` (startup.command speaks it) or its own argv."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        raise fail("must be false, true or an array of strings (argv), not a shell string")
    return argv(value)


def http_url(value: Any) -> str:
    text = string(value)
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise fail(f'"{text}" is not an http(s) URL with a host')
    try:
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        raise fail(f'"{text}" has an invalid port') from None
    return text


def false_or_url(value: Any) -> bool | str:
    if value is False:
        return False
    if value is True:
        raise fail("must be false or the http(s) URL the agent's A2A server listens on")
    return http_url(value)


def bool_or_address(value: Any) -> bool | str:
    if isinstance(value, bool):
        return value
    return nonempty_string(value)


ARTIFACTS = ("diff", "plan_doc", "pr_link", "test_result", "commit", "transcript")


def artifact(value: Any) -> str:
    text = string(value)
    if text not in ARTIFACTS and not text.startswith("x-"):
        listed = ", ".join(ARTIFACTS)
        raise fail(f'"{text}" is not a coding artifact type ({listed}, or x-*)')
    return text
