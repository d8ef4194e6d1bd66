"""Script rule patterns are RE2, checked at load, matched on the whole text, never raising."""

from __future__ import annotations

import pytest

from trio_cap.actors.model_server.script import ScriptError, script_from_obj, search


@pytest.mark.parametrize("field, pattern, needle", [
    ("match", r"(a)\1", "backreferences"),
    ("system", r"(?P<x>a)(?P=x)", "backreferences"),
    ("model", r"gpt(?=-5)", "look-around"),
    ("match", r"(?<=x)y", "look-around"),
    ("match", r"(?>atomic)", "atomic"),
    ("match", r"a++", "possessive"),
    ("match", "\ud800", "surrogate"),
    ("match", "x" * 500 + "(", "RE2"),
])
def test_refused_patterns_name_the_rule_and_the_reason(field: str, pattern: str,
                                                       needle: str) -> None:
    with pytest.raises(ScriptError) as info:
        script_from_obj({"rules": [{"text": "ok"}, {field: pattern, "text": "x"}]})
    message = str(info.value)
    assert message.startswith(f"rules[1].{field}: ") and needle in message
    assert "\n" not in message and len(message) < 300  # one line, long patterns shortened


@pytest.mark.parametrize("pattern, text, expected", [
    ("(?i)create .*file", "please CREATE a file", True),
    ("^b", "a\nb", False),       # whole-text anchors, as re.search without MULTILINE
    ("(?m)^b", "a\nb", True),    # per-line when asked for
    ("b$", "ab", True),
    ("", "anything", True),
    ("(a+)+$", "a" * 100_000 + "!", False),  # linear: returns at once
    ("a.c", "a\udc80c", True),   # a lone surrogate in the text does not raise
])
def test_search_semantics(pattern: str, text: str, expected: bool) -> None:
    assert search(pattern, text) is expected
