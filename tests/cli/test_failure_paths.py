"""Every way ``cap run`` can fail, run as a real process: it ends within a bound, with the
documented exit code, a one-line reason and never a traceback; signals end it cleanly."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CAP = [sys.executable, "-m", "trio_cap.actors.cli"]
BOUND = 30.0  # seconds; each of these ends in well under one


ENV = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent),
                                              os.environ.get("PATH", "")])}
"""``cap`` itself on PATH: the stream-json binding of cap-agent runs ``cap agent``."""


def cap(*args: str, cwd: Path, **kw) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run([*CAP, *args], cwd=cwd, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=BOUND, env=ENV, **kw)
    return result, time.monotonic() - started


def events_of(path: Path) -> list[dict]:
    """The log's events as ``cap log show --json`` prints them."""
    shown = subprocess.run([*CAP, "log", "show", str(path), "--json"], capture_output=True,
                           text=True, timeout=BOUND)
    assert shown.returncode == 0, shown.stderr
    return [json.loads(line) for line in shown.stdout.splitlines()]


def assert_clean(result: subprocess.CompletedProcess, code: int, message: str) -> None:
    both = result.stdout + result.stderr
    assert result.returncode == code, both
    assert message in result.stderr, result.stderr
    assert "Traceback" not in both and "ExceptionGroup" not in both, both


@pytest.fixture
def files(tmp_path):
    (tmp_path / "binary.dat").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "nul.txt").write_bytes(b"hello\x00world\n")
    deep = "a = " + "[" * 100_000 + "]" * 100_000 + "\n"
    (tmp_path / "deep.toml").write_text(deep)
    (tmp_path / "deep-table.toml").write_text("a = " + "{b = " * 50_000 + "1" + "}" * 50_000)
    return tmp_path


BAD_FILES = [
    (("--task-file", "binary.dat"), "--task-file binary.dat: not UTF-8 text"),
    (("--task-file", "nul.txt"), "--task-file nul.txt: a binary file"),
    (("--task-file", "missing.txt"), "--task-file missing.txt: No such file"),
    (("--task-file", "."), "--task-file .: is a directory"),
    (("--task", "hi", "--agent", "./binary.dat"), "binary.dat: not UTF-8 text"),
    (("--task", "hi", "--agent", "./deep.toml"), "deep.toml: not a manifest: arrays or tables"),
    (("--task", "hi", "--agent", "./deep-table.toml"), "deep-table.toml: not a manifest"),
    (("--task", "hi", "--script", "binary.dat"), "--script binary.dat: not UTF-8 text"),
    (("--task", "hi", "--script", "deep.toml"), "--script deep.toml: not a script"),
    (("--task", "hi", "--permissions", "ask", "--headless"), "--headless means nobody is asked"),
    (("--task", "hi", "--permissions", "ask"), "needs a terminal on stdin"),
    (("--task", "hi", "--idle-timeout", "-1"), "--idle-timeout -1.0: give seconds"),
    (("--task", "hi", "--turn-timeout", "nan"), "--turn-timeout nan: give seconds"),
    (("--task", "hi", "--budget-usd", "-3"), "--budget-usd -3.0: give dollars"),
    (("--task", "hi", "--agent", "no-such-agent"), "no-such-agent"),
    (("--task", "hi", "--binding", "a2a"), "--binding a2a"),
]


@pytest.mark.parametrize(("args", "message"), BAD_FILES, ids=[" ".join(a) for a, _ in BAD_FILES])
def test_bad_input_exits_2_with_one_line_and_creates_no_log(files, args, message):
    result, took = cap("run", *args, "--log", "run.caplog", cwd=files)
    assert_clean(result, 2, message)
    assert took < BOUND
    assert not (files / "run.caplog").exists()  # usage errors leave nothing behind
    assert not (files / ".cap").exists()


NO_BINDING = [
    (("--agent", "codex"), ["acp:", "pty:"]),
    (("--agent", "aider"), ["pty:"]),
    (("--agent", "pty:/nonexistent/tui"), ["pty:"]),
    (("--agent", "acp:some-acp-agent"), ["acp:"]),
    (("--agent", "pty:no-such-tui-here"), ["pty:"]),
    (("--agent", "a2a:http://127.0.0.1:9/"), ["a2a:"]),
    (("--agent", "stream-json:/nonexistent/program"), ["stream-json: program", "PATH"]),
    (("--agent", "stream-json:no-such-program-here"), ["install it"]),
]


