"""``cap fleet resume LOG``: kill -9 of a real ``cap fleet run`` at several points, then resume.

Each kill point is an event the run printed (it prints what is in its log), read from
its stdout with a bounded wait; the resume must complete the fleet with every
acknowledged event unchanged and each routed message queued, delivered and consumed
exactly once (read from the log's ``fleet.message.*`` events and the members' injects).
The members are trio-cap's scripted agent answering by rules (a restarted agent answers
a re-run turn as the first one would have).
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.fleet.helpers import git
from tests.replay.helpers import CAP, WITH_CAP, assert_clean, cap, read_log

BOUND = 120.0

CRASH = """\
name = "crash"
task = "Build the greetings."
worktrees = "dirs"
budget_usd = 1.0
permissions = "allow"

[[session]]
id = "lead"
binding = "inproc"
script = "lead.toml"

[[session]]
id = "en"
binding = "inproc"
script = "en.toml"

[[session]]
id = "fr"
binding = "inproc"
script = "fr.toml"

[[session]]
id = "reviewer"
binding = "inproc"
script = "reviewer.toml"

[[route]]
fan_out = { from = "lead", to = ["en", "fr"] }
rounds = 1

[[route]]
join = { from = ["en", "fr"], to = "lead" }

[[route]]
pipeline = ["lead", "reviewer"]
"""
SCRIPTS = {
    "lead.toml": """\
[[rule]]
match = "^Build"
steps = [ { wait = 0.3 }, { usage = { cost_usd = 0.01 } }, { say = "Split: one each." } ]
[[rule]]
match = "Result from en"
steps = [ { wait = 0.3 }, { usage = { cost_usd = 0.01 } }, { say = "Merged both." } ]
""",
    "en.toml": """\
[[rule]]
match = "^Result from lead"
steps = [ { wait = 0.3 }, { write = "en.txt", content = "hello\\n" },
          { usage = { cost_usd = 0.01 } }, { say = "en done\\n@cap://fr en wrote hello" } ]
""",
    "fr.toml": """\
[[rule]]
match = "^Result from lead"
steps = [ { wait = 0.3 }, { write = "fr.txt", content = "bonjour\\n" },
          { usage = { cost_usd = 0.01 } }, { say = "fr done" } ]
[[rule]]
match = "^Message from en"
steps = [ { wait = 0.3 }, { usage = { cost_usd = 0.01 } }, { say = "fr noted" } ]
""",
    "reviewer.toml": """\
