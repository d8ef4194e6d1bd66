"""Git worktrees per member, their diffs in the log, and ``cap fleet clean`` — as processes."""

from __future__ import annotations

import subprocess

import pytest

from tests.fleet.helpers import CAP, cap, events, git, git_repo, worktree
from trio_cap.events.log import FileEventLog

FLEET = '''\
name = "wt"
task = "Edit the greeting."
budget_usd = 1.0
permissions = "allow"

[[session]]
id = "en"
binding = "inproc"
script = "en.toml"

[[session]]
id = "fr"
binding = "inproc"
script = "fr.toml"
'''


@pytest.fixture
def repo(tmp_path):
    repo = git_repo(tmp_path, {"hello.txt": "hi\n"})
    (repo / "fleet.toml").write_text(FLEET)
    (repo / "en.toml").write_text(
        '[[turn]]\nsteps = [ { write = "hello.txt", content = "hello\\n" }, { say = "en" } ]\n')
    (repo / "fr.toml").write_text(
        '[[turn]]\nsteps = [ { write = "hello.txt", content = "bonjour\\n" }, '
        '{ write = "new.txt", content = "neu\\n" }, { say = "fr" } ]\n')
    return repo


def _branches(repo) -> list[str]:
    return git(repo, "branch", "--list", "--format=%(refname:short)", "cap/*").split()


def _run_id(log_path) -> str:
    log = FileEventLog(log_path, readonly=True)
    try:
        (started,) = events(log, "fleet.started")
        return started.event.run
    finally:
        log.close()


def test_two_members_edit_the_same_file_in_their_own_worktrees(repo):
    run = cap("fleet", "run", "fleet.toml", "--headless", "--log", "run.caplog", cwd=repo)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert "fleet.worktree           en: works in" in run.stdout  # one plain line per event
    assert run.stdout.splitlines()[-1].endswith("fleet wt completed, spent $0.0000")
    assert run.stderr.startswith("cap fleet: wt completed (spent $0.0000); log ")
    rid = _run_id(repo / "run.caplog")
    en, fr = worktree(repo, "en", "wt", rid), worktree(repo, "fr", "wt", rid)
    assert en == repo / ".cap-worktrees" / "wt" / rid / "en"
    assert (en / "hello.txt").read_text() == "hello\n"
    assert (fr / "hello.txt").read_text() == "bonjour\n"
    assert (repo / "hello.txt").read_text() == "hi\n"  # the main checkout is untouched
    assert not (en / "new.txt").exists()
    assert git(fr, "rev-parse", "--abbrev-ref", "HEAD").strip() == f"cap/wt/{rid}/fr"
    assert ".cap-worktrees" not in git(repo, "status", "--porcelain")  # excluded
    log = FileEventLog(repo / "run.caplog", readonly=True)
    diffs = {e.event.meta["cap.member"]: e.event.content
             for e in events(log, "cap.artifact", "fleet:wt")}
    assert "-hi\n+hello\n" in diffs["en"] and "new.txt" not in diffs["en"]
    assert "-hi\n+bonjour\n" in diffs["fr"] and "+neu\n" in diffs["fr"]
    made = [(e.event.member, e.event.branch, e.event.base_ref)
            for e in events(log, "fleet.worktree")]
    assert made == [("en", f"cap/wt/{rid}/en", "main"), ("fr", f"cap/wt/{rid}/fr", "main")]
    # the worktrees' index was not touched by taking the diff
    assert git(fr, "status", "--porcelain").splitlines() == [" M hello.txt", "?? new.txt"]
    log.close()

    status = cap("fleet", "status", "run.caplog", cwd=repo)
    assert status.returncode == 0, status.stderr
    assert "fleet wt: completed" in status.stdout
    assert f"cap/wt/{rid}/en" in status.stdout

    # the file runs again while the last run's work waits for review: worktrees of its own
    again = cap("fleet", "run", "fleet.toml", "--log", "again.caplog", cwd=repo)
    assert again.returncode == 0, again.stderr
    rid2 = _run_id(repo / "again.caplog")
    assert rid2 != rid
    assert (worktree(repo, "fr", "wt", rid2) / "hello.txt").read_text() == "bonjour\n"

    refused = cap("fleet", "clean", "fleet.toml", "--log", "run.caplog", cwd=repo)
    assert refused.returncode == 1
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "uncommitted changes" in refused.stderr
    assert en.is_dir()  # nothing removed

    cleaned = cap("fleet", "clean", "fleet.toml", "--log", "run.caplog", "--force", cwd=repo)
    assert cleaned.returncode == 0, cleaned.stderr
    assert not en.exists() and not fr.exists()
    assert not (repo / ".cap-worktrees" / "wt" / rid).exists()  # the run's folder went too
    assert _branches(repo) == [f"cap/wt/{rid2}/en", f"cap/wt/{rid2}/fr"]
    assert worktree(repo, "en", "wt", rid2).is_dir()  # the other run's: not in that log
    cleaned = cap("fleet", "clean", "fleet.toml", "--log", "again.caplog", "--force", cwd=repo)
    assert cleaned.returncode == 0, cleaned.stderr
    assert _branches(repo) == []
    assert git(repo, "worktree", "list").count("\n") == 1
    assert not (repo / ".cap-worktrees" / "wt").exists()


