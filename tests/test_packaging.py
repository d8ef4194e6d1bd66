"""trio-cap installs under one import name, next to anything else a user has.

The repository's folders are ``actors/`` and ``events/``; a wheel must carry
them as ``trio_cap.actors`` / ``trio_cap.events`` so PyPI's ``events`` package
(or an application's own ``events`` module) cannot shadow or overwrite them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _package_folders() -> set[str]:
    found = set()
    for top in ("actors", "events"):
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT)
            if rel.parts[:2] == ("actors", "public") or "__pycache__" in rel.parts:
                continue
            found.add("trio_cap." + ".".join(rel.parts))
    return found


def test_every_package_folder_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    assert listed == _package_folders() | {"trio_cap"}


def test_wheel_installs_beside_pypi_events_and_runs_a_session(tmp_path):
    """A non-editable install next to PyPI's ``events`` runs a session.

    The wheel and PyPI's ``events`` go into one target folder; the test venv
    supplies the dependencies.  The repository root is not on the path, so
    only the installed copy can be imported.
    """
    target = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
         "--target", str(target), str(ROOT), "events"],
        capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    assert (target / "events").is_dir() or (target / "events.py").is_file(), \
        "PyPI's events package should sit beside trio_cap"
    assert (target / "trio_cap" / "events" / "kinds.py").is_file()
    program = (
        "import sys, trio, events\n"
        "import trio_cap\n"
        "assert trio_cap.__file__.startswith(sys.argv[1]), trio_cap.__file__\n"
        "assert 'trio_cap' not in (getattr(events, '__file__', '') or '')\n"
        "async def main():\n"
        "    async with trio_cap.open_orchestrator() as orch:\n"
        "        s = await orch.start_session(cwd=sys.argv[2], permissions='allow')\n"
        "        r = await s.run_turn('hello')\n"
        "        await s.close()\n"
        "        print(r.stop_reason, type(events.Events).__name__)\n"
        "trio.run(main)\n")
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run([sys.executable, "-c", program, str(target), str(tmp_path)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split()[0] == "end_turn"
