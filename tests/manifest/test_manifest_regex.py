"""Patterns: exactly the RE2 subset is accepted, and anchors work per line."""

from __future__ import annotations

import pytest

from tests.manifest.helpers import minimal
from trio_cap.actors.manifest import ManifestInvalid, PatternError, parse_manifest, search_lines
from trio_cap.actors.manifest.regex import check_pattern, compile_line_pattern


@pytest.mark.parametrize("pattern", ["(?=x)y", "x(?!y)", "(?<=a)b", "(?<!a)b"])
def test_look_around_is_rejected(pattern: str) -> None:
    reason = check_pattern(pattern)
    assert reason is not None and reason.startswith("look-around is not supported")


@pytest.mark.parametrize("pattern", ["(a)\\1", "(?P<q>['\"]).*(?P=q)", "(?<n>a)\\k<n>", "(a)\\g1"])
def test_backreferences_are_rejected(pattern: str) -> None:
    reason = check_pattern(pattern)
    assert reason is not None
    assert "backreference" in reason or "not a valid RE2 pattern" in reason


def test_numbered_backreference_has_a_clear_message() -> None:
    assert check_pattern("(a)\\1") == "backreferences are not supported (RE2 subset)"


@pytest.mark.parametrize(("pattern", "reason"), [
    ("(?>a+)", "atomic groups are not supported (RE2 subset)"),
    ("a*+", "possessive quantifiers are not supported (RE2 subset)"),
    ("", "must not be empty (it would match every line)"),
    ("(unclosed", "not a valid RE2 pattern: missing ): (unclosed"),
])
def test_other_features_outside_the_subset(pattern: str, reason: str) -> None:
    assert check_pattern(pattern) == reason
    with pytest.raises(PatternError):
        compile_line_pattern(pattern)


@pytest.mark.parametrize("pattern", [
    "^◉ (?P<tool>\\w+)\\((?P<args>.*?)\\)$",  # named groups and lazy quantifiers are RE2
    "(?<tool>\\w+)",
    "(?i)error",
    "[[:alpha:]]+\\pL*",
    "^\\s*$",
])
def test_re2_features_are_accepted(pattern: str) -> None:
    assert check_pattern(pattern) is None


def test_named_groups_match() -> None:
    m = search_lines("^◉ (?P<tool>\\w+)\\((?P<args>.*?)\\)$", "text\n◉ Read(a.txt)\nmore")
    assert m is not None
    assert m.groupdict() == {"tool": "Read", "args": "a.txt"}


def test_anchors_are_per_line() -> None:
    screen = "Welcome\n> \nstatus line"
    assert search_lines("^> $", screen) is not None
    assert search_lines("^Welcome$", screen) is not None
    assert search_lines("^status", screen) is not None
    assert search_lines("^> $", "Welcome > \nstatus") is None  # not at a line start


def test_manifest_rejects_patterns_outside_the_subset_with_their_index() -> None:
    text = minimal(extra='[parse]\nidle = ["^> $", "(?=x)", "(a)\\\\1"]\n'
                         'tool_call_start = "(?<!a)b"\nerror_lines = ["ok", "(?>x)"]\n')
    with pytest.raises(ManifestInvalid) as info:
        parse_manifest(text, "m.toml")
    assert [(i.path, i.message.split(" (")[0]) for i in info.value.issues] == [
        ("parse.idle[1]", "look-around is not supported"),
        ("parse.idle[2]", "backreferences are not supported"),
        ("parse.tool_call_start", "look-around is not supported"),
        ("parse.error_lines[1]", "atomic groups are not supported"),
    ]


def test_every_pattern_field_is_checked() -> None:
    bad = "(?=x)"
    text = minimal().replace('pattern = "^> $"', f'pattern = "{bad}"').replace(
        'binary = "demo"', f'binary = "demo"\nversion_match = "{bad}"'
    ) + f'\n[probe]\nversion_pattern = "{bad}"\n[parse]\n' + "".join(
        f'{k} = "{bad}"\n' for k in (
            "tool_call_start", "tool_call_end", "plan_section", "thought_section",
            "ask_yes_no", "ask_options",
        )
    ) + f'idle = ["{bad}"]\nerror_lines = ["{bad}"]\n'
    with pytest.raises(ManifestInvalid) as info:
        parse_manifest(text, "m.toml")
    assert {i.path for i in info.value.issues} == {
        "agent.version_match", "probe.version_pattern", "startup.ready_when.pattern",
        "parse.idle[0]", "parse.tool_call_start", "parse.tool_call_end", "parse.plan_section",
        "parse.thought_section", "parse.ask_yes_no", "parse.ask_options", "parse.error_lines[0]",
    }