[[rule]]
match = "^Result from lead"
steps = [ { wait = 0.3 }, { usage = { cost_usd = 0.01 } }, { say = "reviewed" } ]
""",
}


def write_fleet(where: Path, fleet: str = CRASH, scripts: dict[str, str] = SCRIPTS) -> None:
    where.mkdir(parents=True, exist_ok=True)
    (where / "fleet.toml").write_text(fleet)
    for name, text in scripts.items():
        (where / name).write_text(text)


def start(cwd: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([*CAP, "fleet", *args], cwd=cwd, env=WITH_CAP,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for(proc: subprocess.Popen, kind: str, nth: int = 1) -> str:
    """Until the process printed its ``nth`` event of ``kind`` (each line is an event its
    log holds); bounded."""
    deadline = time.monotonic() + BOUND
    seen = 0
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if not ready:
            continue
        line = proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            break
        words = line.split()
        if len(words) > 3 and words[3] == kind:
            seen += 1
            if seen == nth:
                return line
    raise AssertionError(f"never printed {kind} #{nth} (exit {proc.poll()})")


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()  # type: ignore[union-attr]
    proc.stderr.close()  # type: ignore[union-attr]


def killed_at(cwd: Path, kind: str, nth: int = 1) -> list:
    """A ``cap fleet run`` killed -9 right after it printed the ``nth`` ``kind``; its log."""
    proc = start(cwd, "run", "fleet.toml", "--log", "run.caplog", "--headless")
    try:
        wait_for(proc, kind, nth)
    finally:
        kill(proc)
    return read_log(cwd / "run.caplog")


ENDED = ("fleet.completed", "fleet.failed")


def killed_in_time(tmp_path: Path, setup, kind: str, nth: int = 1,
                   too_late=lambda log: any(e.kind in ENDED for e in log)) -> tuple[Path, list]:
    """:func:`killed_at` in a fresh directory made by ``setup(where)``, again (at most 4
    tries) while ``too_late(log)``: the SIGKILL lands a moment after the event was read,
    and under load the run may have got past the point under test by then."""
    for attempt in range(4):
        where = tmp_path / f"try{attempt}"
        setup(where)
        before = killed_at(where, kind, nth)
        if not too_late(before):
            return where, before
    raise AssertionError(f"4 kills after {kind} #{nth} all landed too late")


def assert_exactly_once(after: list, fleet: str) -> None:
    """Every routed message queued, delivered and consumed once — a rate-limited one once
    more per ``fleet.paused`` of it, by design — and injected as often as delivered."""
    kinds = ("fleet.message.queued", "fleet.message.delivered", "fleet.message.consumed")
    counts = {k: Counter(e.event.message_id for e in after if e.kind == k) for k in kinds}
    queued = counts["fleet.message.queued"]
    assert queued and all(n == 1 for n in queued.values()), queued
    again = Counter(e.event.message_id for e in after if e.kind == "fleet.paused")
    for k in kinds[1:]:
        assert counts[k] == queued + again, (k, counts[k], queued, again)
    injects = Counter(e.event.text for e in after if e.kind == "input.injected"
                      and e.event.source == f"fleet:{fleet}")
    text = {e.event.message_id: e.event.text for e in after if e.kind == "fleet.message.queued"}
    owed: Counter = Counter()
    for m, n in (queued + again).items():
        owed[text[m]] += n
    assert injects == owed
    for e in after:
        if e.kind == "fleet.message.delivered":
            inject = next(i for i in after if i.seq == e.event.input_seq)
            assert inject.kind == "input.injected" and inject.stream == f"{fleet}.{e.event.target}"
    ended = Counter((e.stream, e.cause) for e in after if e.kind == "session.turn_ended")
    assert all(n == 1 for n in ended.values()), ended  # no input's turn ended twice


KILL_POINTS = [
    ("fleet.member", 1),             # starting up: one session started, three not yet
    ("session.working", 1),          # the lead's first turn in flight
    ("fleet.message.delivered", 2),  # the fan-out half delivered
    ("session.turn_ended", 3),       # a worker done, the fleet not yet answering
    ("fleet.message.queued", 5),     # en's mediated @cap://fr message just queued
    ("fleet.message.consumed", 6),   # the join's result being handed on
    ("session.completed", 1),        # winding up: sessions closing
]


@pytest.mark.parametrize(("kind", "nth"), KILL_POINTS, ids=[f"{k}#{n}" for k, n in KILL_POINTS])
def test_kill_9_then_resume_completes_with_each_message_consumed_once(tmp_path, kind, nth):
    where, before = killed_in_time(tmp_path, write_fleet, kind, nth)
    made = sorted((where / ".cap-worktrees").glob("crash/*/*"))
    result = cap("fleet", "resume", "run.caplog", cwd=where)
    assert_clean(result, 0, "crash completed")
    after = read_log(where / "run.caplog")
    assert after[: len(before)] == before  # every acknowledged event, unchanged
    (resumed,) = [e for e in after if e.kind == "fleet.run_resumed"]
    assert resumed.seq == len(before) + 1 and resumed.event.after_seq == len(before)
    assert f"fleet crash resumed after seq {len(before)}: " in result.stdout
    assert [e.kind for e in after if e.stream == "fleet:crash"][-1] == "fleet.completed"
    assert_exactly_once(after, "crash")
    # the spend carried over: the fleet's total is every usage the log holds, once
    spent = sum(e.event.cost_usd_estimate for e in after if e.kind == "cap.usage")
    (done,) = [e.event for e in after if e.kind == "fleet.completed"]
    assert done.spent_usd == pytest.approx(spent) and spent >= 0.07
    # the same working directories, none new; the workers' files in them
    assert sorted((where / ".cap-worktrees").glob("crash/*/*")) == made
    assert (made[0].parent / "en" / "en.txt").read_text() == "hello\n"
    assert (made[0].parent / "fr" / "fr.txt").read_text() == "bonjour\n"
    assert_clean(cap("replay", "run.caplog", "--check", cwd=where), 0, "identically")
    assert_clean(cap("fleet", "resume", "run.caplog", cwd=where), 0,
                 "already ended (completed); nothing to resume")


TRIALS = int(os.environ.get("CAP_FLEET_RESUME_TRIALS", "6"))


def test_kill_9_at_random_points_then_resume(tmp_path):
    """Besides the chosen points: kills at random moments of the run (the sleep is the
    random kill point, not a synchronisation)."""
    rng = random.Random(int(os.environ.get("CAP_FLEET_RESUME_SEED", "14")))
    for trial in range(TRIALS):
        cwd = tmp_path / f"t{trial}"
        write_fleet(cwd)
        proc = start(cwd, "run", "fleet.toml", "--log", "run.caplog", "--headless")
        try:
            wait_for(proc, "fleet.started")
            time.sleep(rng.uniform(0.0, 1.4))
        finally:
            kill(proc)
        before = read_log(cwd / "run.caplog")
        result = cap("fleet", "resume", "run.caplog", cwd=cwd)
        if any(e.kind == "fleet.completed" for e in before):
            assert_clean(result, 0, "already ended (completed)")
            continue
        assert_clean(result, 0, "crash completed")
        after = read_log(cwd / "run.caplog")
        assert after[: len(before)] == before
        assert_exactly_once(after, "crash")
        assert_clean(cap("replay", "run.caplog", "--check", cwd=cwd), 0, "identically")


def test_a_resume_killed_too_is_resumed_again(tmp_path):
    """Resumes are re-entrant: the second reads the first's fleet.run_resumed and what it
    wrote, and still owes each message once."""
    write_fleet(tmp_path)
    killed_at(tmp_path, "fleet.message.delivered", 2)
    proc = start(tmp_path, "resume", "run.caplog")
    try:
        wait_for(proc, "fleet.message.consumed", 1)
    finally:
        kill(proc)
    before = read_log(tmp_path / "run.caplog")
    assert_clean(cap("fleet", "resume", "run.caplog", cwd=tmp_path), 0, "crash completed")
    after = read_log(tmp_path / "run.caplog")
    assert after[: len(before)] == before
    assert len([e for e in after if e.kind == "fleet.run_resumed"]) == 2
    assert_exactly_once(after, "crash")


BUDGET = """\
name = "spend"
task = "Go."
worktrees = "dirs"
budget_usd = 0.05
permissions = "allow"
[[session]]
id = "a"
binding = "inproc"
script = "turn.toml"
[[session]]
id = "b"
binding = "inproc"
script = "turn.toml"
[[session]]
id = "c"
binding = "inproc"
script = "turn.toml"
[[session]]
id = "d"
binding = "inproc"
script = "turn.toml"
[[route]]
pipeline = ["a", "b", "c", "d"]
"""
TURN = {"turn.toml": '[[rule]]\nmatch = "."\nsteps = [ { wait = 0.2 }, '
                     '{ usage = { cost_usd = 0.02 } }, { say = "did my part" } ]\n'}


def test_the_fleet_budget_carries_over_and_still_refuses(tmp_path):
    """$0.04 spent before the kill; after the resume c's turn crosses the $0.05 budget and
    d's turn is refused: the spend before the crash counted."""
    def spent_in(log: list) -> float:
        return sum(e.event.cost_usd_estimate for e in log if e.kind == "cap.usage")

    where, _ = killed_in_time(  # a and b done; c's turn must not have run yet
        tmp_path, lambda w: write_fleet(w, BUDGET, TURN), "fleet.message.consumed", 2,
        too_late=lambda log: spent_in(log) != pytest.approx(0.04))
    result = cap("fleet", "resume", "run.caplog", cwd=where)
    assert_clean(result, 1, "fleet budget $0.05 spent")
    after = read_log(where / "run.caplog")
    (refused,) = [e for e in after if e.kind == "fleet.budget_refused"]
    assert refused.event.member == "d" and refused.event.scope == "fleet"
    assert refused.event.spent_usd == pytest.approx(spent_in(after)) == pytest.approx(0.06)
    assert not any(e.stream == "spend.d" and e.kind == "session.working" for e in after)
    resumed = next(e.seq for e in after if e.kind == "fleet.run_resumed")
    assert refused.seq > resumed


