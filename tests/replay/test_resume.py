"""``cap run --resume``: kill -9 of ``cap run`` (or a power loss) at random points, then resume.

Each trial runs a multi-turn scripted run over inproc as a real process, kills
it at a random moment, resumes it, and checks the promises: the run
completes, every event the dead run acknowledged is still there unchanged,
and no turn runs twice unless ``run.resumed`` marks it as re-run.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from tests.replay.helpers import CAP, WITH_CAP, assert_clean, cap, read_log, until_printed
from trio_cap.actors.cli.render import line
from trio_cap.events.kinds import (
    FrameIn,
    InputInjected,
    RunResumed,
    RunStarted,
    SessionCompleted,
    SessionTurnEnded,
    SessionWorking,
)

TRIALS = int(os.environ.get("CAP_RESUME_TRIALS", "30"))
TASKS = ["write a.txt: one\nwait 0.2", "write b.txt: two\nwait 0.2", "run: ls\nwait 0.2",
         "some words\nwait 0.2"]
RUN = ["run", "--task", TASKS[0], *[a for t in TASKS[1:] for a in ("--next", t)],
       "--permissions", "allow", "--headless", "--log", "run.caplog"]


def start_run(cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([*CAP, *RUN], cwd=cwd, env=WITH_CAP, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_started(log: Path, proc: subprocess.Popen) -> None:
    """Until the run's ``run.started`` is in its log (a bounded poll: nothing to wait on)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and any(type(e.event) is RunStarted for e in read_log(log)):
            return
        time.sleep(0.02)
    raise AssertionError(f"the run never logged run.started (exit {proc.poll()})")


def assert_resumed_run(cwd: Path, before: list) -> None:
    """The promises of a resumed run, read from its log."""
    after = read_log(cwd / "run.caplog")
    assert after[: len(before)] == before  # every acknowledged event, unchanged
    events = [e.event for e in after]
    completed = [e for e in events if type(e) is SessionCompleted]
    assert len(completed) == 1 and completed[0].turns == len(TASKS)
    assert [e.text for e in events if type(e) is InputInjected] == TASKS  # each sent once
    ended = [e.turn for e in events if type(e) is SessionTurnEnded]
    assert sorted(set(ended)) == [1, 2, 3, 4] and len(ended) == 4  # no turn ended twice
    started = Counter(e.turn for e in events if type(e) is SessionWorking and not e.resumed)
    rerun = {t for e in events if type(e) is RunResumed for t in e.rerun_turns}
    assert all(n == 1 or turn in rerun for turn, n in started.items()), (started, rerun)
    assert all(type(e) is not RunResumed or e.how == "restarted" for e in events)


