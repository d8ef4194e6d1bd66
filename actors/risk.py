"""Risk inference for permission requests.

Agents report their own ``risk_level``, but CAP makes the orchestrator
responsible for never auto-approving high risk, so trio-cap does not take an
agent's word for it: the effective risk is the higher of the agent's level and
this inference from the tool, its scope and its input.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from trio_cap.events.kinds import RiskLevel

_ORDER: dict[str, int] = {"low": 0, "medium": 1, "high": 2}

_DANGEROUS_COMMAND = re.compile(
    r"""(?x)
    \brm\s+(-\w*[rRf]\w*\s+)*-?\w*[rR]\w*\b   # recursive removal
    | \bsudo\b | \bsu\s | \bmkfs | \bdd\s+if= | \bshutdown\b | \breboot\b
    | \bchmod\s+(-R\s+)?0?777 | \bchown\s+-R
    | \b(curl|wget)\b[^|]*\|\s*(ba|z|k)?sh\b   # pipe to a shell
    | \bgit\s+push\b.*(--force|\s-f\b) | \bgit\s+reset\s+--hard | \bgit\s+clean\s+-\w*f
    | >\s*/dev/sd | :\(\)\s*\{                  # raw disk, fork bomb
    """
)
_NETWORK_COMMAND = re.compile(r"\b(curl|wget|ssh|scp|rsync|nc|ncat|telnet|ftp)\b")
_SENSITIVE_PATH = re.compile(r"(^|/)(\.ssh|\.aws|\.gnupg|\.env\b|\.git/config|etc/(passwd|shadow))")
_READ_TOOLS = frozenset({"read", "glob", "grep", "ls", "list", "view", "webfetch-readonly"})
_WRITE_TOOLS = frozenset({"write", "edit", "multiedit", "notebookedit", "create", "delete"})
_EXEC_TOOLS = frozenset({"bash", "shell", "run", "terminal", "exec", "execute"})
_NET_TOOLS = frozenset({"webfetch", "websearch", "fetch", "http", "browser"})


def max_risk(a: RiskLevel, b: RiskLevel) -> RiskLevel:
    return a if _ORDER[a] >= _ORDER[b] else b


def infer_risk(
    tool: str, intent: Mapping[str, Any], scope: str | None = None, cwd: str | None = None
) -> RiskLevel:
    """read < write < execute; dangerous commands, network and paths outside cwd are high."""
    name = tool.lower()
    command = str(intent.get("command", "") or "")
    path = str(intent.get("path", "") or intent.get("file_path", "") or "")
    if scope == "network" or name in _NET_TOOLS or _NETWORK_COMMAND.search(command):
        return "high"
    if command and _DANGEROUS_COMMAND.search(command):
        return "high"
    if path and (_SENSITIVE_PATH.search(path) or not _inside(path, cwd)):
        return "high"
    if scope == "read" or name in _READ_TOOLS:
        return "low"
    if scope in ("write", "execute") or name in _WRITE_TOOLS or name in _EXEC_TOOLS:
        return "medium"
    return "medium"


def _inside(path: str, cwd: str | None) -> bool:
    if cwd is None:
        return not os.path.isabs(path) and ".." not in path.split("/")
    full = os.path.realpath(os.path.join(cwd, path))
    root = os.path.realpath(cwd)
    return full == root or full.startswith(root + os.sep)