LIMITED = """\
name = "limited"
task = "Go."
worktrees = "dirs"
permissions = "allow"
[rate_limit]
retries = 3
backoff_s = 1.0
[[session]]
id = "slow"
binding = "inproc"
script = "slow.toml"
"""
SLOW = {"slow.toml": '[[turn]]\nsteps = [ { fail = "rate_limit", message = "slow down", '
                     'retryable = true, retry_after = 1.5 } ]\n'
                     '[[turn]]\nsteps = [ { say = "done at last" } ]\n'}


def test_a_paused_member_is_woken_at_its_time_after_the_restart(tmp_path):
    where, before = killed_in_time(  # the 1.5 s pause not yet woken
        tmp_path, lambda w: write_fleet(w, LIMITED, SLOW), "fleet.paused",
        too_late=lambda log: any(e.kind in ("fleet.resumed", *ENDED) for e in log))
    (paused,) = [e.event for e in before if e.kind == "fleet.paused"]
    result = cap("fleet", "resume", "run.caplog", cwd=where)
    assert_clean(result, 0, "limited completed")
    after = read_log(where / "run.caplog")
    (resumed_run,) = [e for e in after if e.kind == "fleet.run_resumed"]
    assert resumed_run.event.paused == ("slow",)
    woken = [e for e in after if e.kind == "fleet.resumed"]
    assert woken and woken[0].seq > resumed_run.seq
    assert woken[0].at >= paused.until  # not before T, on the log's clock
    # the restarted agent's script begins again: one more rate limit, waited out in turn
    assert [e.event.attempt for e in after if e.kind == "fleet.paused"] == [1, 2]
    assert_exactly_once(after, "limited")


