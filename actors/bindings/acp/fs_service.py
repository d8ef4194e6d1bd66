"""``fs/read_text_file`` and ``fs/write_text_file`` served for an ACP agent, inside its scope.

Shell side (it touches the disk).  Every path is confined to the session's fs
scope *after* symlinks are resolved (:func:`~trio_cap.actors.agent.tools.resolve_inside`,
the same check trio-cap's own agent uses at the point of use), and writes
never follow a symlink planted after the check (``O_NOFOLLOW``).  A path
outside the scope is refused with one message whether or not it exists
there, so the refusal is no existence oracle; only inside the scope does a
missing file answer ``-32002`` (resource not found).

Scopes (manifest ``capabilities.coding.fs.scope``): ``workspace_only`` (the
session's cwd; the default), ``project_root`` (the git work tree holding it),
``unrestricted``.

Each write is also remembered for the turn: the file as it was before the
turn's first write to it, so the turn ends with one ``cap.artifact`` unified
diff of what the agent wrote through us (:meth:`FsService.turn_diff`).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import trio

from trio_cap.actors.agent.tools import ScopeViolation, ToolError, resolve_inside, write_file
from trio_cap.actors.agent.workspace import DIFF_MIME, _py_diff
from trio_cap.actors.bindings import jsonrpc as rpc
from trio_cap.actors.bindings.acp import frames as f
from trio_cap.events.kinds import Artifact, CapError, Event

MAX_READ = 16 * 1024 * 1024
"""Largest file served whole (the wire carries 32 MiB lines; JSON escaping may double it)."""
SCOPE_CODE = rpc.INVALID_PARAMS


class FsRefused(Exception):
    """A request refused: the JSON-RPC error to answer and the event to log (if any)."""

    def __init__(self, code: int, message: str, event: Event | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.event = event


def scope_root(cwd: str, scope: str | None) -> str:
    """The directory fs calls are confined to."""
    if scope == "unrestricted":
        return "/"
    base = os.path.realpath(cwd)
    if scope == "project_root":
        probe = Path(base)
        for candidate in (probe, *probe.parents):
            if (candidate / ".git").exists():
                return str(candidate)
    return base


WRITE_SETTLE = 5.0
"""Seconds a turn's end waits for writes still in flight before its diff is taken."""


class FsService:
    def __init__(self, cwd: str, scope: str | None = "workspace_only") -> None:
        self.cwd = cwd
        self.scope = scope or "workspace_only"
        self.root = scope_root(cwd, self.scope)
        self._before: dict[str, bytes | None] = {}
        """Files written this turn: absolute path → content before the turn's first write."""
        self._writing = 0
        self._written = trio.Event()  # set whenever no write is in flight
        self._written.set()

    def confine(self, path: str) -> Path:
        if not path.startswith("/"):
            raise FsRefused(rpc.INVALID_PARAMS, f"path must be absolute: {path!r}")
        try:
            return resolve_inside(self.root, path)
        except ScopeViolation:
            raise FsRefused(SCOPE_CODE, f"cap_scope_violation: {path} is outside the session's "
                                        f"{self.scope} scope",
                            CapError(code="cap_scope_violation",
                                     message=f"the agent asked for {path}, outside the "
                                             f"session's {self.scope} scope; refused",
                                     details={"path": path})) from None

    async def read(self, params: f.ReadTextFileParams) -> f.ReadTextFileResult:
        target = self.confine(params.path)
        text = await trio.to_thread.run_sync(self._read_text, target, params.path)
        line = params.line if isinstance(params.line, int) else None
        limit = params.limit if isinstance(params.limit, int) else None
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max(0, (line or 1) - 1)
            end = len(lines) if limit is None else start + max(0, limit)
            text = "".join(lines[start:end])
        return f.ReadTextFileResult(content=text)

    def _read_text(self, target: Path, shown: str) -> str:
        try:
            fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise FsRefused(f.RESOURCE_NOT_FOUND, f"Resource not found: {shown}") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a symlink planted after the check
                raise FsRefused(SCOPE_CODE, f"cap_scope_violation: {shown} is outside the "
                                            f"session's {self.scope} scope") from None
            raise FsRefused(rpc.INTERNAL_ERROR, f"cannot read {shown}: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as handle:
            try:
                data = handle.read(MAX_READ + 1)
            except IsADirectoryError:
                raise FsRefused(rpc.INVALID_PARAMS, f"{shown} is a directory") from None
        if len(data) > MAX_READ:
            raise FsRefused(rpc.INVALID_PARAMS, f"{shown} is larger than {MAX_READ} bytes; "
                                                "read it in parts with line and limit")
        return data.decode("utf-8", errors="replace")

    async def write(self, params: f.WriteTextFileParams) -> f.Empty:
        target = self.confine(params.path)
        key = str(target)
        if self._writing == 0:
            self._written = trio.Event()
        self._writing += 1
        try:
            if key not in self._before:
                self._before[key] = await trio.to_thread.run_sync(_existing, target)
            await trio.to_thread.run_sync(write_file, self.root, str(target), params.content)
        except ScopeViolation:
            raise FsRefused(SCOPE_CODE, f"cap_scope_violation: {params.path} is outside the "
                                        f"session's {self.scope} scope") from None
        except ToolError as exc:
            raise FsRefused(rpc.INTERNAL_ERROR, str(exc)) from None
        finally:
            self._writing -= 1
            if self._writing == 0:
                self._written.set()
        return f.Empty()

    async def settled(self, bound: float = WRITE_SETTLE) -> None:
        """Wait (at most ``bound`` seconds) for writes in flight: an agent may end its turn
        before our answer to its last write, and that write is still the turn's."""
        with trio.move_on_after(bound):
            await self._written.wait()

    def turn_diff(self, turn: int) -> Artifact | None:
        """The turn's writes as one unified diff (None when nothing changed); then forgotten."""
        before_files, self._before = self._before, {}
        if not before_files:
            return None
        before: dict[str, tuple[str, bytes]] = {}
        after: dict[str, tuple[str, bytes]] = {}
        for path, old in before_files.items():
            rel = os.path.relpath(path, self.root) if self.root != "/" else path.lstrip("/")
            if old is not None:
                before[rel] = ("100644", old)
            now = _existing(Path(path))
            if now is not None:
                after[rel] = ("100644", now)
        text = _py_diff(before, after)
        if not text:
            return None
        return Artifact(artifact_id=f"acp_diff_{turn}", mime_type=DIFF_MIME,
                        name=f"turn-{turn}.diff", size=len(text.encode()), content=text)


def _existing(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            return handle.read(MAX_READ)
        except OSError:
            return None
