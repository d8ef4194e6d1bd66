"""Manifest texts and small builders shared by the manifest tests."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from trio_cap.actors.manifest.resolve import SearchRoots


def minimal(name: str = "demo", binary: str = "demo", extra: str = "") -> str:
    """The smallest valid manifest: exactly the required fields of CAP §5.2."""
    return f"""
[agent]
name = "{name}"
binary = "{binary}"
profiles = []

[startup]
command = ["{binary}"]
ready_when = {{ pattern = "^> $" }}

[pty]
cols = 120
rows = 40

[capabilities]
streaming_output = true
{extra}
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def executable(path: Path, body: str) -> Path:
    """A ``/bin/sh`` script; only shell builtins are used, PATH may be tiny."""
    write(path, "#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def manifest_printer(path: Path, manifest_text: str) -> Path:
    """A program that prints ``manifest_text`` when run with ``--cap-manifest``."""
    quoted = manifest_text.replace("'", "'\\''")
    return executable(
        path,
        f"""if [ "$1" = "--cap-manifest" ]; then
  printf '%s\\n' '{quoted}'
  exit 0
fi
echo "usage: $0" >&2
exit 2
""",
    )


def roots(tmp: Path) -> SearchRoots:
    """Empty search roots under ``tmp``; ``bin`` comes first on PATH."""
    for d in ("xdg/cap/agents", "system", "bundled", "bin"):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    return SearchRoots(
        user_dir=tmp / "xdg" / "cap" / "agents",
        system_dir=tmp / "system",
        bundled_dir=tmp / "bundled",
        path=os.pathsep.join([str(tmp / "bin"), os.defpath]),
    )