SLOW_FLEET = """\
name = "long"
task = "Go."
worktrees = "dirs"
permissions = "allow"
[[session]]
id = "w"
binding = "inproc"
script = "w.toml"
"""
WAITS = {"w.toml": '[[rule]]\nmatch = "."\nsteps = [ { wait = 60 }, { say = "late" } ]\n'}


def test_a_second_resume_while_the_first_runs_is_refused(tmp_path):
    write_fleet(tmp_path, SLOW_FLEET, WAITS)
    killed_at(tmp_path, "session.working")
    first = start(tmp_path, "resume", "run.caplog")
    try:
        wait_for(first, "fleet.run_resumed")
        second = cap("fleet", "resume", "run.caplog", cwd=tmp_path)
        assert_clean(second, 2, "is open for writing by another process")
    finally:
        kill(first)


def test_resume_failure_paths(tmp_path):
    assert_clean(cap("fleet", "resume", "missing.caplog", cwd=tmp_path), 2,
                 "missing.caplog: no such log file")
    assert_clean(cap("fleet", "resume", "postgresql://cap@127.0.0.1:1/db", cwd=tmp_path), 2,
                 "fleets run on a file log")
    assert_clean(cap("run", "--task", "hi", "--headless", "--log", "solo.caplog",
                     cwd=tmp_path), 0)
    assert_clean(cap("fleet", "resume", "solo.caplog", cwd=tmp_path), 2,
                 "solo.caplog has no fleet in it")
    write_fleet(tmp_path / "done", LIMITED.replace("slow.toml", "ok.toml"),
                {"ok.toml": '[[rule]]\nmatch = "."\nsteps = [ { say = "ok" } ]\n'})
    assert_clean(cap("fleet", "run", "fleet.toml", "--log", "run.caplog", "--headless",
                     cwd=tmp_path / "done"), 0)
    assert_clean(cap("fleet", "resume", "run.caplog", "--fleet", "other",
                     cwd=tmp_path / "done"), 2, "has no fleet other (it has limited)")
    assert_clean(cap("fleet", "resume", "run.caplog", cwd=tmp_path / "done"), 0,
                 "fleet limited in run.caplog already ended (completed); nothing to resume")


def test_a_working_directory_that_is_gone_is_an_error(tmp_path):
    write_fleet(tmp_path)
    killed_at(tmp_path, "fleet.message.delivered", 2)
    (en,) = (tmp_path / ".cap-worktrees").glob("crash/*/en")
    for f in en.iterdir():
        f.unlink()
    en.rmdir()
    result = cap("fleet", "resume", "run.caplog", cwd=tmp_path)
    assert_clean(result, 2, f"en's working directory {en} is gone")
    assert not any(e.kind == "fleet.run_resumed" for e in read_log(tmp_path / "run.caplog"))


