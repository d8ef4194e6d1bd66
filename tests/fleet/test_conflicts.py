"""Who changed which file, a second member on the same file logged when it happens, and
``cap fleet merge`` in plan order stopping clean at the first conflict."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from tests.fleet.helpers import cap, events, git, run_file, worktree
from trio_cap.events.log import FileEventLog
from trio_cap.events.replay import replay

PIPELINE = '''\
name = "cf"
task = "Edit the greeting."
permissions = "allow"

[[session]]
id = "en"
binding = "inproc"
script = "en.toml"

[[session]]
id = "fr"
binding = "inproc"
script = "fr.toml"

[[route]]
pipeline = ["en", "fr"]
'''

EN = '[[turn]]\nsteps = [ { write = "hello.txt", content = "hello\\n" }, { say = "en" } ]\n'
FR = ('[[turn]]\nsteps = [ { write = "new.txt", content = "neu\\n" }, '
      '{ write = "hello.txt", content = "bonjour\\n" }, { say = "fr" } ]\n')


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    (repo / "hello.txt").write_text("hi\n")
    (repo / ".gitignore").write_text("*.caplog\n.cap/\n*.toml\n")
    git(repo, "add", "hello.txt", ".gitignore")
    git(repo, "commit", "-q", "-m", "first")
    (repo / "fleet.toml").write_text(PIPELINE)
    (repo / "en.toml").write_text(EN)
    (repo / "fr.toml").write_text(FR)
    return repo


async def test_a_second_member_on_the_same_file_is_logged_when_it_happens(repo):
    outcome, log, live = await run_file(repo / "fleet.toml", repo / "run.caplog")
    assert outcome.completed, outcome.reason
    (conflict,) = events(log, "fleet.conflict")
    assert (conflict.event.path, conflict.event.members, conflict.event.via) == (
        "hello.txt", ("en", "fr"), "tool")
    # caused by fr's write ending, and logged before the fleet took fr's turn end
    cause = next(env for env in log.read(conflict.cause, "cf.fr"))
    assert cause.seq == conflict.cause and cause.kind == "cap.tool_call.end"
    fr_consumed = [env for env in events(log, "fleet.message.consumed")
                   if env.event.target == "fr"]
    assert conflict.seq < fr_consumed[0].seq
    assert conflict.seq < min(env.seq for env in events(log, "cap.artifact"))
    touched = [(e.event.member, e.event.path, e.event.via) for e in events(log, "fleet.touched")]
    assert touched == [("en", "hello.txt", "tool"), ("fr", "new.txt", "tool"),
                       ("fr", "hello.txt", "tool")]
    view = live.fleets["cf"]
    assert view.touched == {"hello.txt": ["en", "fr"], "new.txt": ["fr"]}
    assert [c.path for c in view.conflicts] == ["hello.txt"]
    assert [row.detail for row in view.audit if row.kind == "fleet.conflict"] == [
        "conflict (tool)"]
    assert msgspec.to_builtins(replay(log).fleets) == msgspec.to_builtins(live)


async def test_a_file_only_the_diff_shows_is_touched_at_the_end(repo):
    (repo / "fr.toml").write_text(
        '[[turn]]\nsteps = [ { run = "cp new.txt hello.txt" }, { say = "fr" } ]\n')
    (repo / "new.txt").write_text("copied\n")
    git(repo, "add", "new.txt")
    git(repo, "commit", "-q", "-m", "second")
    outcome, log, live = await run_file(repo / "fleet.toml", repo / "run.caplog")
    assert outcome.completed, outcome.reason
    (conflict,) = events(log, "fleet.conflict")
    assert (conflict.event.members, conflict.event.via) == (("en", "fr"), "diff")
    assert live.fleets["cf"].touched == {"hello.txt": ["en", "fr"]}


def test_headless_output_and_status_show_the_conflict(repo):
    run = cap("fleet", "run", "fleet.toml", "--headless", "--log", "run.caplog", cwd=repo)
    assert run.returncode == 0, run.stderr
    (line,) = [ln for ln in run.stdout.splitlines() if "fleet.conflict" in ln]
    assert line.endswith("WARNING conflict: fr changed hello.txt, which en changed too: "
                         "their branches will collide at merge")
    status = cap("fleet", "status", "run.caplog", cwd=repo)
    assert "  conflict hello.txt: changed by en, fr" in status.stdout.splitlines()


def test_merge_stops_at_the_first_conflict_and_leaves_the_repo_clean(repo):
    run = cap("fleet", "run", "fleet.toml", "--log", "run.caplog", cwd=repo)
    assert run.returncode == 0, run.stderr
    head = git(repo, "rev-parse", "HEAD")
    merged = cap("fleet", "merge", "run.caplog", cwd=repo)
    assert merged.returncode == 1
    assert "Traceback" not in merged.stderr
    (summary,) = merged.stderr.splitlines()
    assert summary.startswith("cap fleet merge: stopped at fr (cap/cf/")
    assert "conflict in hello.txt (changed by en, fr); merged en; not merged fr" in summary
    assert "committed en's uncommitted work on cap/cf/" in merged.stdout
    assert "conflict in hello.txt: changed by en, fr" in merged.stdout.splitlines()
    # en's merge stays; fr's was aborted: nothing half-merged, nothing staged
    assert git(repo, "rev-parse", "HEAD") != head
    assert (repo / "hello.txt").read_text() == "hello\n"
    assert not (repo / "new.txt").exists()
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    assert not (repo / ".git" / "MERGE_HEAD").exists()
    # fr's work was committed on its branch, so nothing is lost
    assert git(worktree(repo, "fr"), "status", "--porcelain") == ""


def test_merge_goes_in_plan_order(repo):
    (repo / "fleet.toml").write_text(PIPELINE.replace('[[route]]\npipeline = ["en", "fr"]\n', '''\
[[plan]]
id = "first"
content = "write b.txt: B"
assigned_to = "fr"

[[plan]]
id = "then"
content = "write a.txt: A"
assigned_to = "en"
depends_on = ["first"]
''').replace('script = "en.toml"\n', "").replace('script = "fr.toml"\n', ""))
    run = cap("fleet", "run", "fleet.toml", "--log", "run.caplog", cwd=repo)
    assert run.returncode == 0, run.stderr
    merged = cap("fleet", "merge", "run.caplog", cwd=repo)
    assert merged.returncode == 0, merged.stderr
    assert merged.stderr == "cap fleet merge: merged fr, en into main\n"
    subjects = git(repo, "log", "--merges", "--reverse", "--format=%s").splitlines()
    assert [s.split(": merge ")[1].split(" ")[0] for s in subjects] == ["fr", "en"]
    assert (repo / "a.txt").read_text() == "A\n" and (repo / "b.txt").read_text() == "B\n"
    again = cap("fleet", "merge", "run.caplog", cwd=repo)  # nothing new: nothing happens
    assert again.returncode == 0, again.stderr
    assert "skipped fr: nothing to merge" in again.stdout


def test_merge_refuses_a_dirty_checkout_or_another_branch_in_one_line(repo):
    run = cap("fleet", "run", "fleet.toml", "--log", "run.caplog", cwd=repo)
    assert run.returncode == 0, run.stderr
    (repo / "hello.txt").write_text("mine\n")
    dirty = cap("fleet", "merge", "run.caplog", cwd=repo)
    assert dirty.returncode == 1
    assert dirty.stderr.splitlines() == [
        f"cap fleet merge: {repo} has uncommitted changes: commit or stash them first"]
    git(repo, "checkout", "-q", "hello.txt")
    git(repo, "checkout", "-q", "-b", "elsewhere")
    away = cap("fleet", "merge", "run.caplog", cwd=repo)
    assert away.returncode == 1
    assert away.stderr.splitlines() == [
        f"cap fleet merge: {repo} is on elsewhere, not main (the run's base branch): "
        "check out main there first"]
    log = FileEventLog(repo / "run.caplog", readonly=True)
    assert events(log, "fleet.completed")
    log.close()


def test_merge_of_a_log_without_a_fleet_is_bad_usage(tmp_path):
    (tmp_path / "task.txt").write_text("hi")
    ran = cap("run", "--agent", "cap-agent", "--binding", "inproc", "--task", "hello",
              "--log", "one.caplog", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    merged = cap("fleet", "merge", "one.caplog", cwd=tmp_path)
    assert merged.returncode == 2
    assert merged.stderr.splitlines() == ["cap: error: one.caplog has no fleet in it"]


def test_what_setup_copied_in_is_in_no_diff_and_no_merge(repo):
    (repo / "secret.env").write_text("TOKEN=1\n")  # untracked, and not ignored either
    (repo / "fleet.toml").write_text(PIPELINE.replace(
        '[[session]]', '[setup]\ncopy = ["secret.env"]\n\n[[session]]', 1))
    (repo / "fr.toml").write_text(
        '[[turn]]\nsteps = [ { write = "new.txt", content = "neu\\n" }, { say = "fr" } ]\n')
    run = cap("fleet", "run", "fleet.toml", "--log", "run.caplog", cwd=repo)
    assert run.returncode == 0, run.stderr
    log = FileEventLog(repo / "run.caplog", readonly=True)
    diffs = [e.event.content for e in events(log, "cap.artifact")]
    assert diffs and not any("secret.env" in d for d in diffs)
    assert "+neu" in "".join(diffs)
    log.close()
    merged = cap("fleet", "merge", "run.caplog", cwd=repo)
    assert merged.returncode == 0, merged.stderr
    assert (repo / "new.txt").read_text() == "neu\n"
    assert "secret.env" not in git(repo, "log", "--all", "--name-only", "--format=")
    assert (worktree(repo, "fr") / "secret.env").exists()  # still there, uncommitted
    # merged, and only setup's copy left untracked: clean needs no --force
    cleaned = cap("fleet", "clean", "fleet.toml", "--log", "run.caplog", cwd=repo)
    assert cleaned.returncode == 0, cleaned.stderr
    assert not (repo / ".cap-worktrees" / "cf").exists()


async def test_merge_asks_which_fleet_when_a_log_holds_several(repo):
    import attrs

    from trio_cap.actors.fleet import load_fleet, run_fleet
    from trio_cap.actors.orchestrator import open_orchestrator

    (repo / "fr.toml").write_text(
        '[[turn]]\nsteps = [ { write = "new.txt", content = "neu\\n" }, { say = "fr" } ]\n')
    fleet = load_fleet(repo / "fleet.toml")
    async with open_orchestrator(repo / "two.caplog") as orch:
        for name in ("one", "two"):
            outcome = await run_fleet(orch, attrs.evolve(fleet, name=name))
            assert outcome.completed, outcome.reason
    both = cap("fleet", "merge", "two.caplog", cwd=repo)
    assert both.returncode == 2
    assert both.stderr.splitlines() == [
        "cap: error: two.caplog holds fleets one, two: say which with --fleet NAME"]
    two = cap("fleet", "merge", "two.caplog", "--fleet", "two", cwd=repo)
    assert two.returncode == 0, two.stderr
    assert two.stderr == "cap fleet merge: merged en, fr into main\n"
    assert (repo / "new.txt").read_text() == "neu\n"
    subjects = git(repo, "log", "--merges", "--reverse", "--format=%s").splitlines()
    assert [s.split(" (")[0] for s in subjects] == ["cap fleet two: merge en",
                                                    "cap fleet two: merge fr"]
