"""Every README code block meant to run, runs.

A reader copies README blocks as they are, so a block that is a SyntaxError or
that needs a port someone else holds is a bug.  Blocks fenced as ``sh`` or
``python`` are run; a block is excused only by an HTML comment right above
it, ``<!-- not run: why -->``, and the reason must be there.  Usage synopses
are fenced without a language and are not code.

Each block runs in a fresh directory that holds links to the repository's
``.venv`` and ``examples`` (the README's commands are written from the
repository root), so nothing a block writes lands in the repository.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
_EXCUSE = re.compile(r"<!--\s*not run:\s*(.+?)\s*-->\s*$")
_PEER_HINTS = ("cap peers install", "peers env")


def readme_blocks() -> list[tuple[str, str, str, str | None]]:
    """(id, language, code, excuse) for every fenced block with a language."""
    text = (ROOT / "README.md").read_text()
    blocks = []
    for match in _FENCE.finditer(text):
        language, code = match.group(1), match.group(2)
        if language not in ("sh", "python"):
            continue
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        excuse = _EXCUSE.search(before)
        blocks.append((f"README.md:{line}", language, code, excuse.group(1) if excuse else None))
    return blocks


def _params() -> list[object]:
    params = []
    for ident, language, code, excuse in readme_blocks():
        marks = [pytest.mark.peers] if any(h in code for h in _PEER_HINTS) else []
        params.append(pytest.param(language, code, excuse, id=ident, marks=marks))
    return params


def test_readme_has_runnable_blocks_and_excuses_give_reasons():
    blocks = readme_blocks()
    assert sum(1 for b in blocks if b[3] is None) >= 4
    for ident, _, _, excuse in blocks:
        assert excuse is None or len(excuse) > 10, f"{ident}: say why the block is not run"


@pytest.mark.parametrize(("language", "code", "excuse"), _params())
def test_readme_block_runs(language: str, code: str, excuse: str | None, tmp_path: Path):
    if excuse is not None:
        # Excused blocks are still checked for syntax: a reader will run them.
        if language == "python":
            compile(code, "README", "exec")
        else:
            checked = subprocess.run(["bash", "-n", "-c", code], capture_output=True,
                                     text=True, timeout=30)
            assert checked.returncode == 0, checked.stderr
        return
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    if language == "python":
        argv = [sys.executable, "-c", code]
    else:
        # Background jobs a block starts (a model server) end with it.
        argv = ["bash", "-c", "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n"
                + code]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=240, stdin=subprocess.DEVNULL)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
