"""Setup steps in each new worktree before its agent starts: files copied from the checkout,
install commands with a bounded time, each an event with its exit status."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.fleet.helpers import cap, events, git_repo, run_file, worktree
from trio_cap.events.log import FileEventLog

FLEET = '''\
name = "st"
task = "write hello.txt: hi"
permissions = "allow"

[setup]
copy = [".env", "conf/local.ini"]
run = [{install}]
timeout_s = {timeout}

[[session]]
id = "en"
binding = "inproc"

[[session]]
id = "fr"
binding = "inproc"
'''

INSTALL = f'["{sys.executable}", "-c", "open(\'installed.txt\', \'w\').write(\'ok\')"]'


@pytest.fixture
def repo(tmp_path):
    repo = git_repo(tmp_path, {".gitignore": ".env\nconf/\n"})
    (repo / ".env").write_text("TOKEN=secret\n")  # untracked: a fresh worktree lacks it
    (repo / "conf").mkdir()
    (repo / "conf" / "local.ini").write_text("[x]\n")
    return repo


def _fleet(repo, install: str = INSTALL, timeout: float = 60) -> None:
    (repo / "fleet.toml").write_text(FLEET.format(install=install, timeout=timeout))


def test_each_worktree_gets_the_files_and_the_install_before_its_agent_starts(repo):
    _fleet(repo)
    run = cap("fleet", "run", "fleet.toml", "--headless", "--log", "run.caplog", cwd=repo)
    assert run.returncode == 0, run.stderr
    assert "fleet.setup              en: step 1 copy .env: ok" in run.stdout
    for member in ("en", "fr"):
        wt = worktree(repo, member)
        assert (wt / ".env").read_text() == "TOKEN=secret\n"
        assert (wt / "conf" / "local.ini").read_text() == "[x]\n"
        assert (wt / "installed.txt").read_text() == "ok"
        assert (wt / "hello.txt").read_text() == "hi\n"  # the agent ran after it
    log = FileEventLog(repo / "run.caplog", readonly=True)
    steps = [env for env in events(log, "fleet.setup") if env.event.member == "en"]
    assert [(e.event.step, e.event.action, e.event.ok, e.event.exit_code)
            for e in steps] == [(1, "copy", True, None), (2, "copy", True, None),
                                (3, "run", True, 0)]
    first_session = min(env.seq for env in events(log, "session.created"))
    assert max(env.seq for env in events(log, "fleet.setup")) < first_session
    log.close()


def test_a_failing_step_fails_the_run_before_any_agent_starts(repo):
    _fleet(repo, install='"sh -c \'echo cannot reach the registry >&2; exit 3\'"')
    run = cap("fleet", "run", "fleet.toml", "--headless", "--log", "run.caplog", cwd=repo)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    (line,) = run.stderr.splitlines()
    assert line.startswith("cap fleet: st failed: setup of ")
    assert "failed at step 3 (run sh -c 'echo cannot reach the registry >&2; exit 3'): " \
           "exited with 3: cannot reach the registry; log " in line
    log = FileEventLog(repo / "run.caplog", readonly=True)
    assert events(log, "session.created") == []  # no agent started
    failed = [e.event for e in events(log, "fleet.setup") if not e.event.ok]
    assert {(f.member, f.exit_code) for f in failed} == {("en", 3), ("fr", 3)}
    assert [e.kind for e in log.read(1, "fleet:st")][-1] == "fleet.failed"
    log.close()
    status = cap("fleet", "status", "run.caplog", cwd=repo)
    assert "fleet st: failed: setup of" in status.stdout


def test_a_missing_file_to_copy_is_a_failed_step(repo):
    (repo / ".env").unlink()
    _fleet(repo)
    run = cap("fleet", "run", "fleet.toml", "--log", "run.caplog", cwd=repo)
    assert run.returncode == 1
    (line,) = run.stderr.splitlines()
    assert "failed at step 1 (copy .env): " in line and ".env does not exist" in line


async def test_a_command_past_its_timeout_is_killed_with_its_children(repo):
    _fleet(repo, install='"sh -c \'sleep 60 & echo $! > bg.pid; wait\'"', timeout=0.5)
    outcome, log, _ = await run_file(repo / "fleet.toml", repo / "run.caplog")
    assert not outcome.completed
    background = int((worktree(repo, "en") / "bg.pid").read_text())
    assert not _alive(background)  # the whole process group went, not just sh
    (en,) = [e.event for e in events(log, "fleet.setup") if e.event.member == "en"
             and e.event.action == "run"]
    assert en.exit_code is None and not en.ok
    assert en.detail.startswith("killed after 0.5 s (setup.timeout_s)")
    assert en.duration_ms < 30_000
    assert "setup of" in outcome.reason and "killed after 0.5 s" in outcome.reason


def _alive(pid: int) -> bool:
    """Running (a zombie that nobody reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_setup_problems_are_listed_with_the_file(tmp_path):
    (tmp_path / "fleet.toml").write_text(
        'name = "x"\ntask = "t"\nworktrees = "none"\n[setup]\ncopy = ["../secrets"]\n'
        'run = ["npm ci"]\ntimeout_s = -1\ninstall = 1\n[[session]]\nid = "a"\n')
    run = cap("fleet", "validate", "fleet.toml", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        "cap: error: fleet.toml: setup.install: unknown key (setup takes copy, run, timeout_s)",
        "fleet.toml: setup.copy[0]: '../secrets' must be a path inside the checkout "
        "(relative, no '..')",
        "fleet.toml: setup.timeout_s: expected seconds as a number > 0, got -1",
        'fleet.toml: setup: setup runs in each new working directory, and worktrees = "none" '
        'makes none: use "git" or "dirs"']
