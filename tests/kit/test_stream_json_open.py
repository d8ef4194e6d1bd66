"""Every way opening a stream-json agent can go wrong: one readable line, nothing left running.

The agents are tiny real processes (``tests/kit/agents.py``) that each start a
grandchild first, so "nothing left running" covers the whole process group.
The last test runs ``cap run`` itself as a real process against an agent that
never answers ``initialize``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.kit.agents import child_pid, gone, write_agent
from trio_cap.actors.bindings.process import live_groups
from trio_cap.actors.bindings.stream_json.connector import StreamJsonConnector
from trio_cap.actors.connection import AgentSpec, ConnectError
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.events.kinds import SessionConfig

BOUND = 30
ROOT = Path(__file__).resolve().parents[2]


def spec_for(argv: list[str], cwd: Path, ids: Any = None) -> AgentSpec:
    return AgentSpec(name="fake", binding="stream-json", config=SessionConfig(cwd=str(cwd)),
                     argv=tuple(argv), ids=ids)


async def open_and_fail(argv: list[str], cwd: Path, *, init_timeout: float = 3.0) -> str:
    inbox_send, _ = trio.open_memory_channel[Any](1000)
    connector = StreamJsonConnector(init_timeout=init_timeout, grace=0.5)
    with pytest.raises(ConnectError) as caught:
        async with connector.open(spec_for(argv, cwd), inbox_send):
            pytest.fail("the handshake should have failed")
    with pytest.raises(trio.ClosedResourceError):  # our clone of the inbox was given back
        inbox_send.send_nowait(None)
    return str(caught.value)


@pytest.mark.parametrize(("mode", "expected"), [
    ("silent", "stream-json agent did not answer initialize within 3 s"),
    ("refuses", "stream-json initialize failed: unsupported client"),
    ("dies", "stream-json agent ended during the handshake: the agent exited with code 3; "
             "stderr: boom: no API key configured"),
])
async def test_a_failed_handshake_is_one_line_and_the_group_is_gone(
        tmp_path: Path, mode: str, expected: str) -> None:
    before = live_groups()
    begun = trio.current_time()
    with trio.fail_after(BOUND):
        message = await open_and_fail(write_agent(tmp_path, mode), tmp_path)
    assert message == expected
    assert trio.current_time() - begun < 3 + 5  # no grace is owed after a failed handshake
    assert live_groups() == before
    assert gone(child_pid(tmp_path))


async def test_a_program_that_cannot_start_is_a_connect_error(tmp_path: Path) -> None:
    with trio.fail_after(BOUND):
        message = await open_and_fail([str(tmp_path / "no-such-claude")], tmp_path)
    assert message.startswith(f"cannot start {str(tmp_path / 'no-such-claude')!r}: program not")


async def test_the_caller_cancelled_during_the_handshake_leaves_nothing_running(
        tmp_path: Path) -> None:
    inbox_send, _ = trio.open_memory_channel[Any](1000)
    argv = write_agent(tmp_path, "silent")
    connector = StreamJsonConnector(init_timeout=60, grace=0.5)
    with trio.fail_after(BOUND):
        with trio.move_on_after(2) as scope:
            async with connector.open(spec_for(argv, tmp_path), inbox_send):
                pytest.fail("the handshake cannot have succeeded")
    assert scope.cancelled_caught
    assert gone(child_pid(tmp_path))
    assert not live_groups()


async def test_an_error_in_the_callers_body_comes_out_as_itself_and_the_group_ends(
        tmp_path: Path) -> None:
    inbox_send, _ = trio.open_memory_channel[Any](1000)
    argv = write_agent(tmp_path, "ready")
    connector = StreamJsonConnector(init_timeout=BOUND, grace=0.5)
    with trio.fail_after(BOUND), pytest.raises(LookupError, match="the caller's own"):
        async with connector.open(spec_for(argv, tmp_path), inbox_send) as conn:
            pid = conn.agent.pid
            raise LookupError("the caller's own")
    assert gone(pid) and gone(child_pid(tmp_path))
    assert not live_groups()


async def test_a_ready_agent_closes_at_stdin_eof_without_signals(tmp_path: Path) -> None:
    inbox_send, _ = trio.open_memory_channel[Any](1000)
    argv = write_agent(tmp_path, "ready")
    connector = StreamJsonConnector(init_timeout=BOUND, grace=BOUND)
    with trio.fail_after(BOUND):
        async with connector.open(spec_for(argv, tmp_path), inbox_send) as conn:
            pass
    assert conn.agent.returncode == 0


async def test_ids_come_from_the_spec_so_sequential_ids_repeat(tmp_path: Path) -> None:
    """The agent session id (``--session-id``) is a uuid made from the injected ids."""
    seen = []
    for run in range(3):
        where = tmp_path / str(run)
        argv = write_agent(where, "ready")
        inbox_send, _ = trio.open_memory_channel[Any](1000)
        ids = SequentialIds() if run < 2 else None
        with trio.fail_after(BOUND):
            async with StreamJsonConnector(init_timeout=BOUND).open(
                    spec_for(argv, where, ids), inbox_send):
                pass
        args = json.loads((where / "argv.json").read_text())
        (flag,) = [a for a in args if a.startswith("--session-id=")]
        seen.append(flag.partition("=")[2])
    assert seen[0] == seen[1]
    assert seen[2] != seen[0]
    assert all(uuid.UUID(s) for s in seen)


async def test_an_agent_dying_mid_turn_fails_the_session_even_if_its_orphan_holds_stdout(
        tmp_path: Path) -> None:
    argv = write_agent(tmp_path, "crash")
    async with open_orchestrator() as orch:
        orch.connectors["stream-json"] = StreamJsonConnector(grace=0.5)
        with trio.fail_after(BOUND):
            session = await orch.start_session("stream-json:" + " ".join(argv), cwd=tmp_path)
            await session.inject("hello")
            view = await session.wait_terminal()
    assert view.status == "failed"
    assert view.last_error is not None
    assert "the agent exited with code 5; stderr: segfault in the model client" in view.last_error
    assert gone(child_pid(tmp_path))


@pytest.mark.parametrize(("mode", "expected"), [
    ("silent", "did not answer initialize within 3 s"),
    ("refuses", "stream-json initialize failed: unsupported client"),
    ("dies", "ended during the handshake: the agent exited with code 3; stderr: boom: no API"),
    ("missing", "no-such-agent"),
])
def test_cap_run_says_in_one_line_why_a_stream_json_agent_did_not_start(
        tmp_path: Path, mode: str, expected: str) -> None:
    """``cap run`` as a real process: exit 1, the reason, no traceback, nothing left running."""
    argv = write_agent(tmp_path / "agent", mode if mode != "missing" else "ready")
    if mode == "missing":
        argv = [str(tmp_path / "no-such-agent")]
    manifest = tmp_path / "fake.toml"
    manifest.write_text(f"""
[agent]
name = "fake"
binary = {argv[0]!r}
profiles = ["coding"]

[startup]
command = {json.dumps(argv)}
ready_when = {{ pattern = "ready" }}
init_timeout_seconds = 3  # room for a loaded machine to start the agent

[fast_path]
stream_json = true

[pty]
rows = 24
cols = 80

[capabilities]
streaming_output = true
""")
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "trio_cap.actors.cli", "run", "--agent", str(manifest),
         "--binding", "stream-json", "--task", "hello", "--cwd", str(work)],
        capture_output=True, text=True, env=env, timeout=BOUND, cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert expected in output
    assert "Traceback" not in output and "generator didn't yield" not in output
    assert "ExceptionGroup" not in output
    if mode != "missing":
        assert gone(child_pid(tmp_path / "agent"))


async def test_an_agent_with_no_command_is_a_connect_error(tmp_path: Path) -> None:
    with trio.fail_after(BOUND):
        message = await open_and_fail([], tmp_path)
    assert message == "stream-json: the manifest declares no stream-json argv"
