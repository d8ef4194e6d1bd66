"""Is an answer valid for a ``cap.ask_user`` form?  One pure check for every binding.

A form is the restricted JSON Schema MCP and ACP elicitation share: a flat
object whose properties are strings (``minLength``, ``maxLength``,
``pattern``, ``format``, ``enum`` or titled ``oneOf`` consts), numbers and
integers (``minimum``, ``maximum``), booleans, and multi-select arrays of
strings (``items.enum`` or ``items.anyOf`` consts, ``minItems``,
``maxItems``), with a ``required`` list; ``type`` may be left out (object).
CAP's own single-question forms (``{"type":"string","oneOf":[…]}``) are the
same rules applied to one value.  The session machine refuses an answer that
fails (``cap_invalid_answer``) before it reaches the agent, so the person can
answer again; a binding checks once more before it answers the agent.
"""

from __future__ import annotations

import re
from typing import Any

_FORMATS = {
    "email": re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$"),
    "uri": re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$"),
    "date": re.compile(r"^\d{4}-\d{2}-\d{2}$"),
    "date-time": re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?"
                            r"([Zz]|[+-]\d{2}:?\d{2})?$"),
}


def is_object_form(form: dict[str, Any] | None) -> bool:
    return isinstance(form, dict) and (
        form.get("type", "object") == "object" and isinstance(form.get("properties"), dict))


def answer_problem(form: dict[str, Any] | None, value: Any) -> str | None:
    """Why ``value`` does not fit ``form`` (one sentence), or None when it does.

    ``None`` (declined) always fits: declining is an answer.
    """
    if value is None or not isinstance(form, dict) or not form:
        return None
    if is_object_form(form):
        if not isinstance(value, dict):
            return "the answer must be an object with the form's fields"
        properties: dict[str, Any] = form["properties"]
        for name in form.get("required") or ():
            if name not in value:
                return f"{name!r} is required"
        for name, item in value.items():
            schema = properties.get(name)
            if not isinstance(schema, dict):
                return f"{name!r} is not a field of the form"
            problem = _value_problem(schema, item)
            if problem:
                return f"{name!r}: {problem}"
        return None
    return _value_problem(form, value)


def _choices(schema: dict[str, Any]) -> list[Any] | None:
    if isinstance(schema.get("enum"), list):
        return list(schema["enum"])
    for key in ("oneOf", "anyOf"):
        if isinstance(schema.get(key), list):
            return [c.get("const") for c in schema[key] if isinstance(c, dict)]
    return None


def _value_problem(schema: dict[str, Any], value: Any) -> str | None:
    kind = schema.get("type")
    choices = _choices(schema)
    if kind == "array":
        return _array_problem(schema, value)
    if kind == "boolean":
        return None if isinstance(value, bool) else "must be true or false"
    if kind in ("number", "integer"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"must be a{'n integer' if kind == 'integer' else ' number'}"
        if kind == "integer" and not float(value).is_integer():
            return "must be an integer"
        low, high = schema.get("minimum"), schema.get("maximum")
        if isinstance(low, int | float) and value < low:
            return f"must be at least {low}"
        if isinstance(high, int | float) and value > high:
            return f"must be at most {high}"
        return None
    if kind == "string" or kind is None:
        if choices is not None:
            return None if value in choices else f"{value!r} is not one of {choices}"
        if not isinstance(value, str):
            return "must be text"
        return _string_problem(schema, value)
    return None  # a type this check does not know: the agent judges it


def _string_problem(schema: dict[str, Any], value: str) -> str | None:
    low, high = schema.get("minLength"), schema.get("maxLength")
    if isinstance(low, int) and len(value) < low:
        return f"must be at least {low} characters"
    if isinstance(high, int) and len(value) > high:
        return f"must be at most {high} characters"
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            if re.search(pattern, value) is None:
                return f"must match {pattern!r}"
        except re.error:
            return None  # a pattern Python cannot read is the agent's to judge
    checker = _FORMATS.get(schema.get("format") or "")
    if checker is not None and not checker.match(value):
        return f"must be a valid {schema['format']}"
    return None


def _array_problem(schema: dict[str, Any], value: Any) -> str | None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return "must be a list of choices"
    items = schema.get("items")
    allowed = _choices(items) if isinstance(items, dict) else None
    if allowed is not None:
        wrong = [v for v in value if v not in allowed]
        if wrong:
            return f"{wrong[0]!r} is not one of {allowed}"
    low, high = schema.get("minItems"), schema.get("maxItems")
    if isinstance(low, int) and len(value) < low:
        return f"choose at least {low}"
    if isinstance(high, int) and len(value) > high:
        return f"choose at most {high}"
    return None