@pytest.mark.parametrize("repeat", range(2))
@pytest.mark.parametrize(("args", "lines"), NO_BINDING, ids=[" ".join(a) for a, _ in NO_BINDING])
def test_no_binding_can_start_ends_at_once_with_one_line_per_binding(tmp_path, args, lines,
                                                                     repeat):
    result, took = cap("run", *args, "--task", "hi", "--log", "r.caplog", cwd=tmp_path)
    assert_clean(result, 1, "no binding worked")
    assert took < BOUND
    why = [ln for ln in result.stderr.splitlines() if ln.startswith("cap:   ")]
    for expected in lines:
        assert any(expected in ln for ln in why), result.stderr
    assert "FAILED cap_binding_unavailable" in result.stdout  # the progress line came first
    assert events_of(tmp_path / "r.caplog")[-1]["kind"] == "session.failed"


def test_a_task_too_large_to_log_exits_2_and_the_session_says_why(tmp_path):
    (tmp_path / "huge.txt").write_text("x" * 70_000_000)
    result, _ = cap("run", "--task-file", "huge.txt", "--log", "h.caplog", cwd=tmp_path)
    assert_clean(result, 2, "--task-file huge.txt: the task cannot be logged")
    last = events_of(tmp_path / "h.caplog")[-1]
    assert last["kind"] == "session.cancelled" and "too large" in last["reason"]


def test_an_unwritable_log_exits_1_in_one_line(tmp_path):
    result, _ = cap("run", "--task", "hi", "--log", "/dev/full", cwd=tmp_path)
    assert_clean(result, 1, "--log /dev/full")


def test_a_full_disk_mid_run_exits_1_in_one_line(tmp_path):
    import resource

    def small_files():  # writes past 8 KiB fail with EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))

    task = "some words\n" * 2000
    result, _ = cap("run", "--task", task, "--log", "full.caplog", cwd=tmp_path,
                    preexec_fn=small_files)
    assert_clean(result, 1, "cannot write the log")
    assert len([ln for ln in result.stderr.splitlines() if "cannot write" in ln]) == 1


