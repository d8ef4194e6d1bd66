"""Recorded ACP and PTY agents played back as live ones: the driver gets the events the
original gave, with the original agent gone from PATH."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import msgspec

from tests.replay.helpers import WITH_CAP, assert_clean, cap, read_log
from trio_cap.events.kinds import FrameIn, SessionCreated

DRIVER_IDS = ("message_id", "ask_id", "call_id", "session_id", "agent_session_id")
"""Ids the *driver* draws on a PTY (random per run): not the agent's to give back."""


def _agent_side(envs: list, *, driver_ids: bool = False) -> list[Any]:
    """What the agent gave the driver: the session's agent events, in order."""
    out = []
    for env in envs:
        ev = env.event
        if env.stream and (ev.direction == "in" or env.kind == "agent.raw"):
            value = msgspec.to_builtins(ev)
            if driver_ids:
                value = {k: v for k, v in value.items() if k not in DRIVER_IDS}
            out.append(value)
    return out


def _session(envs: list) -> str:
    return next(e.stream for e in envs if type(e.event) is SessionCreated)


def _no_agents(tmp_path: Path) -> dict[str, str]:
    empty = tmp_path / "empty-path"
    empty.mkdir(exist_ok=True)
    return {**WITH_CAP, "PATH": str(empty)}


def test_a_played_back_acp_agent_gives_the_driver_the_same_events(tmp_path):
    task = ["--task", "write z.txt: hi\nsome words", "--next", "run: ls",
            "--permissions", "allow", "--headless"]
    assert_clean(cap("run", "--binding", "acp", *task, "--log", "o.caplog", cwd=tmp_path), 0)
    original = read_log(tmp_path / "o.caplog")
    (tmp_path / "z.txt").unlink()  # the played-back agent writes it again, through the driver
    again = cap("run", "--agent", f"replay:o.caplog#{_session(original)}", *task,
                "--log", "n.caplog", cwd=tmp_path, env=_no_agents(tmp_path))
    assert_clean(again, 0, "completed after 2 turn(s)")
    replayed = read_log(tmp_path / "n.caplog")
    assert _agent_side(replayed) == _agent_side(original)
    assert len(_agent_side(original)) > 10
    assert (tmp_path / "z.txt").read_text() == "hi\n"  # the driver served the recorded write


def test_a_played_back_python_repl_with_its_timing_gives_the_same_events(tmp_path):
    task = ["--task", "print(6*7)", "--next", "import time; time.sleep(0.3); print('done')",
            "--headless"]
    assert_clean(cap("run", "--agent", "pty:python3 -i", *task, "--log", "o.caplog",
                     cwd=tmp_path), 0)
    original = read_log(tmp_path / "o.caplog")
    again = cap("run", "--agent", f"replay:o.caplog#{_session(original)}", *task,
                "--log", "n.caplog", cwd=tmp_path, env=_no_agents(tmp_path))
    assert_clean(again, 0, "done")
    replayed = read_log(tmp_path / "n.caplog")
    side = _agent_side(original, driver_ids=True)
    assert _agent_side(replayed, driver_ids=True) == side
    assert [e["text"] for e in side if e["kind"] == "cap.text_chunk"] == ["42\n", "done\n"]


def test_serve_pty_fast_under_the_pty_driver_gives_the_same_events(tmp_path):
    """``cap replay --serve pty --fast`` started by the PTY driver itself (ad hoc ``pty:``):
    no recorded gaps, the same events."""
    task = ["--task", "print('a' * 3)", "--next", "print(2 ** 10)", "--headless"]
    assert_clean(cap("run", "--agent", "pty:python3 -i", *task, "--log", "o.caplog",
                     cwd=tmp_path), 0)
    original = read_log(tmp_path / "o.caplog")
    serve = shlex.join([sys.executable, "-m", "trio_cap.actors.cli", "replay",
                        str(tmp_path / "o.caplog"), "--agent", _session(original),
                        "--serve", "pty", "--fast"])
    again = cap("run", "--agent", f"pty:{serve}", *task, "--log", "n.caplog", cwd=tmp_path,
                env=_no_agents(tmp_path))
    assert_clean(again, 0, "1024")
    replayed = read_log(tmp_path / "n.caplog")
    assert _agent_side(replayed, driver_ids=True) == _agent_side(original, driver_ids=True)
    assert sum(type(e.event) is FrameIn for e in replayed) > 5  # the new run recorded too


def test_serve_pty_leaves_the_terminal_as_it_found_it(tmp_path):
    """Played back on a terminal, the recording's own echo is the only one (raw mode: the
    keys typed are not echoed again); the terminal's modes are restored when the played-back
    program ends (here as it did: with its exit code)."""
    import os
    import select
    import subprocess
    import termios

    program = "sh -c 'echo ready; read x; echo got $x; exit 3'"
    result = cap("run", "--agent", f"pty:{program}", "--task", "abc", "--headless",
                 "--log", "o.caplog", cwd=tmp_path)
    assert result.returncode == 1 and "pty_died" in result.stdout  # it ended mid-turn
    sid = _session(read_log(tmp_path / "o.caplog"))
    master, slave = os.openpty()
    before = termios.tcgetattr(slave)
    shown = b""

    def read_until(text: bytes) -> None:
        nonlocal shown
        while text not in shown:
            ready, _, _ = select.select([master], [], [], 30)
            assert ready, shown
            shown += os.read(master, 65536)

    try:
        proc = subprocess.Popen([sys.executable, "-m", "trio_cap.actors.cli", "replay",
                                 "o.caplog", "--agent", sid, "--serve", "pty", "--fast"],
                                cwd=tmp_path, stdin=slave, stdout=slave, stderr=subprocess.PIPE,
                                env=_no_agents(tmp_path))
        read_until(b"ready")
        os.write(master, b"abc")  # what the recorded driver typed, then its Enter
        os.write(master, b"\r")
        read_until(b"got abc")
        code = proc.wait(timeout=60)
        after = termios.tcgetattr(slave)
    finally:
        os.close(master)
        os.close(slave)
    assert code == 3, proc.stderr.read()  # type: ignore[union-attr]
    assert shown.count(b"abc") == 2  # the recorded echo and the recorded output, no more
    assert after == before
