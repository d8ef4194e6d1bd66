"""The CAP error registry: numeric JSON-RPC codes with string twins.

Numeric codes surface on JSON-RPC bindings (ACP); everywhere else the symbol is
what travels, in ``cap.error.code`` or a ``session.failed`` event.  Keeping the
table in one place lets the drift test hold ``docs/cap.md`` to it.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class ErrorCode:
    code: int
    symbol: str
    meaning: str


_NUMERIC: tuple[ErrorCode, ...] = (
    ErrorCode(-32001, "cap_manifest_missing", "Agent has no resolvable manifest"),
    ErrorCode(-32002, "cap_session_config_missing", "First frame was not cap.session.config"),
    ErrorCode(-32003, "cap_unsupported_capability", "Requested feature not declared in manifest"),
    ErrorCode(-32004, "cap_budget_exceeded", "Would exceed the declared budget"),
    ErrorCode(-32005, "cap_invalid_answer", "ask_user answer failed form validation"),
    ErrorCode(-32006, "cap_unknown_permission", "Permission response for an unknown req_id"),
    ErrorCode(
        -32007, "cap_queued_input_unsupported", "Inject mid-turn but the agent cannot queue input"
    ),
    ErrorCode(-32008, "cap_cancel_unsupported", "Cancel requested but mid_turn_cancel is none"),
    ErrorCode(-32009, "cap_binding_unavailable", "Every declared binding failed"),
    ErrorCode(-32010, "cap_profile_unsupported", "Required profile not implemented by the agent"),
    ErrorCode(-32020, "cap_scope_violation", "Path outside the declared fs.scope"),
    ErrorCode(-32021, "cap_path_not_found", "Filesystem operation on a missing path"),
    ErrorCode(-32022, "cap_io_error", "Generic filesystem I/O failure"),
    ErrorCode(-32023, "cap_terminal_unavailable", "Terminal requested but disabled"),
    ErrorCode(-32024, "cap_terminal_killed", "Terminal was killed by the orchestrator"),
)

NUMERIC_CODES: dict[str, ErrorCode] = {e.symbol: e for e in _NUMERIC}
BY_NUMBER: dict[int, ErrorCode] = {e.code: e for e in _NUMERIC}

STRING_CODES: dict[str, str] = {
    "rate_limit": "API rate limit",
    "auth_error": "The agent's authentication failed",
    "tool_timeout": "An internal tool timed out",
    "context_overflow": "Context exceeded the model limit",
    "model_unavailable": "The configured model is offline",
    "pty_died": "The PTY child exited unexpectedly",
    "parse_failed": "The driver could not parse the agent's output",
    "git_dirty": "Workspace has uncommitted changes when clean was required",
    "test_failed": "The test suite reported failures",
    "merge_conflict": "A multi-agent merge could not be auto-resolved",
    "language_server_down": "A required language server is unavailable",
}
"""String codes for ``cap.error`` (core §14.2 and the coding profile §10)."""

TRIO_CAP_CODES: dict[str, str] = {
    "agent_died": "The agent process or in-process brain ended without a terminal event",
    "agent_error": "The agent reported an error that has no CAP code",
    "pty_blocked": "A PTY agent shows a dialog or question nobody answered: nothing was typed",
    "internal_error": "trio-cap itself failed while driving the session",
    "invalid_state": "A command arrived that the session's state does not accept",
    "max_turns": "The agent stopped because it reached its max_turns limit",
    "unknown_ask": "An answer named an ask_id the session is not waiting on",
    "permission_denied": "A tool call was refused by the permission policy or a human",
    "script_error": "The scripted brain's script file is invalid",
    "tool_failed": "A tool the scripted brain ran failed",
    "turn_timeout": "A turn ran longer than its turn timeout and was cancelled",
    "idle_timeout": "The agent was silent for the idle timeout during a turn, which was cancelled",
    "node_lost": "The node running the session stopped heartbeating (its lease lapsed) and "
                 "another node took the session over but could not resume it (the message says "
                 "why)",
    "a2a_http_error": "The A2A agent answered a request with an HTTP error status",
    "a2a_rpc_error": "The A2A agent answered a request with a JSON-RPC error",
    "a2a_unreachable": "The A2A agent could not be reached",
    "a2a_timeout": "The A2A agent did not answer, or its stream fell silent, within the timeout",
    "a2a_stream_lost": "An A2A stream broke and could not be resumed (resubscribe failed)",
    "fleet_failed": "A fleet behind one agent face (cap agent --fleet) did not complete",
}
"""trio-cap's own string codes, used where CAP defines none."""


def is_known(code: str) -> bool:
    return code in NUMERIC_CODES or code in STRING_CODES or code in TRIO_CAP_CODES


def numeric(symbol: str) -> int | None:
    entry = NUMERIC_CODES.get(symbol)
    return entry.code if entry else None
