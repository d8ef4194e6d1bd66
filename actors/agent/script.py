"""Script files for the scripted brain (TOML).

A script is ordered turns (one consumed per prompt) and rules (the first whose
``match`` regex finds the prompt answers it); when neither applies, the
built-in command language does.  Every problem in a file is reported at once,
each with its path (``turn[1].steps[0]: unknown step …``), because fixing a
script one error per run is miserable::

    model = "cap-scripted"            # reported in cap.usage
    chunk_words = 4                   # words per streamed text chunk
    [pricing]                         # USD per million tokens, for cap.usage cost
    input_per_mtok = 3.0
    output_per_mtok = 15.0

    [[turn]]
    steps = [ { think = "…" }, { write = "a.txt", content = "hi\\n" }, { say = "done" } ]
    [[turn]]
    commands = "run: ls\\nplan: a; b"  # the command language, one command per line

    [[rule]]
    match = "^deploy"
    steps = [ { fail = "rate_limit", message = "slow down", retryable = true } ]
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import attrs
import cattrs

from trio_cap.actors.agent.commands import parse_prompt
from trio_cap.actors.agent.steps import STEP_TYPES, PlanItem, PlanStep, Step


class ScriptError(Exception):
    """An invalid script file; ``problems`` lists every error with its path."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + f"\n{source}: ".join(problems))


@attrs.frozen
class Turn:
    steps: tuple[Step, ...]


@attrs.frozen
class Rule:
    pattern: re.Pattern[str]
    steps: tuple[Step, ...]


@attrs.frozen
class Script:
    turns: tuple[Turn, ...] = ()
    rules: tuple[Rule, ...] = ()
    model: str = "cap-scripted"
    chunk_words: int = 4
    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    source: str = "<built-in>"


_converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)


def _strict(kind: type, accepts: tuple[type, ...]):
    """cattrs would turn 3 into "3"; a script with the wrong type is a mistake to report."""

    def hook(value: Any, _type: type) -> Any:
        if isinstance(value, bool) and bool not in accepts:
            raise ValueError(f"expected {kind.__name__}, got {value!r}")
        if not isinstance(value, accepts):
            raise ValueError(f"expected {kind.__name__}, got {type(value).__name__} {value!r}")
        return kind(value)

    return hook


_converter.register_structure_hook(str, _strict(str, (str,)))
_converter.register_structure_hook(int, _strict(int, (int,)))
_converter.register_structure_hook(float, _strict(float, (int, float)))
_converter.register_structure_hook(bool, _strict(bool, (bool,)))


def _structure_plan(value: Any, _type: type) -> PlanStep:
    if not isinstance(value, dict):
        raise ValueError("expected a table")
    raw = value.get("plan")
    if not isinstance(raw, list):
        raise ValueError("plan: expected a list of strings or tables")
    items: list[PlanItem | str] = [
        PlanItem(content=item) if isinstance(item, str) else _converter.structure(item, PlanItem)
        for item in raw
    ]
    extra = set(value) - {"plan"}
    if extra:
        raise ValueError(f"unknown keys {sorted(extra)}")
    return PlanStep(plan=items)


_converter.register_structure_hook(PlanStep, _structure_plan)

_TOP_KEYS = {"model", "chunk_words", "pricing", "turn", "rule"}


def parse_step(raw: Any, where: str, problems: list[str]) -> Step | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: a step must be a table like {{ say = \"hi\" }}")
        return None
    verbs = [key for key in raw if key in STEP_TYPES]
    if len(verbs) != 1:
        known = ", ".join(sorted(STEP_TYPES))
        what = "no step verb" if not verbs else f"several step verbs {verbs}"
        problems.append(f"{where}: {what}; a step has exactly one of: {known}")
        return None
    try:
        return _converter.structure(raw, STEP_TYPES[verbs[0]])
    except Exception as exc:  # cattrs raises ClassValidationError or ValueError
        problems.extend(_describe(exc, where))
        return None


def _describe(exc: Exception, where: str) -> list[str]:
    """cattrs says ``msg @ $.field``; we say ``where.field: msg``."""
    if not isinstance(exc, cattrs.ClassValidationError):
        return [f"{where}: {exc}"]
    out = []
    for message in cattrs.transform_error(exc):
        text, _, path = message.rpartition(" @ $")
        out.append(f"{where}{path}: {text}")
    return out


def _steps_of(table: dict[str, Any], where: str, problems: list[str]) -> tuple[Step, ...]:
    has_steps, has_commands = "steps" in table, "commands" in table
    if has_steps == has_commands:
        problems.append(f"{where}: give exactly one of 'steps' (a list) or 'commands' (text)")
        return ()
    if has_commands:
        if not isinstance(table["commands"], str):
            problems.append(f"{where}.commands: expected text")
            return ()
        return tuple(parse_prompt(table["commands"]))
    raw_steps = table["steps"]
    if not isinstance(raw_steps, list):
        problems.append(f"{where}.steps: expected a list of step tables")
        return ()
    parsed = [parse_step(raw, f"{where}.steps[{i}]", problems) for i, raw in enumerate(raw_steps)]
    return tuple(step for step in parsed if step is not None)


def parse_script(data: dict[str, Any], source: str = "<script>") -> Script:
    problems: list[str] = []
    for key in sorted(set(data) - _TOP_KEYS):
        problems.append(f"{key}: unknown key (expected one of {sorted(_TOP_KEYS)})")
    turns = []
    for i, table in enumerate(_tables(data, "turn", problems)):
        turns.append(Turn(_steps_of(table, f"turn[{i}]", problems)))
    rules = []
    for i, table in enumerate(_tables(data, "rule", problems)):
        where = f"rule[{i}]"
        pattern = table.get("match")
        if not isinstance(pattern, str):
            problems.append(f"{where}.match: required (a regular expression)")
            continue
        try:
            compiled = re.compile(pattern, re.M)
        except re.error as exc:
            problems.append(f"{where}.match: invalid regular expression: {exc}")
            continue
        rest = {k: v for k, v in table.items() if k != "match"}
        rules.append(Rule(compiled, _steps_of(rest, where, problems)))
    model = data.get("model", "cap-scripted")
    if not isinstance(model, str):
        problems.append("model: expected text")
    chunk_words = data.get("chunk_words", 4)
    if not isinstance(chunk_words, int) or chunk_words < 1:
        problems.append("chunk_words: expected a positive integer")
    pricing = data.get("pricing", {})
    prices = {}
    if not isinstance(pricing, dict):
        problems.append("pricing: expected a table")
        pricing = {}
    for key in sorted(set(pricing) - {"input_per_mtok", "output_per_mtok"}):
        problems.append(f"pricing.{key}: unknown key")
    for key in ("input_per_mtok", "output_per_mtok"):
        value = pricing.get(key, 0.0)
        if not isinstance(value, int | float) or value < 0:
            problems.append(f"pricing.{key}: expected a non-negative number")
        prices[key] = float(value) if isinstance(value, int | float) else 0.0
    if problems:
        raise ScriptError(source, problems)
    return Script(
        turns=tuple(turns),
        rules=tuple(rules),
        model=model,
        chunk_words=chunk_words,
        source=source,
        **prices,
    )


def _tables(data: dict[str, Any], key: str, problems: list[str]) -> list[dict[str, Any]]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        problems.append(f"{key}: expected an array of tables ([[{key}]])")
        return []
    return value


def load_script(path: str | Path) -> Script:
    """Read and validate a script file; raises ScriptError naming the file."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptError(source, [f"cannot read: {exc.strerror or exc}"]) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScriptError(source, [f"not valid TOML: {exc}"]) from None
    return parse_script(data, source)
