"""Risk of a permission request, judged by its effect; when in doubt it is high.

Why trio-cap rates at all: CAP lets agents report their own ``risk_level``,
but auto-approval (``--permissions allow``) is only as safe as the rating, so
the session machine rates every request itself, from the tool, its scope and
its input, and takes the higher of that and the agent's claim
(``effective = max(agent, trio-cap)``).  The rating is pure: no filesystem,
clock or environment, so a replay of the same log rates the same way.  What a
string cannot show (symlinks) arrives as logged facts (``outside``).

Rules for tools (shell commands: :mod:`.shell`, :mod:`.commands`):

=========================================  =================================================
request                                    rating
=========================================  =================================================
scope ``network`` or a network tool        high
a shell tool (``Bash`` …)                  the command's rating (no command: high)
a read tool, every path inside             low
a write/edit/delete tool, paths inside     medium (inside ``.git/``: high)
any path outside the workspace, ``~``,     high
``..`` escaping, a secret (``.ssh``,
``.env``, ``.git/config`` …), or a path
the session found resolves outside
a write tool with no path                  high
bookkeeping tools (``TodoWrite`` …)        low
any other tool (MCP, unknown)              high
=========================================  =================================================
"""

from __future__ import annotations

import shlex
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from trio_cap.actors.risk.paths import Workspace
from trio_cap.actors.risk.shell import High, Judge, rate_command
from trio_cap.events.kinds import RiskLevel

RISK_ORDER: dict[str, int] = {"low": 0, "medium": 1, "high": 2}

READ_TOOLS = frozenset({"read", "glob", "grep", "ls", "list", "view", "notebookread",
                        "read_file", "read_many_files", "list_directory", "search_file_content"})
WRITE_TOOLS = frozenset({"write", "edit", "multiedit", "notebookedit", "create", "delete",
                         "remove", "move", "rename", "write_file", "replace"})
"""Claude Code's names, and Gemini CLI's (``read_file``, ``write_file``, ``replace`` …)."""
SHELL_TOOLS = frozenset({"bash", "shell", "run", "terminal", "exec", "execute",
                         "run_shell_command", "shell_command"})
NETWORK_TOOLS = frozenset({"webfetch", "websearch", "fetch", "http", "browser", "web_fetch",
                           "google_web_search"})
BOOKKEEPING_TOOLS = frozenset({"todowrite", "todoread", "exitplanmode", "task", "agent",
                               "bashoutput", "askuserquestion", "think"})
"""Tools that change nothing outside the conversation (sub-agents ask for their own tools)."""

PATH_KEYS = ("path", "file_path", "notebook_path", "filePath", "filename", "file",
             "directory", "dir", "target", "destination", "source", "old_path", "new_path",
             "absolute_path")
"""Intent keys that name files; ``paths`` (a list) and a Glob ``pattern`` count too."""


@dataclass(frozen=True, slots=True)
class Rating:
    """trio-cap's rating of one request, why, and the workspace paths it names."""

    level: RiskLevel
    why: str
    paths: tuple[str, ...] = ()


def max_risk(a: RiskLevel, b: RiskLevel) -> RiskLevel:
    return a if RISK_ORDER[a] >= RISK_ORDER[b] else b


_RATED: dict[tuple[Any, ...], Rating] = {}
_RATED_MAX = 4096
_key_of = msgspec.msgpack.Encoder().encode


def rate(tool: str, intent: Mapping[str, Any], scope: str | None = None,
         cwd: str | None = None, *, outside: Collection[str] = ()) -> Rating:
    """Rate a request.  ``outside``: workspace paths the session found resolve outside it.

    The rating is pure, so a request seen before is answered from a small memo: the
    same commands and files come up again and again (``ls``, ``git status``, one
    file written turn after turn), and rating a shell command parses it
    (tree-sitter) — most of a replay check's time in the session machine.  The key is
    the intent's encoding, so only an identical request (same keys in the same
    order, same types) hits.
    """
    try:
        key = (tool, _key_of(intent), scope, cwd, tuple(outside))
        rating = _RATED.get(key)
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        return _rate_outside(tool, intent, scope, cwd, outside)  # not plain data: no memo
    if rating is None:
        rating = _rate_outside(tool, intent, scope, cwd, outside)
        if len(_RATED) >= _RATED_MAX:
            del _RATED[next(iter(_RATED))]  # the oldest
        _RATED[key] = rating
    return rating


