"""docs/cap.md is the contract: its tables must say what the code does."""

import msgspec

from tests.contract import table
from trio_cap.events import errors
from trio_cap.events.kinds import ALL_EVENTS, kind_of


def _code_fields(cls) -> str:
    info = msgspec.inspect.type_info(cls)
    names = [f.encode_name + ("" if f.required else "?") for f in info.fields
             if f.encode_name != "_meta"]
    return ", ".join(names) or "—"


def test_event_kinds_table_matches_the_event_union():
    documented = {row[0]: (row[1], row[2]) for row in table("Event kinds")}
    in_code = {kind_of(cls): (cls.direction, _code_fields(cls)) for cls in ALL_EVENTS}
    assert documented == in_code


def test_error_code_table_matches_the_registry():
    documented = {(int(row[0]), row[1], row[2]) for row in table("Error codes")}
    in_code = {(e.code, e.symbol, e.meaning) for e in errors.NUMERIC_CODES.values()}
    assert documented == in_code


def test_string_error_code_table_matches_the_registry():
    documented = {row[0]: (row[1], row[2]) for row in table("String error codes")}
    core = {"rate_limit", "auth_error", "tool_timeout", "context_overflow",
            "model_unavailable", "pty_died", "parse_failed"}
    in_code = {code: ("core" if code in core else "coding", meaning)
               for code, meaning in errors.STRING_CODES.items()}
    in_code |= {code: ("trio-cap", meaning) for code, meaning in errors.TRIO_CAP_CODES.items()}
    assert documented == in_code


def test_permission_policy_table_lists_every_policy():
    from trio_cap.actors.session.policy import POLICIES

    assert [row[0] for row in table("Permission policies")] == list(POLICIES)
