"""The ``cap`` program, run as a real process the way a user runs it."""

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import trio

CAP = [sys.executable, "-m", "trio_cap.actors.cli"]
ROOT = Path(__file__).resolve().parents[2]


def cap(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([*CAP, *args], cwd=cwd, capture_output=True, text=True, env=env,
                          input=stdin or "", timeout=60)


def log_path_of(result: subprocess.CompletedProcess) -> str:
    match = re.search(r"cap: logging to (\S+)", result.stderr)
    assert match, result.stderr
    return match.group(1)


def test_version(tmp_path):
    result = cap("--version", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.startswith("trio-cap ")


def test_run_completes_writes_the_file_and_logs_under_dot_cap(tmp_path):
    result = cap("run", "--agent", "cap-agent", "--binding", "inproc", "--permissions", "allow",
                 "--task", "write out.txt: made by cap\nrun: cat out.txt", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.txt").read_text() == "made by cap\n"
    assert "`cat out.txt` exited 0:\nmade by cap" in result.stdout
    assert "· completed after 1 turn(s)" in result.stdout
    path = log_path_of(result)
    assert re.fullmatch(r"\.cap/runs/\d{8}-\d{6}-\w{4}\.caplog", path)
    assert f"log written to {path}" in result.stderr


def test_without_a_terminal_tools_are_denied_and_the_message_names_the_flag(tmp_path):
    result = cap("run", "--task", "write x.txt: no", cwd=tmp_path)
    assert result.returncode == 0  # the turn itself succeeded; the tool was refused
    assert not (tmp_path / "x.txt").exists()
    assert "--permissions" in result.stdout


def test_a_failed_session_exits_1_and_bad_usage_exits_2(tmp_path):
    failed = cap("run", "--task", "fail: rate_limit", "--log", "f.caplog", cwd=tmp_path)
    assert failed.returncode == 1
    assert "FAILED rate_limit" in failed.stdout
    bad_cwd = cap("run", "--task", "hi", "--cwd", "nope", cwd=tmp_path)
    assert bad_cwd.returncode == 2 and "not a directory" in bad_cwd.stderr
    (tmp_path / "bad.toml").write_text("[[turn]]\nsteps = [{ sing = 'x' }]\n")
    bad_script = cap("run", "--task", "hi", "--script", "bad.toml", cwd=tmp_path)
    assert bad_script.returncode == 2
    assert "bad.toml: turn[0].steps[0]: no step verb" in bad_script.stderr
    no_task = cap("run", cwd=tmp_path)
    assert no_task.returncode == 2 and "--task" in no_task.stderr


def test_log_show_replay_and_their_filters(tmp_path):
    run = cap("run", "--permissions", "allow", "--log", "r.caplog",
              "--task", "plan: a; b\nwrite f.txt: x", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    shown = cap("log", "show", "r.caplog", cwd=tmp_path)
    assert shown.returncode == 0
    lines = shown.stdout.splitlines()
    # the run's plan (for --resume) comes first, then the session
    assert "run.started" in lines[0] and "session.created" in lines[1]
    assert "session.completed" in lines[-1]
    as_json = [json.loads(x) for x in cap("log", "show", "r.caplog", "--json",
                                          cwd=tmp_path).stdout.splitlines()]
    assert [e["seq"] for e in as_json] == list(range(1, len(lines) + 1))
    assert as_json[1]["kind"] == "session.created" and as_json[1]["binding"] == "inproc"
    until = cap("log", "show", "r.caplog", "--until", "3", "--json", cwd=tmp_path)
    assert len(until.stdout.splitlines()) == 3
    sid = as_json[1]["session_id"]
    other = cap("log", "show", "r.caplog", "--session", "sess-nope", cwd=tmp_path)
    assert other.stdout == ""
    replayed = cap("replay", "r.caplog", cwd=tmp_path)
    assert f"session {sid}: completed" in replayed.stdout
    assert "plan: a (completed); b (completed)" in replayed.stdout  # the turn did its work
    partial = cap("replay", "r.caplog", "--until", "3", "--json", cwd=tmp_path)
    state = json.loads(partial.stdout)
    assert state["sessions"]["sessions"][sid]["status"] == "starting"
    assert state["last_seq"] == 3


def test_unreadable_logs_are_usage_errors(tmp_path):
    (tmp_path / "junk.caplog").write_text("definitely not a log")
    junk = cap("log", "show", "junk.caplog", cwd=tmp_path)
    assert junk.returncode == 2 and "not a trio-cap event log" in junk.stderr
    missing = cap("replay", "missing.caplog", cwd=tmp_path)
    assert missing.returncode == 2 and "no such log file" in missing.stderr


async def test_ctrl_c_exits_130_after_closing_the_log_cleanly(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await trio.lowlevel.open_process(
        [*CAP, "run", "--task", "wait 600", "--log", "k.caplog"],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # a shell's background job ignores SIGINT, and children inherit that; a user's
        # foreground `cap run` does not
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    seen = b""
    with trio.fail_after(30):
        while b"turn 1 started" not in seen:
            chunk = await proc.stdout.receive_some()
            assert chunk, "cap run ended before its turn started"
            seen += chunk
        proc.send_signal(signal.SIGINT)
        code = await proc.wait()
        errors = await proc.stderr.receive_some()
    assert code == 130, errors.decode()
    from trio_cap.events.log import FileEventLog

    log = FileEventLog(tmp_path / "k.caplog", readonly=True)
    assert log.recovered is None
    assert log.read()[-1].kind == "session.cancelled"


def test_an_unknown_agent_is_a_usage_error_naming_what_was_tried(tmp_path):
    result = cap("run", "--agent", "no-such-agent", "--task", "hi", cwd=tmp_path)
    assert result.returncode == 2
    assert "no-such-agent" in result.stderr and "bundled" in result.stderr
