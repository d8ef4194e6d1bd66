"""What the scripted model says: the script file's schema and loader.

A script is TOML (``tomllib``; no extra dependency) decoded straight into
msgspec Structs, so a typo in a key is an error naming the key instead of a
reply that silently never happens.  Example::

    models = ["fake-model"]

    [default]
    text = "hello from fake model"

    [[rules]]                      # rules never run out; first match wins
    match = "(?i)create .*file"    # regex searched in the last user message
    text = "Creating it."
    tool_calls = [{ name = "Write", arguments = { file_path = "out.txt", content = "hi\\n" } }]
    then = { text = "Done." }      # the reply once the tool result comes back

    [[turns]]                      # consumed in order, one per new user message
    thinking = "Short."
    text = "first answer"
    error = { status = 429, retry_after = 1, times = 1 }   # fail once, then answer
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import msgspec

ApiName = Literal["openai-chat", "openai-responses", "anthropic", "gemini"]


class ScriptError(ValueError):
    """The script file is unreadable or does not fit the schema."""


class ToolCall(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    # OpenAI Responses only: emit a ``custom_tool_call`` whose ``input`` is the raw
    # text in ``arguments["input"]`` (Codex's freeform apply_patch tool).
    custom: bool = False


class Fault(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """An injected HTTP error, returned ``times`` times before the reply itself."""

    status: int = 500
    message: str = "injected fault"
    retry_after: float | None = None
    times: int = 1


class Reply(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One model answer; ``then`` answers the request that carries its tool results."""

    text: str | None = None
    thinking: str | None = None
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    # Reply for requests that ask for JSON output; otherwise JSON is synthesised
    # from the request's schema.
    json: Any = None
    error: Fault | None = None
    # Pause between streamed chunks (a slow stream for timeout tests).
    delay_ms: int = 0
    # Characters per streamed text chunk; 0 means word by word.
    chunk_chars: int = 0
    then: Reply | None = None


class Rule(Reply, forbid_unknown_fields=True, frozen=True):
    """A reply chosen by matching the request rather than by position."""

    match: str | None = None  # regex searched in the last user message
    system: str | None = None  # regex searched in the system prompt
    api: ApiName | None = None
    model: str | None = None  # regex searched in the requested model name


class Script(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    default: Reply = msgspec.field(default_factory=lambda: Reply(text="hello from fake model"))
    rules: list[Rule] = msgspec.field(default_factory=list)
    turns: list[Reply] = msgspec.field(default_factory=list)
    models: list[str] = msgspec.field(default_factory=lambda: ["fake-model"])


def _check_regexes(script: Script) -> None:
    for i, rule in enumerate(script.rules):
        for field in ("match", "system", "model"):
            pattern = getattr(rule, field)
            if pattern is None:
                continue
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ScriptError(f"rules[{i}].{field}: bad regex {pattern!r}: {exc}") from exc


def script_from_obj(obj: Any) -> Script:
    """Build a script from plain data (a dict as TOML would give); used by tests too."""
    try:
        script = msgspec.convert(obj, Script)
    except msgspec.ValidationError as exc:
        raise ScriptError(str(exc)) from exc
    _check_regexes(script)
    return script


def load_script(path: str | Path) -> Script:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScriptError(f"{path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ScriptError(f"{path}: {exc}") from exc
    try:
        return script_from_obj(data)
    except ScriptError as exc:
        raise ScriptError(f"{path}: {exc}") from exc


def default_script(text: str = "hello from fake model") -> Script:
    return Script(default=Reply(text=text))
