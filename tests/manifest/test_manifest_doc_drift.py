"""docs/cap.md's manifest-fields table must say what the model does.

The table is parsed independently of how it was generated: each default cell
is read back as TOML and compared with the attrs default, each required cell
with the field's metadata and with whether the field has a default at all.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import attrs
import pytest

from trio_cap.actors.manifest.fields import NO_DEFAULT, FieldRow, field_rows

DOC = Path(__file__).resolve().parents[2] / "docs" / "cap.md"
ROW = re.compile(
    r"^\|\s*`(?P<field>[^`]+)`\s*\|(?P<req>[^|]*)\|(?P<default>[^|]*)\|(?P<meaning>.*)\|\s*$"
)


def doc_table(text: str) -> dict[str, tuple[str, str, str]]:
    section = text.split("\n## Manifest fields\n", 1)[1].split("\n## ", 1)[0]
    lines = section.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| field |"))
    assert [c.strip() for c in lines[head].strip("|").split("|")] == [
        "field", "required", "default", "meaning",
    ]
    rows: dict[str, tuple[str, str, str]] = {}
    for line in lines[head + 2:]:
        if not line.startswith("|"):
            break
        m = ROW.match(line)
        assert m, f"malformed table row: {line!r}"
        assert m["field"] not in rows, f"duplicate row for {m['field']}"
        rows[m["field"]] = (m["req"].strip(), m["default"].strip(), m["meaning"].strip())
    return rows


def parse_default(cell: str) -> object:
    if cell == NO_DEFAULT:
        return attrs.NOTHING
    assert cell.startswith("`") and cell.endswith("`"), cell
    return tomllib.loads("v = " + cell[1:-1])["v"]


def normalize(value: object) -> object:
    if value is None:
        return attrs.NOTHING  # "no default" and "unset" read the same in the table
    if isinstance(value, tuple):
        return list(value)
    return value


@pytest.fixture(scope="module")
def table() -> dict[str, tuple[str, str, str]]:
    return doc_table(DOC.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def model() -> dict[str, FieldRow]:
    return {r.path: r for r in field_rows()}


def test_same_fields(table: dict, model: dict) -> None:
    assert sorted(table) == sorted(model)


def test_same_required(table: dict, model: dict) -> None:
    wrong = {p: (table[p][0], r.required) for p, r in model.items()
             if p in table and table[p][0] != r.required}
    assert wrong == {}


def test_same_defaults(table: dict, model: dict) -> None:
    wrong = {}
    for p, r in model.items():
        if p not in table:
            continue
        documented = parse_default(table[p][1])
        if normalize(documented) != normalize(r.default):
            wrong[p] = (table[p][1], r.default)
    assert wrong == {}


def test_every_field_has_a_meaning(table: dict) -> None:
    assert [p for p, (_, _, meaning) in table.items() if not meaning] == []


def test_required_fields_have_no_default(model: dict) -> None:
    for r in model.values():
        if r.required == "yes":
            assert r.default is attrs.NOTHING, r.path
        elif r.required == "no":
            assert r.default is not attrs.NOTHING, r.path
        else:  # required only under a condition, e.g. fs.scope when an fs.* flag is on
            assert r.required.startswith("when "), r.path


def test_the_checker_can_fail() -> None:
    text = DOC.read_text(encoding="utf-8")
    drifted = text.replace("| `pty.sigint_cancels_turn` | no | `\"hard\"` |",
                           "| `pty.sigint_cancels_turn` | no | `\"graceful\"` |")
    assert drifted != text
    rows = doc_table(drifted)
    assert parse_default(rows["pty.sigint_cancels_turn"][1]) == "graceful"
    assert normalize(parse_default(rows["pty.sigint_cancels_turn"][1])) != normalize(
        {r.path: r for r in field_rows()}["pty.sigint_cancels_turn"].default
    )