def cut_where(tmp_path: Path, wanted: Callable[[list[type]], bool]) -> tuple[Path, list]:
    """A whole run's log cut at the last byte offset (walking back from the end) whose
    remaining events' kinds are ``wanted``: a run killed just there."""
    assert_clean(cap(*RUN, cwd=tmp_path), 0)
    full = (tmp_path / "run.caplog").read_bytes()
    cwd = tmp_path / "cut"
    cwd.mkdir()
    for cut in range(len(full) - 1, len(full) // 2, -8):
        (cwd / "run.caplog").write_bytes(full[:cut])
        before = read_log(cwd / "run.caplog")
        if wanted([type(e.event) for e in before]):
            return cwd, before
    raise AssertionError("no cut of the log leaves what the test wants")


def test_kill_9_at_random_points_then_resume(tmp_path):
    rng = random.Random(int(os.environ.get("CAP_RESUME_SEED", "15")))
    outcomes = Counter()
    for trial in range(TRIALS):
        cwd = tmp_path / f"t{trial}"
        cwd.mkdir()
        proc = start_run(cwd)
        if trial % 6 == 0:  # now and then while it starts, before anything is logged …
            time.sleep(rng.uniform(0.0, 0.3))  # the random kill point, not a synchronisation
        else:  # … else at a random point of the run itself, however slow the box is today
            run_started(cwd / "run.caplog", proc)
            time.sleep(rng.uniform(0.0, 1.2))  # the random kill point, not a synchronisation
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        log = cwd / "run.caplog"
        before = read_log(log) if log.exists() else []
        if not any(type(e.event) is RunStarted for e in before):
            outcomes["killed before the run was logged"] += 1
            result = cap("run", "--resume", "run.caplog", cwd=cwd)
            assert result.returncode == 2, result.stderr
            assert "Traceback" not in result.stderr
            continue
        result = cap("run", "--resume", "run.caplog", cwd=cwd)
        assert result.returncode == 0, (result.stderr, [line(e) for e in before[-12:]])
        assert_clean(result, 0)
        assert_resumed_run(cwd, before)
        outcomes["finished" if "already ended" in result.stderr else "resumed"] += 1
        checked = cap("replay", "run.caplog", "--check", cwd=cwd)
        assert_clean(checked, 0, "identically")
    assert outcomes["resumed"] >= TRIALS // 3, outcomes


def test_power_loss_truncation_then_resume(tmp_path):
    """The log cut at a random byte (a torn last append) is cut back and the run resumed."""
    rng = random.Random(7)
    assert_clean(cap(*RUN, cwd=tmp_path), 0)
    log = tmp_path / "run.caplog"
    full = log.read_bytes()
    first_record_end = len(full) // 8
    for trial in range(5):
        cwd = tmp_path / f"p{trial}"
        cwd.mkdir()
        cut = rng.randrange(first_record_end, len(full) - 1)
        (cwd / "run.caplog").write_bytes(full[:cut])
        before = read_log(cwd / "run.caplog")
        if not any(type(e.event) is RunStarted for e in before):
            continue
        result = cap("run", "--resume", "run.caplog", cwd=cwd)
        assert_clean(result, 0)
        assert_resumed_run(cwd, before)


def test_a_run_killed_after_its_last_turn_but_before_it_closed_resumes_to_completed(tmp_path):
    """Nothing is left to run: the resumed session comes up and closes as completed (closing
    it while it was still starting once cancelled it and exited 1)."""
    cwd, before = cut_where(tmp_path, lambda kinds: SessionCompleted not in kinds
                            and kinds.count(SessionTurnEnded) == len(TASKS))
    result = cap("run", "--resume", "run.caplog", cwd=cwd)
    assert_clean(result, 0)
    assert_resumed_run(cwd, before)


def test_a_run_killed_between_a_turn_end_frame_and_its_reaction_writes_the_reaction(tmp_path):
    """The agent's turn-end frame is logged, the session's turn end is not (the kill came
    between the two appends): the resume writes the lost reaction after ``run.resumed``
    instead of forgetting that turn (seen once in the kill -9 trials), and the log checks."""
    cwd, before = cut_where(tmp_path, lambda kinds: kinds[-1] is FrameIn
                            and kinds.count(SessionTurnEnded) == len(TASKS) - 1
                            and kinds.count(SessionWorking) == len(TASKS))
    result = cap("run", "--resume", "run.caplog", cwd=cwd)
    assert_clean(result, 0)
    assert_resumed_run(cwd, before)
    events = [e.event for e in read_log(cwd / "run.caplog")]
    resumed = next(e for e in events if type(e) is RunResumed)
    assert resumed.turns_done == len(TASKS) and resumed.rerun_turns == ()
    assert type(events[events.index(resumed) + 1]) is SessionTurnEnded  # right after it
    assert_clean(cap("replay", "run.caplog", "--check", cwd=cwd), 0, "identically")


def test_a_second_resume_while_the_first_runs_is_refused(tmp_path):
    proc = subprocess.Popen([*CAP, "run", "--task", "wait 30", "--headless", "--json",
                             "--log", "run.caplog"], cwd=tmp_path, env=WITH_CAP,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        until_printed(proc, lambda ev: ev["kind"] == "session.working",
                      "session.working (its turn started)")
        second = cap("run", "--resume", "run.caplog", cwd=tmp_path)
        assert_clean(second, 2, "is open for writing by another process")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


def test_resume_failure_paths(tmp_path):
    assert_clean(cap("run", "--resume", "missing.caplog", cwd=tmp_path), 2,
                 "--resume missing.caplog: no such log file")
    assert_clean(cap("run", "--resume", "postgresql://cap@127.0.0.1:1/db", cwd=tmp_path), 2,
                 "cap node --log postgresql://cap@127.0.0.1:1/db --take-over")
    (tmp_path / "junk.caplog").write_bytes(b"not a log at all")
    assert_clean(cap("run", "--resume", "junk.caplog", cwd=tmp_path), 2, "junk.caplog")
    assert_clean(cap("run", "--task", "hi", "--headless", "--log", "done.caplog",
                     cwd=tmp_path), 0)
    assert_clean(cap("run", "--resume", "done.caplog", cwd=tmp_path), 0,
                 "the run already ended (completed); nothing to resume")
