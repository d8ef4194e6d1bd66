"""The PTY binding through the whole stack: open_orchestrator sessions and ``cap run`` as a
real process (exit codes, one-line messages, never a traceback)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from tests.driver_pty.ptylib import PS1, WAIT
from trio_cap.actors.bindings.pty.connector import PtyConnector
from trio_cap.actors.orchestrator import Orchestrator, open_orchestrator
from trio_cap.events.kinds import (
    Cancel,
    CapError,
    CapSessionReady,
    PtyRawBytes,
    SessionFailed,
    TextChunk,
    UserInputInject,
)

CAP = [sys.executable, "-m", "trio_cap.actors.cli"]
BASH_TOML = """
[agent]
name = "tbash"
binary = "bash"
profiles = []

[startup]
command = ["bash", "--norc", "--noprofile", "-i"]
ready_when = { pattern = "^tcap\\\\$\\\\s*$" }
init_timeout_seconds = 30

[pty]
cols = 100
rows = 30
bracketed_paste = true
sigint_cancels_turn = "graceful"

[parse]
idle = ["^tcap\\\\$\\\\s*$"]

[capabilities]
streaming_output = true
mid_turn_cancel = "graceful"
"""


def write_manifest(tmp_path: Path) -> Path:
    path = tmp_path / "tbash.toml"
    path.write_text(BASH_TOML)
    return path


@asynccontextmanager
async def orchestrator() -> AsyncIterator[Orchestrator]:
    """An orchestrator whose PTY connector gives bash the known prompt."""
    async with open_orchestrator(grace=5.0) as orch:
        orch.connectors["pty"] = PtyConnector(env={"PS1": PS1}, grace=2.0)
        with trio.fail_after(WAIT):
            yield orch


def kinds(orch, sid: str, kind: type) -> list:
    return [env for env in orch.log.read(0, sid) if isinstance(env.event, kind)]


async def test_sessions_through_open_orchestrator(tmp_path: Path) -> None:
    async with orchestrator() as orch:
        session = await orch.start_session(str(write_manifest(tmp_path)), cwd=tmp_path)
        first = await session.run_turn("echo first $((1+1))")
        second = await session.run_turn("printf 'x\\ny\\n'")
        third = await session.run_turn("for i in a b\ndo echo $i$i\ndone")
        view = await session.close()
    assert (first.text, second.text, third.text) == ("first 2\n", "x\ny\n", "aa\nbb\n")
    assert {first.stop_reason, second.stop_reason, third.stop_reason} == {"end_turn"}
    assert view.status == "completed"
    sid = session.id
    (ready,) = kinds(orch, sid, CapSessionReady)
    sent = kinds(orch, sid, UserInputInject)
    assert len(sent) == 3 and ready.seq < sent[0].seq  # no prompt went out before ready


async def test_cancel_and_an_agent_that_dies_through_the_orchestrator(tmp_path: Path) -> None:
    async with orchestrator() as orch:
        session = await orch.start_session(str(write_manifest(tmp_path)), cwd=tmp_path)
        accepted = await session.inject("echo started; sleep 1000")
        await orch.wait_until(lambda s: "started" in _texts(orch, session.id))
        await session.cancel("current_turn")
        await session.wait_status("idle", "ready")
        after = await session.run_turn("echo after")
        died = await session.run_turn("exit 5")
        view = await session.wait_terminal()
    assert accepted.turn == 1 and after.text == "after\n"
    assert kinds(orch, session.id, Cancel)
    assert died.stop_reason is None or died.stop_reason != "end_turn"
    assert view.status == "failed"
    (err,) = [e for e in kinds(orch, session.id, CapError) if e.event.code == "pty_died"]
    (failed,) = kinds(orch, session.id, SessionFailed)
    assert err.event.details == {"exit_code": 5} and err.seq < failed.seq
    assert failed.event.code == "agent_died"


def _texts(orch, sid: str) -> str:

    return "".join(env.event.text for env in orch.log.read(0, sid)
                   if isinstance(env.event, TextChunk))


def cap(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run([*CAP, *args], cwd=cwd, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=120,
                            env={**os.environ, **(env or {})})
    both = result.stdout + result.stderr
    assert "Traceback" not in both and "ExceptionGroup" not in both, both
    return result


def test_cap_run_drives_bash_over_pty(tmp_path: Path) -> None:
    result = cap("run", "--agent", "pty:bash --norc --noprofile -i", "--task",
                 "echo from-cap $((20+22))", "--headless", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    text = "".join(e.get("text", "") for e in events if e.get("kind") == "cap.text_chunk")
    assert text == "from-cap 42\n"
    assert any(e.get("kind") == "session.completed" for e in events)


def test_cap_run_with_the_bundled_repl(tmp_path: Path) -> None:
    result = cap("run", "--agent", "repl", "--task", "echo bundled-ok", "--headless",
                 cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "bundled-ok" in result.stdout and "completed after 1 turn" in result.stdout


def test_cap_run_failure_paths_are_one_line_each(tmp_path: Path) -> None:
    missing = cap("run", "--agent", "pty:/no/such/program", "--task", "x", "--headless",
                  cwd=tmp_path)
    assert missing.returncode == 1
    assert "program '/no/such/program' does not exist" in missing.stderr
    slow = tmp_path / "slow.toml"
    slow.write_text(BASH_TOML.replace('"tbash"', '"slow"').replace(
        'command = ["bash", "--norc", "--noprofile", "-i"]', 'command = ["cat"]').replace(
        "init_timeout_seconds = 30", "init_timeout_seconds = 1"))
    never = cap("run", "--agent", str(slow), "--task", "x", "--headless", cwd=tmp_path)
    assert never.returncode == 1
    assert "did not become ready within 1 s" in never.stderr
    died = cap("run", "--agent", str(write_manifest(tmp_path)), "--task", "exit 3",
               "--headless", cwd=tmp_path, env={"PS1": PS1})
    assert died.returncode == 1
    assert "pty_died" in died.stdout and "agent_died: the agent exited with code 3" in died.stderr


async def test_raw_bytes_are_logged_only_for_a_raw_recording(tmp_path: Path) -> None:
    agent = write_manifest(tmp_path)
    async with orchestrator() as orch:
        plain = await orch.start_session(str(agent), cwd=tmp_path, record="frames")
        await plain.run_turn("echo plain")
        await plain.close()
        raw = await orch.start_session(str(agent), cwd=tmp_path, record="raw")
        await raw.run_turn("echo raw-bytes")
        await raw.close()
    assert not kinds(orch, plain.id, PtyRawBytes)
    seen = b"".join(base64.b64decode(e.event.bytes_b64) for e in kinds(orch, raw.id, PtyRawBytes))
    assert b"raw-bytes" in seen