def test_one_fleet_file_runs_twice_at_once(repo):
    """Two processes, one file, started together: each run makes its own worktrees and
    branches, neither waits for nor refuses the other."""
    procs = [subprocess.Popen([*CAP, "fleet", "run", "fleet.toml", "--log", f"r{n}.caplog"],
                              cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True) for n in (1, 2)]
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    rids = {_run_id(repo / "r1.caplog"), _run_id(repo / "r2.caplog")}
    assert len(rids) == 2
    for rid in rids:
        assert (worktree(repo, "en", "wt", rid) / "hello.txt").read_text() == "hello\n"
    assert len(_branches(repo)) == 4


def test_clean_removes_only_what_the_log_says_the_fleet_made(repo):
    run = cap("fleet", "run", "fleet.toml", "--log", "run.caplog", cwd=repo)
    assert run.returncode == 0, run.stderr
    rid = _run_id(repo / "run.caplog")
    for member in ("en", "fr"):  # commit and merge: nothing would be lost
        wt = worktree(repo, member)
        git(wt, "add", "-A")
        git(wt, "commit", "-q", "-m", member)
    git(repo, "branch", "keep-en", f"cap/wt/{rid}/en")  # en's commit is on another branch too
    mine = repo / ".cap-worktrees" / "mine"
    mine.mkdir()
    refused = cap("fleet", "clean", "fleet.toml", "--log", "run.caplog", cwd=repo)
    assert refused.returncode == 1
    assert f"commits on cap/wt/{rid}/fr that no other branch has" in refused.stderr
    git(repo, "branch", "keep-fr", f"cap/wt/{rid}/fr")
    cleaned = cap("fleet", "clean", "fleet.toml", "--log", "run.caplog", cwd=repo)
    assert cleaned.returncode == 0, cleaned.stderr
    assert mine.is_dir()  # not the fleet's
    assert _branches(repo) == []
    assert git(repo, "rev-parse", "--verify", "keep-fr").strip()


def test_a_repo_that_is_not_git_is_a_clear_error_and_leaves_no_log(tmp_path):
    (tmp_path / "fleet.toml").write_text(FLEET.replace('script = "en.toml"\n', "")
                                         .replace('script = "fr.toml"\n', ""))
    run = cap("fleet", "run", "fleet.toml", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        f"cap: error: repo {tmp_path} is not a git repository (worktrees = \"git\"): run git "
        'init there, or set worktrees = "dirs" for plain directories']
    assert list((tmp_path / ".cap" / "fleets" / "wt").glob("*.caplog")) == []
    assert not (tmp_path / ".cap-worktrees").exists()