def _rate_outside(tool: str, intent: Mapping[str, Any], scope: str | None,
                  cwd: str | None, outside: Collection[str]) -> Rating:
    workspace = Workspace(cwd)
    rating = _rate(tool, intent, scope, workspace)
    if rating.level != "high":
        escaped = [p for p in rating.paths if p in outside]
        if escaped:
            return Rating("high", f"{escaped[0]} resolves outside the workspace (a symlink)",
                          rating.paths)
    return rating


def infer_risk(tool: str, intent: Mapping[str, Any], scope: str | None = None,
               cwd: str | None = None) -> RiskLevel:
    """The level alone (for an agent rating its own calls)."""
    return rate(tool, intent, scope, cwd).level


def paths_named(tool: str, intent: Mapping[str, Any], scope: str | None = None,
                cwd: str | None = None) -> tuple[str, ...]:
    """Absolute workspace paths a request names, for the session actor's symlink check."""
    return rate(tool, intent, scope, cwd).paths


def _rate(tool: str, intent: Mapping[str, Any], scope: str | None,
          workspace: Workspace) -> Rating:
    name = tool.lower()
    if scope == "network" or name in NETWORK_TOOLS:
        return Rating("high", f"{tool} reaches the network")
    if name in SHELL_TOOLS:
        return _shell(tool, intent, workspace)
    if name in BOOKKEEPING_TOOLS:
        return Rating("low", f"{tool} changes nothing outside the conversation")
    write = name in WRITE_TOOLS or (name not in READ_TOOLS and scope == "write")
    if name not in READ_TOOLS and name not in WRITE_TOOLS:
        return Rating("high", f"{tool!r} is not a tool trio-cap knows the effect of")
    words = _path_words(name, intent)
    if words is None:
        return Rating("high", f"{tool} names a path that is not text")
    if write and not words:
        return Rating("high", f"{tool} names no path to write")
    judge = Judge(workspace)
    try:
        for word in words:
            judge.path(word, write=write, delete=name in ("delete", "remove"), what=tool)
    except High as exc:
        return Rating("high", exc.why, tuple(judge.paths))
    if write:
        return Rating("medium", f"{tool} writes inside the workspace", tuple(judge.paths))
    return Rating("low", f"{tool} reads inside the workspace", tuple(judge.paths))


def _path_words(name: str, intent: Mapping[str, Any]) -> list[str] | None:
    words: list[Any] = [intent[k] for k in PATH_KEYS if intent.get(k) not in (None, "")]
    listed = intent.get("paths")
    if isinstance(listed, list):
        words += listed
    elif listed is not None:
        return None
    if name == "glob" and intent.get("pattern"):
        words.append(intent["pattern"])
    if not all(isinstance(w, str) for w in words):
        return None
    return words


def _shell(tool: str, intent: Mapping[str, Any], workspace: Workspace) -> Rating:
    command = intent.get("command")
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        command = shlex.join(command)
    if not isinstance(command, str):
        return Rating("high", f"{tool} without a command text")
    if intent.get("run_in_background"):
        return Rating("high", "it runs in the background, beyond the turn")
    text = command
    directory = intent.get("cwd") or intent.get("workdir") or intent.get("directory")
    if directory is not None:
        if not isinstance(directory, str):
            return Rating("high", f"{tool} names a directory that is not text")
        text = f"cd {shlex.quote(directory)} && {command}"
    judge = rate_command(text, workspace)
    return Rating(judge.level, judge.why, tuple(judge.paths))
