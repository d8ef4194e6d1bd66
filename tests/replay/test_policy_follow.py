"""``cap policy check`` on a recorded log, and ``cap log show --follow`` of a live run."""

from __future__ import annotations

import subprocess

import pytest

from tests.replay.helpers import CAP, WITH_CAP, assert_clean, cap, read_log, until_printed
from trio_cap.events.kinds import PermissionDecided, PermissionRequest

TASK = "write a.txt: one\nrun: rm -rf /tmp/cap-policy-nothing\nrun: ls\nask: go on? [yes|no]"


@pytest.fixture(scope="module")
def run_log(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("policy")
    assert_clean(cap("run", "--task", TASK, "--permissions", "allow", "--headless", "--log",
                     "run.caplog", cwd=cwd), 0)
    return cwd / "run.caplog"


def _seq_of(log, tool_word: str) -> int:
    return next(e.seq for e in read_log(log) if type(e.event) is PermissionRequest
                and tool_word in str(e.event.intent))


def test_the_same_policy_decides_the_same(run_log):
    result = cap("policy", "check", str(run_log), cwd=run_log.parent)
    assert_clean(result, 0, "3 permission request(s), 1 ask(s): 4 decided the same, "
                            "0 differently (0 wider, 0 narrower)")


def test_a_tighter_policy_lists_each_narrower_decision(run_log):
    result = cap("policy", "check", str(run_log), "--permissions", "deny",
                 "--fail-on-widen", cwd=run_log.parent)
    assert_clean(result, 0, "2 differently (0 wider, 2 narrower)")
    seq = _seq_of(run_log, "a.txt")
    assert f"seq {seq} [" in result.stdout and "permission Write, medium risk" in result.stdout
    assert "was allow (policy:allow) → would be deny (policy:deny)" in result.stdout


def test_widening_is_found_and_fails_when_asked(run_log):
    result = cap("policy", "check", str(run_log), "--allow-high-risk", "--fail-on-widen",
                 cwd=run_log.parent)
    assert_clean(result, 1, "1 differently (1 wider, 0 narrower)")
    seq = _seq_of(run_log, "rm -rf")
    assert f"seq {seq} [" in result.stdout and "Bash, high risk" in result.stdout
    assert "rm -rf /tmp/cap-policy-nothing" in result.stdout and "WIDER" in result.stdout
    decided = [e.event for e in read_log(run_log) if type(e.event) is PermissionDecided]
    assert [d.decision for d in decided].count("deny") == 1  # what the log says was refused


def test_rules_refine_the_policy_and_never_approve_high_risk_alone(run_log, tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\ntool = "Bash"\ndecision = "allow"\n'
                     '[[rule]]\ntool = "Write"\ninput = "*.txt"\ndecision = "deny"\n')
    result = cap("policy", "check", str(run_log), "--rules", str(rules), "--fail-on-widen",
                 cwd=run_log.parent)
    assert_clean(result, 0, "1 differently (0 wider, 1 narrower)")  # rm stays refused
    assert "would be deny (rule tool=Write input=*.txt)" in result.stdout


def test_policy_check_failure_paths(run_log, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rule]]\ndecision = "maybe"\n')
    assert_clean(cap("policy", "check", str(run_log), "--rules", str(bad), cwd=tmp_path), 2,
                 "rule 1: decision must be allow, deny or ask")
    assert_clean(cap("policy", "check", "none.caplog", cwd=tmp_path), 2, "no such log file")


def test_follow_tails_a_log_another_process_writes_until_it_ends(tmp_path):
    run = subprocess.Popen([*CAP, "run", "--task", "hello\nwait 1", "--next", "again",
                            "--headless", "--json", "--log", "run.caplog"], cwd=tmp_path,
                           env=WITH_CAP, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
    try:
        until_printed(run, lambda ev: True, "any event (the run never began its log)")
        follower = subprocess.Popen([*CAP, "log", "show", "run.caplog", "--follow"],
                                    cwd=tmp_path, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, env=WITH_CAP)
        try:
            run.communicate(timeout=60)  # drained as it prints: a full pipe would stall it
            assert run.returncode == 0
            out, err = follower.communicate(timeout=120)
        finally:
            follower.kill()
            follower.wait()
    finally:
        run.kill()
        run.wait()
    follow = subprocess.CompletedProcess(follower.args, follower.returncode, out, err)
    assert_clean(follow, 0)
    shown = [line.split()[0] for line in follow.stdout.splitlines()]
    envs = read_log(tmp_path / "run.caplog")
    assert shown == [str(e.seq) for e in envs]  # every event, in order, the last included
    assert "session.completed" in follow.stdout.splitlines()[-1]
