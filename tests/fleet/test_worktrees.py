"""Git worktrees per member, their diffs in the log, and ``cap fleet clean`` — as processes."""

from __future__ import annotations

import pytest

from tests.fleet.helpers import cap, events, git

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
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    (repo / "hello.txt").write_text("hi\n")
    git(repo, "add", "hello.txt")
    git(repo, "commit", "-q", "-m", "first")
    (repo / "fleet.toml").write_text(FLEET)
    (repo / "en.toml").write_text(
        '[[turn]]\nsteps = [ { write = "hello.txt", content = "hello\\n" }, { say = "en" } ]\n')
    (repo / "fr.toml").write_text(
        '[[turn]]\nsteps = [ { write = "hello.txt", content = "bonjour\\n" }, '
        '{ write = "new.txt", content = "neu\\n" }, { say = "fr" } ]\n')
    return repo


def test_two_members_edit_the_same_file_in_their_own_worktrees(repo):
    run = cap("fleet", "run", "fleet.toml", "--headless", "--log", "run.caplog", cwd=repo)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert "fleet.worktree           en: works in" in run.stdout  # one plain line per event
    assert run.stdout.splitlines()[-1].endswith("fleet wt completed, spent $0.0000")
    assert run.stderr.startswith("cap fleet: wt completed (spent $0.0000); log ")
    wt = repo / ".cap-worktrees"
    assert (wt / "en" / "hello.txt").read_text() == "hello\n"
    assert (wt / "fr" / "hello.txt").read_text() == "bonjour\n"
    assert (repo / "hello.txt").read_text() == "hi\n"  # the main checkout is untouched
    assert not (wt / "en" / "new.txt").exists()
    assert git(wt / "fr", "rev-parse", "--abbrev-ref", "HEAD").strip() == "cap/wt/fr"
    assert ".cap-worktrees" not in git(repo, "status", "--porcelain")  # excluded
    from trio_cap.events.log import FileEventLog

    log = FileEventLog(repo / "run.caplog", readonly=True)
    diffs = {e.event.meta["cap.member"]: e.event.content
             for e in events(log, "cap.artifact", "fleet:wt")}
    assert "-hi\n+hello\n" in diffs["en"] and "new.txt" not in diffs["en"]
    assert "-hi\n+bonjour\n" in diffs["fr"] and "+neu\n" in diffs["fr"]
    made = [(e.event.member, e.event.branch) for e in events(log, "fleet.worktree")]
    assert made == [("en", "cap/wt/en"), ("fr", "cap/wt/fr")]
    # the worktrees' index was not touched by taking the diff
    assert git(wt / "fr", "status", "--porcelain").splitlines() == [" M hello.txt",
                                                                    "?? new.txt"]
    log.close()

    status = cap("fleet", "status", "run.caplog", cwd=repo)
    assert status.returncode == 0, status.stderr
    assert "fleet wt: completed" in status.stdout
    assert "cap/wt/en" in status.stdout

    # a second run refuses: the last run's worktrees are still there
    again = cap("fleet", "run", "fleet.toml", "--log", "again.caplog", cwd=repo)
    assert again.returncode == 2
    (line,) = again.stderr.splitlines()
    assert line.startswith("cap: error: ") and "exists already" in line

    refused = cap("fleet", "clean", "fleet.toml", "--log", "run.caplog", cwd=repo)
    assert refused.returncode == 1
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "uncommitted changes" in refused.stderr
    assert (wt / "en").is_dir()  # nothing removed

    cleaned = cap("fleet", "clean", "fleet.toml", "--log", "run.caplog", "--force", cwd=repo)
    assert cleaned.returncode == 0, cleaned.stderr
    assert not (wt / "en").exists() and not (wt / "fr").exists()
    assert git(repo, "branch", "--list", "cap/*").strip() == ""
    assert git(repo, "worktree", "list").count("\n") == 1


def test_clean_removes_only_what_the_log_says_the_fleet_made(repo):
    run = cap("fleet", "run", "fleet.toml", "--log", "run.caplog", cwd=repo)
    assert run.returncode == 0, run.stderr
    for member in ("en", "fr"):  # commit and merge: nothing would be lost
        wt = repo / ".cap-worktrees" / member
        git(wt, "add", "-A")
        git(wt, "commit", "-q", "-m", member)
    git(repo, "branch", "keep-en", "cap/wt/en")  # en's commit is on another branch too
    mine = repo / ".cap-worktrees" / "mine"
    mine.mkdir()
    refused = cap("fleet", "clean", "fleet.toml", "--log", "run.caplog", cwd=repo)
    assert refused.returncode == 1
    assert "commits on cap/wt/fr that no other branch has" in refused.stderr
    git(repo, "branch", "keep-fr", "cap/wt/fr")
    cleaned = cap("fleet", "clean", "fleet.toml", "--log", "run.caplog", cwd=repo)
    assert cleaned.returncode == 0, cleaned.stderr
    assert mine.is_dir()  # not the fleet's
    assert git(repo, "branch", "--list", "cap/*").strip() == ""
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
