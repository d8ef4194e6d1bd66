"""Which member changed which file, and the moment two of them changed the same one.

Worktrees keep members from seeing each other's half-done work, which also hides that
two of them are editing one file until their branches are merged — when the work is
done and redoing it is dearest.  So the fleet machine feeds this every write a member
makes (a write tool's call that succeeded; at the end, its diff) and logs the first
overlap at once (``fleet.conflict``).  Pure: no filesystem, paths compared lexically.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any, Literal

from trio_cap.actors.risk import PATH_KEYS, WRITE_TOOLS
from trio_cap.events.kinds import Event, FleetConflict, FleetTouched

Via = Literal["tool", "diff"]
_DIFF_FILE = re.compile(r"^diff --git a/(?P<a>.+?) b/(?P<b>.+)$", re.M)


def written(tool: str, intent: Mapping[str, Any]) -> list[str]:
    """The paths a write tool's input names (none for any other tool)."""
    if tool.lower() not in WRITE_TOOLS:
        return []
    words = [intent[k] for k in PATH_KEYS if isinstance(intent.get(k), str) and intent[k]]
    listed = intent.get("paths")
    if isinstance(listed, list):
        words += [p for p in listed if isinstance(p, str) and p]
    return words


def diff_files(diff: str) -> list[str]:
    """The files a ``git diff`` changes (both names of a rename)."""
    out: list[str] = []
    for m in _DIFF_FILE.finditer(diff):
        for name in (m["a"], m["b"]):
            if name not in out:
                out.append(name)
    return out


def relative(path: str, cwd: str | None) -> str:
    """``path`` relative to the member's working directory, or absolute outside it."""
    if cwd is None:
        return posixpath.normpath(path)
    full = posixpath.normpath(posixpath.join(cwd, path))
    rel = posixpath.relpath(full, posixpath.normpath(cwd))
    return full if rel == ".." or rel.startswith("../") else rel


class Touches:
    """First touches per member and file, and the members of each file so far."""

    def __init__(self, workdirs: Mapping[str, str] | None = None) -> None:
        self.workdirs = dict(workdirs or {})
        self.files: dict[str, list[str]] = {}
        """path → the members that changed it, in order."""

    def touch(self, member: str, raw_path: str, via: Via,
              call_id: str | None = None) -> list[Event]:
        """The events one write makes: none when ``member`` had changed it already."""
        path = relative(raw_path, self.workdirs.get(member))
        who = self.files.setdefault(path, [])
        if member in who:
            return []
        who.append(member)
        out: list[Event] = [FleetTouched(member=member, path=path, via=via, call_id=call_id)]
        if len(who) > 1:
            out.append(FleetConflict(path=path, members=tuple(who), via=via))
        return out
