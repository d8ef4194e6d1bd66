"""A two-worker fan-out/join fleet of trio-cap's scripted agent in a git repo of its own.

The lead splits the task, ``en`` and ``fr`` each write ``hello.txt`` in their own git
worktree, and the lead gets both results once both are done.  ``en``'s policy is
``ask``: its write is the permission request that must reach the face's client, named
after ``en``; the others' policy is ``allow``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CAP = [sys.executable, "-m", "trio_cap.actors.cli"]

LEAD = ('[[turn]]\nsteps = [ { say = "English greeting to en, French greeting to fr." } ]\n'
        '[[turn]]\nsteps = [ { say = "Both greetings are written." } ]\n')
EN = ('[[turn]]\nsteps = [ { write = "hello.txt", content = "hello\\n" }, '
      '{ say = "hello.txt says hello." } ]\n')
FR = ('[[turn]]\nsteps = [ { write = "hello.txt", content = "bonjour\\n" }, '
      '{ say = "hello.txt says bonjour." } ]\n')
FAILS = '[[turn]]\nsteps = [ { fail = "model_unavailable", message = "the model is down" } ]\n'


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True, timeout=60).stdout


def make_fleet(tmp_path: Path, *, en_permissions: str = "ask", fr_script: str = FR,
               name: str = "face") -> Path:
    """The fleet file (in a fresh git repo, which is also where the worktrees go)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    (repo / "README.md").write_text("# greetings\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-qm", "start")
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    for file, text in (("lead", LEAD), ("en", EN), ("fr", fr_script)):
        (scripts / f"{file}.toml").write_text(text)
    path = tmp_path / "fleet.toml"
    path.write_text(f"""\
name = "{name}"
repo = "repo"
worktrees = "git"
permissions = "allow"

[[session]]
id = "lead"
binding = "inproc"
script = "scripts/lead.toml"

[[session]]
id = "en"
binding = "inproc"
script = "scripts/en.toml"
permissions = "{en_permissions}"

[[session]]
id = "fr"
binding = "inproc"
script = "scripts/fr.toml"

[[route]]
fan_out = {{ from = "lead", to = ["en", "fr"] }}
rounds = 1

[[route]]
join = {{ from = ["en", "fr"], to = "lead" }}
""")
    return path


def make_pipeline(tmp_path: Path, name: str = "duo") -> Path:
    """A two-agent fleet: ``en`` writes (policy ``ask``), then ``fr`` gets its result and
    writes its own; worktrees in a fresh git repo."""
    path = make_fleet(tmp_path, name=name)
    path.write_text(f"""\
name = "{name}"
repo = "repo"
worktrees = "git"
permissions = "allow"

[[session]]
id = "en"
binding = "inproc"
script = "scripts/en.toml"
permissions = "ask"

[[session]]
id = "fr"
binding = "inproc"
script = "scripts/fr.toml"

[[route]]
pipeline = ["en", "fr"]
""")
    return path
