"""Remembered answers to ``<binary> --cap-manifest``.

A probe spawns a program (~0.5 s for a Python console script), and every
``start_session`` of an agent found by probing used to pay it: 1,000 sessions
of ``cap-agent`` took two minutes.  A probe's answer depends on the program
file, so answers are kept per process and on disk, keyed by the program's
resolved path, its size, mtime and ctime, the PATH the probe ran with and the
newest mtime of trio-cap's own code; a changed or replaced binary (or a changed
trio-cap, whose own ``cap-agent`` script never changes) is probed again.

What is kept where, and why:

* successes go to memory and to disk (``$XDG_CACHE_HOME/trio-cap/probes``,
  else ``~/.cache/trio-cap/probes``), one small JSON file per key written
  atomically; an entry older than :data:`MAX_AGE` is probed again, since a
  console script's own file does not change when the package behind it does;
* failures stay in memory only: a probe that timed out on a busy machine must
  not stick for the next process;
* a cache file that is unreadable, corrupt or for another key is ignored and
  rewritten — the cache is never trusted over the program, and it never makes
  resolution fail.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

MAX_AGE = 24 * 3600.0
"""Seconds a disk entry is believed."""

Key = tuple[str, int, int, int, str, int]


@functools.cache
def own_code_stamp() -> int:
    """The newest mtime among trio-cap's own source files, once per process.

    Part of every key: ``cap-agent`` is a console script whose file never changes when the
    code behind it does (an editable install, an upgrade in place), and a day-old answer
    once told the orchestrator that this build's own agent could not speak ACP."""
    newest = 0
    for root in (Path(__file__).resolve().parents[1], Path(__file__).resolve().parents[2]
                 / "events"):
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                if name.endswith((".py", ".toml")):
                    try:
                        newest = max(newest, os.stat(os.path.join(dirpath, name)).st_mtime_ns)
                    except OSError:
                        continue
    return newest


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return root / "trio-cap" / "probes"


def probe_key(program: str, path_env: str | None) -> Key | None:
    """What identifies the program's answer; None when the program cannot be looked at."""
    try:
        real = os.path.realpath(program)
        st = os.stat(real)
    except OSError:
        return None
    return (real, st.st_size, st.st_mtime_ns, st.st_ctime_ns, path_env or "", own_code_stamp())


class ProbeCache:
    """Probe answers by :data:`Key`: text on success, the reason on failure (memory only)."""

    def __init__(self, directory: Path | None = None, *, use_disk: bool = True) -> None:
        self.directory = directory
        self.use_disk = use_disk
        self._ok: dict[Key, str] = {}
        self._failed: dict[Key, str] = {}

    def _dir(self) -> Path:
        return self.directory if self.directory is not None else cache_dir()

    def _file(self, key: Key) -> Path:
        digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:32]
        return self._dir() / f"{digest}.json"

    def get(self, key: Key) -> tuple[bool, str] | None:
        """``(True, text)``, ``(False, reason)`` or None when the program must be probed."""
        if key in self._ok:
            return True, self._ok[key]
        if key in self._failed:
            return False, self._failed[key]
        if not self.use_disk:
            return None
        try:
            entry = json.loads(self._file(key).read_text(encoding="utf-8"))
            fresh = time.time() - float(entry["at"]) < MAX_AGE
            if entry["key"] == list(key) and fresh and isinstance(entry["text"], str):
                self._ok[key] = entry["text"]
                return True, entry["text"]
        except (OSError, ValueError, KeyError, TypeError):
            pass  # missing, unreadable or damaged: probe again, and rewrite it below
        return None

    def put_ok(self, key: Key, text: str) -> None:
        self._ok[key] = text
        self._failed.pop(key, None)
        if not self.use_disk:
            return
        try:
            directory = self._dir()
            directory.mkdir(parents=True, exist_ok=True)
            data = json.dumps({"key": list(key), "at": time.time(), "text": text})
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".probe-", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(data)
                os.replace(tmp, self._file(key))
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            pass  # a read-only or full cache only costs a later probe

    def put_failed(self, key: Key, reason: str) -> None:
        self._failed[key] = reason


PROCESS_CACHE = ProbeCache()
"""The cache every resolution in this process shares unless told otherwise."""
