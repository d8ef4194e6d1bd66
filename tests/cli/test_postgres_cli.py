"""The shared PostgreSQL log from the command line, as real processes against a real server:
runs, show/replay/copy/migrate, two nodes at once followed live, kill -9 and takeover, and
every failure path (exit code, one line, no traceback)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pg_fixture import fresh_url
from trio_cap.events.log import FileEventLog
from trio_cap.events.log.postgres import PostgresEventLog
from trio_cap.events.log.postgres_schema import LATEST

CAP = [sys.executable, "-m", "trio_cap.actors.cli"]
BOUND = 60.0
ENV = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent),
                                              os.environ.get("PATH", "")])}
DOWN = "postgresql://postgres@127.0.0.1:1/postgres"


def cap(*args: str, cwd: Path | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*CAP, *args], cwd=cwd, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=BOUND, env=ENV, **kw)


def run_task(url: str, tmp: Path, *more: str) -> subprocess.CompletedProcess:
    return cap("run", "--agent", "cap-agent", "--binding", "inproc", "--permissions", "allow",
               "--cwd", str(tmp), "--task", "say: hello", "--log", url, *more)


def one_line_failure(result: subprocess.CompletedProcess, code: int, words: str) -> None:
    assert result.returncode == code, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert words in lines[0] and "Traceback" not in result.stderr


def shown(url: str) -> list[dict]:
    result = cap("log", "show", url, "--json")
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_migrate_creates_the_schema_once(pg_url):
    first = cap("log", "migrate", pg_url)
    assert first.returncode == 0 and f"schema version 0 -> {LATEST}" in first.stdout, \
        first.stderr
    again = cap("log", "migrate", pg_url)
    assert again.returncode == 0 and "up to date" in again.stdout


def test_a_run_on_postgres_shows_replays_and_copies_like_a_file(pg_server, pg_url, tmp_path):
    result = run_task(pg_url, tmp_path, "--node", "alpha")
    assert result.returncode == 0, result.stderr
    events = shown(pg_url)
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "node.heartbeat" and "session.completed" in kinds
    assert kinds[-1] == "node.stopped"
    owned = [e for e in events if e["kind"] == "session.owned"]
    created = [e for e in events if e["kind"] == "session.created"]
    assert owned[0]["node"] == "alpha" and owned[0]["seq"] < created[0]["seq"]

    copy = tmp_path / "copy.caplog"
    copied = cap("log", "copy", pg_url, str(copy))
    assert copied.returncode == 0 and f"copied {len(events)} events" in copied.stdout
    assert cap("replay", pg_url).stdout.splitlines()[1:] == \
        cap("replay", str(copy)).stdout.splitlines()[1:]
    # and back: file -> an empty PostgreSQL log, envelopes identical both ways
    back = fresh_url(pg_server)
    assert cap("log", "copy", str(copy), back).returncode == 0
    original = PostgresEventLog(pg_url, readonly=True).read()
    assert FileEventLog(copy, readonly=True).read() == original
    assert PostgresEventLog(back, readonly=True).read() == original
    refused = cap("log", "copy", str(copy), back)
    one_line_failure(refused, 2, "already holds")


def test_two_nodes_append_at_once_and_a_follower_sees_both_live_in_seq_order(pg_url,
                                                                            tmp_path):
    """East's turn is still running while west runs a whole session (the two overlap by
    construction, not by luck), and the follower prints both as they are appended."""
    cap("log", "migrate", pg_url)
    follower = subprocess.Popen([*CAP, "log", "show", pg_url, "--follow", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=ENV)
    try:
        east = start_turn(pg_url, tmp_path, '{ say = "from east" }, { wait = 120 }', "east",
                          "60")
        west = subprocess.run(
            [*CAP, "run", "--agent", "cap-agent", "--binding", "inproc", "--permissions",
             "allow", "--cwd", str(tmp_path), "--task", "from west", "--log", pg_url,
             "--node", "west"], capture_output=True, text=True, env=ENV, timeout=BOUND)
        assert west.returncode == 0, west.stderr
        lines: list[dict] = []
        deadline = time.monotonic() + BOUND
        while not any(e["kind"] == "session.completed" for e in lines):
            assert time.monotonic() < deadline, "the follower never showed west's end"
            lines.append(json.loads(follower.stdout.readline()))
        # live: the follower has shown west's whole session while east's turn still runs
        assert east.poll() is None
        east.send_signal(signal.SIGINT)  # end east's turn now
        _, err = east.communicate(timeout=BOUND)
        assert east.returncode == 128 + signal.SIGINT, err
        last = PostgresEventLog(pg_url, readonly=True).last_seq
        while not lines or lines[-1]["seq"] < last:  # bounded: reads as the follower prints
            assert time.monotonic() < deadline, "the follower never caught up"
            lines.append(json.loads(follower.stdout.readline()))
    finally:
        follower.send_signal(signal.SIGINT)
        follower.wait(timeout=BOUND)
    assert [e["seq"] for e in lines] == list(range(1, last + 1))
    owner = {e["stream"]: e["node"] for e in lines if e["kind"] == "session.owned"}
    assert sorted(owner.values()) == ["east", "west"]
    by_node = {node: [e["seq"] for e in lines if owner.get(e["stream"]) == node]
               for node in ("east", "west")}
    # interleaved in the one log: all of west's session lies inside east's
    assert by_node["east"][0] < by_node["west"][0] < by_node["west"][-1] < by_node["east"][-1]
    ends = {owner[e["stream"]]: e["kind"] for e in lines
            if e["kind"] in ("session.completed", "session.cancelled")}
    assert ends == {"west": "session.completed", "east": "session.cancelled"}


def start_turn(url: str, tmp: Path, steps: str, node: str, lease: str) -> subprocess.Popen:
    """A ``cap run`` as node ``node`` whose scripted turn (``steps``) is under way: a bounded
    poll on the log until ``session.working``; its stderr is piped for the test to read."""
    script = tmp / f"{node}.toml"
    script.write_text(f"[[turn]]\nsteps = [ {steps} ]\n")
    proc = subprocess.Popen(
        [*CAP, "run", "--agent", "cap-agent", "--binding", "inproc", "--permissions", "allow",
         "--cwd", str(tmp), "--task", "job", "--script", str(script), "--log", url,
         "--node", node, "--lease", lease], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, env=ENV)
    deadline = time.monotonic() + BOUND
    while True:
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise AssertionError(f"the run never started its turn: {proc.communicate()[1]}")
        try:
            kinds = [e.kind for e in PostgresEventLog(url, readonly=True).read()]
        except Exception:  # the schema does not exist until the run created it
            kinds = []
        if "session.working" in kinds:
            return proc
        time.sleep(0.1)


def take_over_until(url: str, lost: str) -> subprocess.CompletedProcess:
    """``cap node --take-over --once`` until it takes over ``lost`` (bounded: a short lease)."""
    deadline = time.monotonic() + BOUND
    while True:
        took = cap("node", "--log", url, "--take-over", "--once", "--node", "rescuer",
                   "--lease", "30")
        assert took.returncode == 0, took.stderr
        if f"took over node {lost}" in took.stdout:
            return took
        assert time.monotonic() < deadline, took.stdout + took.stderr
        time.sleep(0.2)


TASKS = ["write one.txt: 1", "wait 2\nwrite two.txt: 2", "write three.txt: 3"]


def start_run(url: str, tmp: Path, node: str) -> subprocess.Popen:
    """A three-turn ``cap run`` as node ``node`` (a 1 s lease), until its second turn is under
    way: a follower of the log (``cap log show --follow``) says so, each wait bounded."""
    assert cap("log", "migrate", url).returncode == 0
    follower = subprocess.Popen([*CAP, "log", "show", url, "--follow", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                env=ENV)
    proc = subprocess.Popen(
        [*CAP, "run", "--agent", "cap-agent", "--binding", "inproc", "--permissions", "allow",
         "--cwd", str(tmp), "--task", TASKS[0], "--next", TASKS[1], "--next", TASKS[2],
         "--log", url, "--node", node, "--lease", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    deadline = time.monotonic() + BOUND
    try:
        while True:
            ready, _, _ = select.select([follower.stdout], [], [],
                                        max(0.0, deadline - time.monotonic()))
            line = follower.stdout.readline() if ready else ""  # type: ignore[union-attr]
            if not line:
                proc.kill()
                raise AssertionError(f"the run never started turn 2: {proc.communicate()[1]}")
            event = json.loads(line)
            if event["kind"] == "session.working" and event.get("turn") == 2:
                return proc
    finally:
        follower.kill()
        follower.wait(timeout=BOUND)


def test_kill_9_of_a_node_mid_run_and_takeover_resumes_the_run(pg_url, tmp_path):
    victim = start_run(pg_url, tmp_path, "doomed")
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=BOUND)
    before = PostgresEventLog(pg_url, readonly=True).read()
    took = take_over_until(pg_url, "doomed")
    events = shown(pg_url)
    sid = next(e["session_id"] for e in events if e["kind"] == "session.created")
    assert f"session {sid}: resuming" in took.stdout
    assert f"session {sid}: restarted, then ended completed" in took.stdout
    assert "Traceback" not in took.stderr
    after = PostgresEventLog(pg_url, readonly=True).read()
    assert after[: len(before)] == before  # every event the dead node acknowledged, unchanged
    takeover = [e for e in events if e["kind"] == "node.takeover"]
    assert len(takeover) == 1 and takeover[0]["lost"] == "doomed"
    assert takeover[0]["sessions"] == [sid] and takeover[0]["resumed"] is True
    assert not takeover[0].get("not_resumed")
    assert not [e for e in events if e["kind"] == "session.failed"]
    resumed = [e for e in events if e["kind"] == "run.resumed"]
    assert len(resumed) == 1 and resumed[0]["how"] == "restarted"
    assert resumed[0]["rerun_turns"] == [2]  # the turn in flight at the kill, run again
    assert [e["text"] for e in events if e["kind"] == "input.injected"] == TASKS  # once each
    ended = sorted(e["turn"] for e in events if e["kind"] == "session.turn_ended")
    assert ended == [1, 2, 3]
    completed = [e for e in events if e["kind"] == "session.completed"]
    assert len(completed) == 1 and completed[0]["turns"] == 3
    owners = [(e["node"], e["seq"]) for e in events if e["kind"] == "session.owned"]
    assert [n for n, _ in owners] == ["doomed", "rescuer"] and owners[1][1] > takeover[0]["seq"]
    assert [p.name for p in sorted(tmp_path.glob("*.txt"))] == ["one.txt", "three.txt",
                                                                 "two.txt"]
    checked = cap("replay", pg_url, "--check")
    assert checked.returncode == 0 and "identically" in checked.stdout, checked.stderr
    # a second pass finds nothing more to take over
    again = cap("node", "--log", pg_url, "--take-over", "--once", "--node", "rescuer")
    assert again.returncode == 0 and "took over" not in again.stdout


@pytest.mark.parametrize("argv", [
    ["log", "show", DOWN],
    ["replay", DOWN],
    ["log", "migrate", DOWN],
    ["log", "copy", DOWN, "/tmp/never-written.caplog"],
    ["node", "--log", DOWN, "--once"],
    ["run", "--agent", "cap-agent", "--binding", "inproc", "--task", "x", "--log", DOWN],
])
def test_a_server_that_is_down_is_exit_1_in_one_line(argv, tmp_path):
    one_line_failure(cap(*argv, cwd=tmp_path), 1, "cannot connect")
    assert not Path("/tmp/never-written.caplog").exists()


def test_a_database_without_a_log_or_a_bad_url_is_a_usage_error(pg_url, tmp_path):
    one_line_failure(cap("log", "show", pg_url), 2, "holds no trio-cap log")
    one_line_failure(cap("replay", pg_url), 2, "cap log migrate")
    one_line_failure(cap("log", "show", "postgresql://[::1"), 2, "not a usable PostgreSQL URL")
    one_line_failure(cap("node", "--log", str(tmp_path / "x.caplog")), 2,
                     "needs a shared postgresql://")
    one_line_failure(cap("log", "migrate", str(tmp_path / "x.caplog")), 2,
                     "give a postgresql:// URL")


def test_a_run_rides_out_a_postgresql_restart_and_loses_nothing(pg_server, pg_url, tmp_path):
    run = start_turn(pg_url, tmp_path,
                     '{ say = "before" }, { wait = 4 }, { say = "after the restart" }',
                     "steady", "60")
    pg_server.stop("immediate")
    pg_server.start()
    _, err = run.communicate(timeout=BOUND)
    assert run.returncode == 0, err
    events = shown(pg_url)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    texts = "".join(e.get("text", "") for e in events if e["kind"] == "cap.text_chunk")
    assert "before" in texts and "after the restart" in texts
    kinds = [e["kind"] for e in events]
    assert "session.completed" in kinds and kinds[-1] == "node.stopped"
    # the first append after the crash met a dead connection, resolved it and said so
    assert "the connection was lost during an append" in err and "Traceback" not in err


def test_a_paused_node_that_was_taken_over_cannot_write_again(pg_url, tmp_path):
    victim = start_turn(pg_url, tmp_path,
                        '{ say = "working" }, { wait = 3 }, { say = "too late" }', "sleepy", "1")
    victim.send_signal(signal.SIGSTOP)
    (tmp_path / "sleepy.toml").unlink()  # the run cannot be picked up without its script
    try:
        took = take_over_until(pg_url, "sleepy")
    finally:
        victim.send_signal(signal.SIGCONT)
    _, err = victim.communicate(timeout=BOUND)
    assert victim.returncode == 1, err
    assert "taken over by rescuer" in err and "Traceback" not in err
    events = shown(pg_url)
    takeover = next(e for e in events if e["kind"] == "node.takeover")
    sid = takeover["sessions"][0]
    after = [e for e in events if e["seq"] > takeover["seq"]
             and e["stream"] in (sid, "node:sleepy")]
    # nothing the frozen node wrote follows its takeover: only the taker's session.failed
    assert [(e["kind"], e.get("code")) for e in after] == [("session.failed", "node_lost")]
    assert "sleepy.toml" in after[0]["message"] and takeover["not_resumed"] == [sid]
    assert f"session {sid}: marked failed: node lost: --script" in took.stdout
    assert took.returncode == 0
    texts = "".join(e.get("text", "") for e in events if e["kind"] == "cap.text_chunk")
    assert "too late" not in texts
