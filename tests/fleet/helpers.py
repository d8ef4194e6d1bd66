"""Run a fleet file in-process on trio-cap's scripted agent and read what it logged."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import attrs
import trio

from trio_cap.actors.fleet import load_fleet, run_fleet
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.events.log import FileEventLog

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "fleets"
CAP = [sys.executable, "-m", "trio_cap.actors.cli"]


def copy_examples(tmp_path: Path) -> Path:
    """The examples in a directory of their own, so their working directories land there."""
    where = tmp_path / "fleets"
    shutil.copytree(EXAMPLES, where)
    return where


async def run_file(path: Path, log_path: Path | None = None, **changes):
    """(outcome, the log read back, the live fleets projection) of one run."""
    fleet = load_fleet(path)
    if changes:
        fleet = attrs.evolve(fleet, **changes)
    log_path = log_path or path.with_suffix(".caplog")
    async with open_orchestrator(log_path, ids=SequentialIds()) as orch:
        with trio.fail_after(120):
            outcome = await run_fleet(orch, fleet)
            await orch.caught_up()
        live = orch.state.fleets
    return outcome, FileEventLog(log_path, readonly=True), live


async def run_with_person(orch, fleet, ready, act):
    """Run ``fleet`` with a person present (``human=True``) until ``ready(state)`` holds,
    then ``await act(state)`` as that person would; the fleet's outcome."""
    done: list = []
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            done.append(await run_fleet(orch, fleet, human=True))

        nursery.start_soon(run)
        await act(await orch.wait_until(ready))
    await orch.caught_up()
    (outcome,) = done
    return outcome


def events(log, kind: str, stream: str | None = None) -> list:
    return [env for env in log.read(1, stream) if env.kind == kind]


def cap(*args: str, cwd: Path | str | None = None, timeout: float = 120):
    return subprocess.run([*CAP, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True, timeout=60).stdout


def git_repo(tmp_path: Path, committed: dict[str, str]) -> Path:
    """A git repository at ``tmp_path/repo`` on branch main whose first commit holds
    ``committed`` (name → text)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    for name, text in committed.items():
        (repo / name).write_text(text)
    git(repo, "add", *committed)
    git(repo, "commit", "-q", "-m", "first")
    return repo


def worktree(repo: Path, member: str, fleet: str = "*", run: str = "*") -> Path:
    """The one working directory ``member`` got in ``repo`` (a run's own:
    ``.cap-worktrees/<fleet>/<run>/<member>``); fails when there is not exactly one."""
    found = sorted((Path(repo) / ".cap-worktrees").glob(f"{fleet}/{run}/{member}"))
    assert len(found) == 1, f"expected one worktree of {member} in {repo}, found {found}"
    return found[0]
