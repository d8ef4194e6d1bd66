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

Rule patterns (``match``, ``system``, ``model``) are RE2, not Python ``re``: the
text they are matched against is whatever a client sends, and a backtracking
engine lets one request (``(a+)+$`` against 35 characters) freeze the whole
server.  RE2 matches in linear time; what it refuses (backreferences,
look-around) is refused when the script is loaded, naming the rule.  ``^`` and
``$`` anchor to the whole text, as ``re.search`` does (RE2's ``$`` does not
also match before a final newline).

A script file is read with a bound (:data:`MAX_SCRIPT_BYTES`) and every way it
can be unusable (missing, a directory, binary, not UTF-8, not TOML, nested too
deeply for the parser, off-schema) is one :class:`ScriptError` line naming the
file and the problem.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from trio_cap.actors.manifest.regex import PatternError, compile_text_pattern

ApiName = Literal["openai-chat", "openai-responses", "anthropic", "gemini"]


class ScriptError(ValueError):
    """The script file is unreadable or does not fit the schema."""


# Bounds checked at load, so a script value can never become a server error at request
# time (a negative sleep, an HTTP status hypercorn refuses, an infinite Retry-After).
HttpStatus = Annotated[int, msgspec.Meta(ge=100, le=599)]
Seconds = Annotated[float, msgspec.Meta(ge=0, le=86_400)]
Count = Annotated[int, msgspec.Meta(ge=0, le=1_000_000_000)]
Millis = Annotated[int, msgspec.Meta(ge=0, le=86_400_000)]


class ToolCall(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    # OpenAI Responses only: emit a ``custom_tool_call`` whose ``input`` is the raw
    # text in ``arguments["input"]`` (Codex's freeform apply_patch tool).
    custom: bool = False


class Fault(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """An injected HTTP error, returned ``times`` times before the reply itself."""

    status: HttpStatus = 500
    message: str = "injected fault"
    retry_after: Seconds | None = None
    times: Count = 1


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
    delay_ms: Millis = 0
    # Characters per streamed text chunk; 0 means word by word.
    chunk_chars: Count = 0
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


MAX_SCRIPT_BYTES = 16 * 1024 * 1024
"""Scripts are small; a larger file is a mistake (a log, an image, /dev/zero)."""

_PATTERN_FIELDS = ("match", "system", "model")


def _check_regexes(script: Script) -> None:
    for i, rule in enumerate(script.rules):
        for field in _PATTERN_FIELDS:
            pattern = getattr(rule, field)
            if pattern is None:
                continue
            try:
                compile_text_pattern(pattern)
            except PatternError as exc:
                reason = str(exc)  # RE2 quotes the pattern in some messages: keep it short
                reason = reason if len(reason) <= 120 else reason[:117] + "…"
                raise ScriptError(f"rules[{i}].{field}: {reason}: {_short(pattern)}") from None


def search(pattern: str, text: str) -> bool:
    """Whether a (load-checked) rule pattern occurs in ``text``; linear time."""
    regex = compile_text_pattern(pattern)
    try:
        return regex.search(text) is not None
    except UnicodeEncodeError:  # a lone surrogate (e.g. from a decoded URL path)
        return regex.search(text.encode("utf-8", "replace").decode("utf-8")) is not None


def _short(pattern: str) -> str:
    return repr(pattern) if len(pattern) <= 80 else repr(pattern[:77]) + "…"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def script_from_obj(obj: Any) -> Script:
    """Build a script from plain data (a dict as TOML would give); used by tests too."""
    try:
        script = msgspec.convert(obj, Script)
    except msgspec.ValidationError as exc:
        raise ScriptError(_one_line(str(exc))) from None
    except RecursionError:
        raise ScriptError("nested too deeply") from None
    _check_regexes(script)
    return script


def _read_bounded(path: Path) -> bytes:
    # Read at most one byte past the limit: /dev/zero or a huge file must not fill memory.
    with path.open("rb") as file:
        data = file.read(MAX_SCRIPT_BYTES + 1)
    if len(data) > MAX_SCRIPT_BYTES:
        raise ScriptError(f"larger than {MAX_SCRIPT_BYTES // (1024 * 1024)} MiB; "
                          "not a model script")
    return data


def load_script(path: str | Path) -> Script:
    path = Path(path)
    try:
        data = _read_bounded(path)
    except OSError as exc:
        raise ScriptError(f"{path}: {exc.strerror or exc}") from None
    except ScriptError as exc:
        raise ScriptError(f"{path}: {exc}") from None
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise ScriptError(f"{path}: UTF-16 text, not UTF-8; save the script as UTF-8")
    if b"\0" in data:
        raise ScriptError(f"{path}: a binary file (it contains NUL bytes), not a TOML script")
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")  # editors' byte-order mark
    except UnicodeDecodeError as exc:
        raise ScriptError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                          f"{exc.start}); a model script is TOML") from None
    try:
        obj = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScriptError(f"{path}: not valid TOML: {_one_line(str(exc))}") from None
    except RecursionError:
        raise ScriptError(f"{path}: nested too deeply to parse") from None
    try:
        return script_from_obj(obj)
    except ScriptError as exc:
        raise ScriptError(f"{path}: {exc}") from None


def default_script(text: str = "hello from fake model") -> Script:
    return Script(default=Reply(text=text))