def test_a_run_cut_before_it_logged_its_working_directories_is_refused(tmp_path):
    write_fleet(tmp_path)
    assert_clean(cap("fleet", "run", "fleet.toml", "--log", "full.caplog", "--headless",
                     cwd=tmp_path), 0)
    full = (tmp_path / "full.caplog").read_bytes()
    for cut in range(len(full) - 1, 0, -8):  # only fleet.started left
        (tmp_path / "run.caplog").write_bytes(full[:cut])
        if [e.kind for e in read_log(tmp_path / "run.caplog")] == ["fleet.started"]:
            break
    assert_clean(cap("fleet", "resume", "run.caplog", cwd=tmp_path), 2,
                 "the run died before it logged lead's working directory")


def test_a_session_created_whose_fleet_member_record_was_lost_is_picked_up(tmp_path):
    """The run died between a member's session.created and its fleet.member: the resume
    picks that session up (a second session.created on its stream would not replay) and
    writes the record."""
    write_fleet(tmp_path)
    assert_clean(cap("fleet", "run", "fleet.toml", "--log", "full.caplog", "--headless",
                     cwd=tmp_path), 0)
    full = (tmp_path / "full.caplog").read_bytes()
    for cut in range(len(full) - 1, 0, -8):
        (tmp_path / "run.caplog").write_bytes(full[:cut])
        kinds = [(e.stream, e.kind) for e in read_log(tmp_path / "run.caplog")]
        if ("crash.en", "session.created") in kinds and kinds[-1][0] == "crash.en" \
                and kinds.count(("fleet:crash", "fleet.member")) == 1:
            break
    else:
        pytest.fail("no cut between en's session.created and its fleet.member")
    assert_clean(cap("fleet", "resume", "run.caplog", cwd=tmp_path), 0, "crash completed")
    after = read_log(tmp_path / "run.caplog")
    assert [e.event.member for e in after if e.kind == "fleet.member"] == [
        "lead", "en", "fr", "reviewer"]
    assert len([e for e in after if e.kind == "session.created"]) == 4
    assert_exactly_once(after, "crash")
    assert_clean(cap("replay", "run.caplog", "--check", cwd=tmp_path), 0, "identically")


def test_a_changed_fleet_file_is_refused(tmp_path):
    write_fleet(tmp_path)
    killed_at(tmp_path, "fleet.message.delivered", 1)
    (tmp_path / "fleet.toml").write_text(CRASH.replace("budget_usd = 1.0", "budget_usd = 9.0"))
    assert_clean(cap("fleet", "resume", "run.caplog", cwd=tmp_path), 2,
                 "changed since the run started")



def test_an_ask_answered_before_the_crash_is_not_asked_again(tmp_path):
    """The auto-answerer answered the member's question, then the run died mid-turn: the
    re-run turn's same question is answered from the log (``policy:resume``), and the
    resumed log replays identically."""
    research = Path(__file__).resolve().parents[2] / "examples" / "fleets" / "research"
    fleet = (f'name = "asks"\nworktrees = "dirs"\n'
             f'task = """ask: {DATABASE} [sqlite|postgresql]\nwait 30\nsay: done"""\n'
             f'[auto_answer]\narchive = "{research}"\nthreshold = 2.5\n'
             '[[session]]\nid = "asker"\nbinding = "inproc"\n')
    write_fleet(tmp_path, fleet, {})
    before = killed_at(tmp_path, "ask.answered")
    (first,) = [e.event for e in before if e.kind == "ask.answered"]
    assert first.by == "policy:auto_answer" and first.value == "postgresql"
    proc = start(tmp_path, "resume", "run.caplog")
    try:
        wait_for(proc, "ask.answered")
    finally:
        kill(proc)
    after = read_log(tmp_path / "run.caplog")
    answers = [e.event for e in after if e.kind == "ask.answered"]
    assert [(a.by, a.value) for a in answers] == [("policy:auto_answer", "postgresql"),
                                                  ("policy:resume", "postgresql")]
    assert answers[1].meta == {"cap.answered_as": first.ask_id}
    assert_clean(cap("replay", "run.caplog", "--check", cwd=tmp_path), 0, "identically")


DATABASE = "Which database do the nodes share the log in?"


