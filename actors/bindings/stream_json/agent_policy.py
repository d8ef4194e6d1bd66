"""Claude Code's permission rules and tool shapes, applied to the scripted brain's tool calls.

The brain speaks CAP (``Write {path, content}``); SDK clients expect Claude
Code's tools (``Write {file_path, content}`` with an absolute path), and their
``can_use_tool`` callbacks and ``--allowedTools`` rules are written against
those.  This module translates inputs both ways and decides, from the
permission mode and the rules, whether a call is allowed outright, denied
outright, or needs the client's answer — the same order Claude Code applies:
``--tools`` availability, deny rules, allow rules, then the mode.

Pure functions over strings (``posixpath`` on strings, never the filesystem:
the same log gives the same decisions on any machine), so the sans-io machine
and the bridge can both call them.  Claude Code's ``file_path`` is a POSIX path.
"""

from __future__ import annotations

import fnmatch
import posixpath
from typing import Any, Literal

import attrs

Verdict = Literal["allow", "deny", "ask"]
EDIT_TOOLS = ("Write", "Edit")


@attrs.frozen
class Decision:
    verdict: Verdict
    reason: str = ""


def to_wire(tool: str, intent: dict[str, Any], cwd: str) -> dict[str, Any]:
    """The input a Claude Code client expects for ``tool`` (what CAP logged as ``intent``)."""
    if tool == "Write":
        return {"file_path": _absolute(intent.get("path", ""), cwd),
                "content": intent.get("content", "")}
    if tool == "Edit":
        return {"file_path": _absolute(intent.get("path", ""), cwd),
                "old_string": intent.get("old", ""), "new_string": intent.get("new", "")}
    return dict(intent)


def from_wire(tool: str, wire: dict[str, Any], cwd: str) -> dict[str, Any]:
    """The brain's input for a Claude Code input (``updatedInput``); inverse of ``to_wire``."""
    if tool == "Write":
        return {"path": _relative(wire.get("file_path"), cwd), "content": wire.get("content")}
    if tool == "Edit":
        return {"path": _relative(wire.get("file_path"), cwd), "old": wire.get("old_string"),
                "new": wire.get("new_string")}
    return dict(wire)


def blocked_path(tool: str, wire: dict[str, Any]) -> str | None:
    return wire.get("file_path") if tool in EDIT_TOOLS else None


def _absolute(path: Any, cwd: str) -> Any:
    if not isinstance(path, str):
        return path
    return posixpath.normpath(posixpath.join(cwd, path))


def _relative(path: Any, cwd: str) -> Any:
    if not isinstance(path, str) or not posixpath.isabs(path) or not posixpath.isabs(cwd):
        return path
    norm = posixpath.normpath(path)
    base = posixpath.normpath(cwd)
    if norm == base or norm.startswith(base.rstrip("/") + "/"):
        return posixpath.relpath(norm, base)
    return path  # outside the workspace: the brain's scope check refuses it


def rule_matches(rule: str, tool: str, wire: dict[str, Any]) -> bool:
    """``Bash``, ``Bash(git:*)`` (prefix), ``Write(src/*)`` / ``Bash(ls -la)`` (glob or exact)."""
    name, paren, rest = rule.partition("(")
    if name.strip() != tool:
        return False
    if not paren:
        return True
    pattern = rest[:-1] if rest.endswith(")") else rest
    subject = wire.get("command") if tool == "Bash" else wire.get("file_path")
    if not isinstance(subject, str):
        return False
    if pattern.endswith(":*"):
        return subject.startswith(pattern[:-2])
    return subject == pattern or fnmatch.fnmatchcase(subject, pattern)


def decide(
    *,
    mode: str,
    tool: str,
    scope: str,
    wire: dict[str, Any],
    allowed: tuple[str, ...] = (),
    disallowed: tuple[str, ...] = (),
    available: tuple[str, ...] | None = None,
    prompts_on_stdio: bool = False,
) -> Decision:
    if available is not None and tool not in available:
        return Decision("deny", f"{tool} is not among the available tools (--tools)")
    if any(rule_matches(r, tool, wire) for r in disallowed):
        return Decision("deny", f"{tool} is disallowed (--disallowedTools)")
    if any(rule_matches(r, tool, wire) for r in allowed):
        return Decision("allow", "allowed by rule")
    if mode == "bypassPermissions":
        return Decision("allow", "bypassPermissions mode")
    if mode == "plan":
        if scope == "read":
            return Decision("allow", "read-only in plan mode")
        return Decision("deny", "plan mode: nothing may change until the plan is approved")
    if scope == "read":
        return Decision("allow", "read-only")
    if mode == "acceptEdits" and tool in EDIT_TOOLS:
        return Decision("allow", "acceptEdits mode")
    if mode == "dontAsk":
        return Decision("deny", f"dontAsk mode: {tool} was not pre-approved")
    if prompts_on_stdio:
        return Decision("ask")
    return Decision("deny", f"cap-agent requested permission to use {tool}, but it has not "
                            "been granted (no --permission-prompt-tool stdio to ask through)")