def test_an_internal_error_is_one_line_with_exit_70(tmp_path):
    # a log path whose parent is a file: not a usage error trio-cap anticipates by name
    env = {**os.environ, "CAP_TEST_INTERNAL_ERROR": "1"}
    code = ("import sys; from trio_cap.actors.cli import main as m; "
            "m.COMMAND_MODULES += ('json.decoder',); sys.exit(m.main(sys.argv[1:]))")
    result = subprocess.run([sys.executable, "-c", code, "--version"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=BOUND)
    assert_clean(result, 70, "cap: internal error: AttributeError")
    assert "CAP_DEBUG=1" in result.stderr
    debug = subprocess.run([sys.executable, "-c", code, "--version"], cwd=tmp_path,
                           env={**env, "CAP_DEBUG": "1"}, capture_output=True, text=True,
                           timeout=BOUND)
    assert debug.returncode == 70 and "Traceback" in debug.stderr


def test_a_refused_task_exits_1_and_a_budget_crossed_as_the_turn_ends_is_said_plainly(tmp_path):
    refused, _ = cap("run", "--task", "some words", "--budget-usd", "0", "--log", "b.caplog",
                     cwd=tmp_path)
    assert_clean(refused, 1, "the task was refused: turn refused")
    (tmp_path / "price.toml").write_text("[pricing]\ninput_per_mtok = 1000000.0\n"
                                         "output_per_mtok = 1000000.0\n")
    crossed, _ = cap("run", "--task", "some words", "--script", "price.toml", "--budget-usd", "1",
                     "--log", "c.caplog", cwd=tmp_path)
    assert_clean(crossed, 0, "budget exceeded: spent $30.0000 of a $1.0000 budget")
    assert "had already finished" in crossed.stderr
    assert "cancelling the turn" not in crossed.stdout + crossed.stderr
    (error,) = [e for e in events_of(tmp_path / "c.caplog") if e["kind"] == "cap.error"]
    assert "no further turn will start" in error["message"]


@pytest.mark.parametrize(("flag", "code"), [("--idle-timeout", "idle_timeout"),
                                            ("--turn-timeout", "turn_timeout")])
@pytest.mark.parametrize("binding", ["inproc", "stream-json"])
def test_a_hung_turn_is_cut_by_the_timeout_and_exits_1(tmp_path, flag, code, binding):
    result, took = cap("run", "--agent", "cap-agent", "--binding", binding, flag, "1",
                       "--task", "think: going quiet\nwait 300", "--log", "t.caplog",
                       cwd=tmp_path)
    assert_clean(result, 1, f"the session failed: {code}")
    assert took < BOUND
    kinds = [e["kind"] for e in events_of(tmp_path / "t.caplog")]
    assert kinds.index("cap.error") < kinds.index("cap.cancel") < kinds.index("session.failed")


def test_the_plan_is_shown_as_it_ended(tmp_path):
    result, _ = cap("run", "--task", "plan: first; second", "--log", "p.caplog", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "plan at the end: first (completed); second (completed)" in result.stderr
    failed, _ = cap("run", "--task", "plan: first; second\nfail: model_unavailable",
                    "--log", "f.caplog", cwd=tmp_path)
    assert failed.returncode == 1, failed.stderr
    assert "plan at the end: first (pending); second (pending)" in failed.stderr


def test_explicit_deny_is_explained_as_chosen_and_headless_asks_get_no_answer(tmp_path):
    result, _ = cap("run", "--permissions", "deny", "--headless", "--log", "d.caplog",
                    "--task", "write x.txt: no\nask: which? [a|b]", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "(as chosen)" in result.stdout and "default without a terminal" not in result.stdout
    assert "no answer (nobody can be asked: headless)" in result.stdout
    assert "None" not in result.stdout
    shown = subprocess.run([*CAP, "log", "show", "d.caplog"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=BOUND)
    assert "permission_mode confirm" in shown.stdout
    defaulted, _ = cap("run", "--log", "e.caplog", "--task", "write y.txt: no", cwd=tmp_path)
    assert "(the default when nobody can be asked: no terminal, or --headless)" in (
        defaulted.stdout)


def test_help_explains_every_policy_headless_bypass_and_exit_codes(tmp_path):
    result, _ = cap("run", "--help", cwd=tmp_path)
    text = " ".join(result.stdout.split())
    for needle in ("--headless", "NO permission requests", "high-risk protection does not apply",
                   "--turn-timeout", "--idle-timeout", "143", "129", "130", "70"):
        assert needle in text, needle


def test_bypass_warns_at_run_time_that_nothing_is_reviewed(tmp_path):
    result, _ = cap("run", "--permissions", "bypass", "--task", "hi", "--log", "y.caplog",
                    cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    warning = " ".join(result.stderr.split())
    assert "no permission requests" in warning and "high-risk protection does not apply" in (
        warning)


# ---- signals ------------------------------------------------------------------------------


def _group_alive(pgid: int) -> list[int]:
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(entry))
    return alive


def _children(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                kids.append(int(entry))
    return kids


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129),
                                              (signal.SIGINT, 130)])
def test_a_signal_cancels_the_session_kills_the_agent_and_closes_the_log(tmp_path, signum, code):
    proc = subprocess.Popen(
        [*CAP, "run", "--agent", "cap-agent", "--binding", "stream-json", "--log", "s.caplog",
         "--task", "think: waiting now\nwait 600"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL, env=ENV,
    )
    try:
        for line in iter(proc.stdout.readline, ""):  # the agent is mid-turn once it thought
            if "waiting now" in line:
                break
        groups = {os.getpgid(kid) for kid in _children(proc.pid)}
        assert groups and os.getpgid(proc.pid) not in groups, "the agent runs in its own group"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=BOUND)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert "Traceback" not in err and "ExceptionGroup" not in err
    assert "the session was cancelled" in err
    events = events_of(tmp_path / "s.caplog")
    assert events[-1]["kind"] == "session.cancelled"
    assert signal.Signals(signum).name in events[-1]["reason"]
    assert any(e["kind"] == "cap.cancel" for e in events)
    for group in groups:
        assert _group_alive(group) == [], f"processes of the agent's group {group} survived"


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_cap_agent_ends_on_sigterm_and_sighup(tmp_path, signum, code):
    proc = subprocess.Popen([*CAP, "agent", "--cap-speak", "stream-json"], cwd=tmp_path,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        frame = ('{"type":"user","message":{"role":"user","content":"think: hi\\nwait 600"}}\n')
        proc.stdin.write(frame.encode())
        proc.stdin.flush()
        assert proc.stdout.readline()  # it is serving the turn
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=BOUND)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert b"Traceback" not in err


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_while_the_agent_is_still_starting_ends_at_once(tmp_path, signum, code):
    """An agent that never answers initialize: the signal must not wait for the 60 s handshake
    limit, nor for the 5 s shutdown grace."""
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    agent = tmp_path / "silent.py"
    agent.write_text(f"import sys\nopen({str(fifo)!r}, 'w').write('up')\nsys.stdin.read()\n")
    proc = subprocess.Popen(
        [*CAP, "run", "--agent", f"stream-json:{sys.executable} {agent}", "--task", "hi",
         "--log", "s.caplog"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL, env=ENV,
    )
    try:
        with open(fifo) as started:  # blocks until the agent process runs
            assert started.read() == "up"
        groups = {os.getpgid(kid) for kid in _children(proc.pid)}
        signalled = time.monotonic()
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=BOUND)
        took = time.monotonic() - signalled
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert took < 4, took  # less than the shutdown grace: the connect was abandoned at once
    assert "Traceback" not in err
    events = events_of(tmp_path / "s.caplog")
    assert events[-1]["kind"] == "session.cancelled"
    assert events[-1]["reason"] == f"cap run received {signal.Signals(signum).name}"
    for group in groups:
        assert _group_alive(group) == []
