"""The turn's workspace diff as a coding-profile artifact (``cap.artifact``, unified diff).

Why snapshots and not ``git diff``: the workspace may not be a git repository,
may be dirty before the turn, and a ``run:`` step can change any file — so the
hook snapshots the whole work tree before and after each turn and diffs the
two snapshots.  With git installed, a snapshot is a tree object written into a
private object store (``GIT_DIR`` in a temporary directory, its own index, the
real repository untouched): git re-hashes only files whose stat changed, and
the diff is git's own, byte for byte what ``git diff`` prints for the same
change.  Without git, a bounded in-memory snapshot and :mod:`difflib` produce
the same ``diff --git`` layout (hunks may be split differently).
"""

from __future__ import annotations

import difflib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import trio

from trio_cap.events.kinds import Artifact, CapError, Event

DIFF_MIME = "application/vnd.cap.coding.diff.v1+text"
EXCLUDED_DIRS = (".git", ".cap", ".cap-worktrees")
"""Never part of the workspace diff: VCS metadata and trio-cap's own run state."""

_MAX_FILE = 1 << 20
_MAX_TOTAL = 64 << 20


class WorkspaceDiffs:
    """:class:`~actors.agent.core.TurnHooks` that add one diff artifact per turn that changed files.

    ``exclude`` are extra paths (e.g. the agent's own log file) kept out of the diff.
    """

    def __init__(self, *, exclude: Sequence[str] = (), git: str | None = None,
                 use_git: bool = True) -> None:
        self._git = (git or shutil.which("git")) if use_git else None
        self._exclude = tuple(exclude)
        self._tmp: str | None = None
        self._before: str | dict[str, tuple[str, bytes]] | None = None
        self._failed = False

    # ---- TurnHooks --------------------------------------------------------------
    async def before_turn(self, cwd: str, turn: int) -> None:
        self._before = None
        if self._failed:
            return
        try:
            self._before = await self._snapshot(cwd)
        except _SnapshotError:
            self._failed = True

    async def after_turn(self, cwd: str, turn: int) -> Sequence[Event]:
        before, self._before = self._before, None
        if self._failed or before is None:
            if self._failed:
                self._failed = False  # report once, then try again next turn
                return [CapError(code="internal_error",
                                 message="the workspace diff could not be computed this turn")]
            return []
        try:
            after = await self._snapshot(cwd)
            if isinstance(before, str) and isinstance(after, str):
                text = await self._git_diff(cwd, before, after)
            else:
                text = _py_diff(before, after)  # type: ignore[arg-type]
        except _SnapshotError as exc:
            return [CapError(code="internal_error", message=f"workspace diff failed: {exc}")]
        if not text:
            return []
        return [Artifact(artifact_id=f"diff_{turn}", mime_type=DIFF_MIME, name=f"turn-{turn}.diff",
                         size=len(text.encode()), content=text)]

    def close(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    # ---- git snapshots ------------------------------------------------------------
    async def _snapshot(self, cwd: str) -> str | dict[str, tuple[str, bytes]]:
        if self._git is None:
            return await trio.to_thread.run_sync(_py_snapshot, cwd, self._exclude)
        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix="cap-agent-ws-")
            await self._run_git(cwd, "init", "--quiet")
            _write_excludes(self._tmp, cwd, self._exclude)
        await self._run_git(cwd, "add", "--all")
        return (await self._run_git(cwd, "write-tree")).strip()

    async def _git_diff(self, cwd: str, before: str, after: str) -> str:
        if before == after:
            return ""
        return await self._run_git(cwd, "diff", "--no-color", "--no-ext-diff", before, after)

    async def _run_git(self, cwd: str, *args: str) -> str:
        assert self._git is not None and self._tmp is not None
        env = dict(os.environ, GIT_DIR=self._tmp, GIT_WORK_TREE=cwd,
                   GIT_INDEX_FILE=os.path.join(self._tmp, "index"), GIT_TERMINAL_PROMPT="0")
        for name in ("GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
                     "GIT_CEILING_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE"):
            env.pop(name, None)
        result = await trio.run_process(
            [self._git, "-c", "safe.directory=*", *args], cwd=cwd, env=env,
            capture_stdout=True, capture_stderr=True, check=False,
        )
        if result.returncode != 0:
            detail = result.stderr.decode(errors="replace").strip().splitlines()
            raise _SnapshotError(f"git {args[0]}: {detail[-1] if detail else result.returncode}")
        return result.stdout.decode(errors="replace")


