"""Write a manifest back out as TOML, so `cap manifest resolve` shows what applies.

The standard library reads TOML but cannot write it, and manifests only need
tables, scalars and arrays of scalars, so a small emitter is enough.  Its
output parses back to the same manifest (tested).
"""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

_BARE = re.compile(r"[A-Za-z0-9_-]+")


def toml_key(key: str) -> str:
    return key if _BARE.fullmatch(key) else json.dumps(key, ensure_ascii=False)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        # A JSON string is a valid TOML basic string (same escapes, \\uXXXX included).
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def dumps(data: dict[str, Any]) -> str:
    """TOML text for nested dicts: scalars first, then one ``[table]`` per dict."""
    lines: list[str] = []
    _table(data, [], lines)
    return "\n".join(lines).strip() + "\n"


def _table(data: dict[str, Any], path: list[str], lines: list[str]) -> None:
    scalars = {k: v for k, v in data.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    if path and (scalars or not tables):
        lines.append("")
        lines.append("[" + ".".join(toml_key(p) for p in path) + "]")
    for k, v in scalars.items():
        lines.append(f"{toml_key(k)} = {toml_value(v)}")
    for k, v in tables.items():
        _table(v, [*path, k], lines)
