"""The rating and the raw budget are pure: they import nothing that touches the world.

The session machine rates from them on every replay, so they may not read the
filesystem, the clock or the environment; a module that tried would fail here.
"""

import subprocess
import sys

PURE = [
    "trio_cap.actors.risk",
    "trio_cap.actors.risk.paths",
    "trio_cap.actors.risk.shell",
    "trio_cap.actors.risk.commands",
    "trio_cap.actors.risk.programs",
    "trio_cap.actors.risk.git",
    "trio_cap.actors.session.raw_budget",
]
FORBIDDEN = ["trio", "subprocess", "socket", "os", "time", "random", "uuid", "pathlib",
             "glob", "shutil"]

PROGRAM = f"""
import importlib, sys
# the rating's real user and everything it loads (third-party and stdlib modules that
# import os for their own ends: inspect, importlib.resources, shlex) load normally first
import trio_cap.actors.orchestrator
for name in list(sys.modules):
    if name in {PURE!r}:
        del sys.modules[name]
for name in {FORBIDDEN!r}:
    sys.modules[name] = None  # `import name` now fails
for name in {PURE!r}:
    importlib.import_module(name)
from trio_cap.actors.risk import rate
print(rate("Bash", {{"command": "rm -rf x"}}, "execute", "/ws").level)
"""


def test_rating_modules_import_with_io_modules_unimportable():
    result = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "high"