RACE = """\
name = "race"
task = "Find the answer."
worktrees = "dirs"
permissions = "allow"
[[session]]
id = "quick"
binding = "inproc"
script = "quick.toml"
[[session]]
id = "slow"
binding = "inproc"
script = "slow.toml"
[[session]]
id = "judge"
binding = "inproc"
script = "judge.toml"
[[route]]
race = { from = ["quick", "slow"], to = "judge" }
"""
RACERS = {
    "quick.toml": '[[rule]]\nmatch = "."\nsteps = [ { wait = 0.3 }, { say = "42." } ]\n',
    "slow.toml": '[[rule]]\nmatch = "."\nsteps = [ { say = "Thinking..." }, '
                 '{ wait = 3600 }, { say = "41." } ]\n',
    "judge.toml": '[[rule]]\nmatch = "."\nsteps = [ { say = "Accepted." } ]\n',
}


def test_a_race_losers_cut_turn_is_cancelled_again_when_its_rerun_starts(tmp_path):
    """The run died after the fleet cancelled the loser and before its turn ended (the log
    cut there): the loser's session re-runs that turn, and the resume cancels it once it
    starts — else the loser would think for an hour."""
    write_fleet(tmp_path, RACE, RACERS)
    assert_clean(cap("fleet", "run", "fleet.toml", "--log", "full.caplog", "--headless",
                     cwd=tmp_path), 0)
    full = (tmp_path / "full.caplog").read_bytes()
    for cut in range(len(full) - 1, 0, -8):  # the last cut with the cancel and no loser end
        (tmp_path / "run.caplog").write_bytes(full[:cut])
        kinds = [(e.stream, e.kind) for e in read_log(tmp_path / "run.caplog")]
        if ("fleet:race", "fleet.cancel") in kinds:
            cancel = kinds.index(("fleet:race", "fleet.cancel"))
            if ("race.slow", "session.turn_ended") not in kinds[cancel:]:
                break
    else:
        pytest.fail("no cut of the log has the cancel without the loser's turn end")
    result = cap("fleet", "resume", "run.caplog", cwd=tmp_path)
    assert_clean(result, 0, "race completed")
    after = read_log(tmp_path / "run.caplog")
    resumed = next(e.seq for e in after if e.kind == "fleet.run_resumed")
    cancels = [e for e in after if e.seq > resumed and e.stream == "race.slow"
               and e.kind == "cancel.requested"]
    assert len(cancels) == 1
    (ended,) = [e.event for e in after if e.seq > resumed and e.stream == "race.slow"
                and e.kind == "session.turn_ended"]
    assert ended.stop_reason == "cancelled"
    assert_exactly_once(after, "race")


def test_git_worktrees_are_reused_and_a_wind_up_cut_short_attaches_each_diff_once(tmp_path):
    def setup(repo: Path) -> None:
        write_fleet(repo, CRASH.replace('worktrees = "dirs"', 'worktrees = "git"'))
        (repo / ".gitignore").write_text(".cap/\n.cap-worktrees/\n*.toml\n")
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", ".gitignore")
        git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "init")

    repo, before = killed_in_time(tmp_path, setup, "cap.artifact")  # winding up: one diff
    branches = git(repo, "branch", "--list", "cap/*")
    result = cap("fleet", "resume", "run.caplog", cwd=repo)
    assert_clean(result, 0, "crash completed")
    after = read_log(repo / "run.caplog")
    assert after[: len(before)] == before
    diffs = Counter(e.event.name for e in after if e.kind == "cap.artifact")
    assert diffs == Counter({f"{m}.diff": 1 for m in ("lead", "en", "fr", "reviewer")})
    assert git(repo, "branch", "--list", "cap/*") == branches  # none made
    assert_exactly_once(after, "crash")


def test_a_torn_last_append_is_cut_and_the_fleet_resumed(tmp_path):
    """A power loss mid-append: the log's torn tail is cut (said in one line), then the
    resume goes on as after a kill."""
    write_fleet(tmp_path)
    assert_clean(cap("fleet", "run", "fleet.toml", "--log", "full.caplog", "--headless",
                     cwd=tmp_path), 0)
    full = (tmp_path / "full.caplog").read_bytes()
    log = tmp_path / "run.caplog"

    def events_in(size: int) -> int:
        log.write_bytes(full[:size])
        return len(read_log(log))

    end = len(full) * 2 // 3  # walk back to where a record ends, then tear the next one
    while events_in(end) == events_in(end - 1):
        end -= 1
    log.write_bytes(full[: end + 5])
    result = cap("fleet", "resume", "run.caplog", cwd=tmp_path)
    assert_clean(result, 0, "crash completed")
    assert "cut a torn tail of" in result.stderr
    assert_exactly_once(read_log(tmp_path / "run.caplog"), "crash")