class _SnapshotError(Exception):
    pass


def _write_excludes(git_dir: str, cwd: str, exclude: Sequence[str]) -> None:
    info = Path(git_dir, "info")
    info.mkdir(exist_ok=True)
    patterns = [f"/{d}/" for d in EXCLUDED_DIRS[1:]]
    patterns += ["/" + os.path.relpath(os.path.realpath(p), os.path.realpath(cwd))
                 for p in exclude if _inside(p, cwd)]
    (info / "exclude").write_text("\n".join(patterns) + "\n")


def _inside(path: str, root: str) -> bool:
    full, base = os.path.realpath(path), os.path.realpath(root)
    return full != base and full.startswith(base + os.sep)


# ---- the fallback without git ----------------------------------------------------------


def _py_snapshot(cwd: str, exclude: Sequence[str]) -> dict[str, tuple[str, bytes]]:
    """``path -> (git mode, content)`` of every file under ``cwd``, within the size bounds."""
    skip = {os.path.realpath(p) for p in exclude}
    out: dict[str, tuple[str, bytes]] = {}
    total = 0
    for top, dirs, files in os.walk(cwd):
        dirs[:] = sorted(d for d in dirs if not (top == cwd and d in EXCLUDED_DIRS) and d != ".git")
        for name in sorted(files):
            path = os.path.join(top, name)
            if os.path.realpath(path) in skip or not os.path.isfile(path):
                continue
            rel = os.path.relpath(path, cwd).replace(os.sep, "/")
            try:
                st = os.stat(path)
                data = Path(path).read_bytes() if st.st_size <= _MAX_FILE else b"\0%d" % st.st_size
            except OSError:
                continue
            total += len(data)
            if total > _MAX_TOTAL:
                raise _SnapshotError("workspace too large to snapshot without git")
            out[rel] = ("100755" if st.st_mode & 0o111 else "100644", data)
    return out


def _blob(data: bytes | None) -> str:
    if data is None:
        return "0000000"
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()[:7]


def _py_diff(before: dict[str, tuple[str, bytes]], after: dict[str, tuple[str, bytes]]) -> str:
    """``git diff``'s layout for two snapshots (renames are shown as delete + add)."""
    parts: list[str] = []
    for path in sorted(set(before) | set(after)):
        old_mode, old = before.get(path, ("", None))
        new_mode, new = after.get(path, ("", None))
        if (old_mode, old) == (new_mode, new):
            continue
        parts.append(f"diff --git a/{path} b/{path}\n")
        if old is None:
            parts.append(f"new file mode {new_mode}\nindex {_blob(None)}..{_blob(new)}\n")
        elif new is None:
            parts.append(f"deleted file mode {old_mode}\nindex {_blob(old)}..{_blob(None)}\n")
        elif old_mode != new_mode:
            parts.append(f"old mode {old_mode}\nnew mode {new_mode}\n")
            if old != new:
                parts.append(f"index {_blob(old)}..{_blob(new)}\n")
        else:
            parts.append(f"index {_blob(old)}..{_blob(new)} {new_mode}\n")
        if old == new:
            continue
        a_name = "a/" + path if old is not None else "/dev/null"
        b_name = "b/" + path if new is not None else "/dev/null"
        if b"\0" in (old or b"") or b"\0" in (new or b""):
            parts.append(f"Binary files {a_name} and {b_name} differ\n")
            continue
        a = (old or b"").decode(errors="replace").splitlines(keepends=True)
        b = (new or b"").decode(errors="replace").splitlines(keepends=True)
        for line in difflib.unified_diff(a, b, a_name, b_name, n=3):
            parts.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(parts)
