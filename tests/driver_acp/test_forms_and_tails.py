"""The pure pieces the ACP shell and the session share: form answers and terminal tails."""

from __future__ import annotations

import pytest

from trio_cap.actors.bindings.acp.terminals import exit_status, keep_tail
from trio_cap.events.forms import answer_problem

FORM = {"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
    "email": {"type": "string", "format": "email"},
    "day": {"type": "string", "format": "date"},
    "level": {"type": "integer", "minimum": 1, "maximum": 3},
    "ratio": {"type": "number", "maximum": 1},
    "ok": {"type": "boolean"},
    "pick": {"type": "string", "oneOf": [{"const": "a", "title": "A"}, {"const": "b"}]},
    "tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y", "z"]},
             "minItems": 1, "maxItems": 2},
}}


@pytest.mark.parametrize(("value", "problem"), [
    ({"name": "ab"}, None),
    ({"name": "ab", "email": "a@b.io", "day": "2026-12-01", "level": 2, "ratio": 0.5,
      "ok": True, "pick": "b", "tags": ["x", "z"]}, None),
    (None, None),  # declining is an answer
    ({}, "'name' is required"),
    ("ab", "the answer must be an object"),
    ({"name": "a"}, "at least 2"),
    ({"name": "abcdef"}, "at most 5"),
    ({"name": "AB"}, "must match"),
    ({"name": "ab", "email": "nope"}, "valid email"),
    ({"name": "ab", "day": "12/01/2026"}, "valid date"),
    ({"name": "ab", "level": 4}, "at most 3"),
    ({"name": "ab", "level": 1.5}, "integer"),
    ({"name": "ab", "level": True}, "integer"),
    ({"name": "ab", "ratio": "1"}, "number"),
    ({"name": "ab", "ok": "yes"}, "true or false"),
    ({"name": "ab", "pick": "c"}, "not one of"),
    ({"name": "ab", "tags": []}, "at least 1"),
    ({"name": "ab", "tags": ["x", "y", "z"]}, "at most 2"),
    ({"name": "ab", "tags": ["w"]}, "not one of"),
    ({"name": "ab", "extra": 1}, "not a field"),
])
def test_answers_against_an_elicitation_form(value: object, problem: str | None) -> None:
    found = answer_problem(FORM, value)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_single_question_forms_check_the_value_itself() -> None:
    form = {"type": "string", "enum": ["yes", "no"]}
    assert answer_problem(form, "yes") is None
    assert "not one of" in (answer_problem(form, "maybe") or "")


@pytest.mark.parametrize(("data", "limit", "kept", "cut"), [
    (b"0123456789", 20, b"0123456789", False),
    (b"0123456789", 4, b"6789", True),
    ("ééé".encode(), 5, "éé".encode(), True),  # 5 bytes would start mid-character
    ("aé".encode(), 2, "é".encode(), True),
    ("€".encode(), 2, b"", True),  # no whole character fits
    (b"abc", 0, b"", True),
])
def test_keep_tail_cuts_on_a_character_boundary(data: bytes, limit: int, kept: bytes,
                                               cut: bool) -> None:
    buffer = bytearray(data)
    assert keep_tail(buffer, limit) is cut
    assert bytes(buffer) == kept
    bytes(buffer).decode("utf-8")  # always whole characters


def test_exit_status_shapes() -> None:
    assert (exit_status(3).exit_code, exit_status(3).signal) == (3, None)
    assert (exit_status(-9).exit_code, exit_status(-9).signal) == (None, "SIGKILL")
    assert exit_status(-15).signal == "SIGTERM"
