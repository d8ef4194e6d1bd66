"""``cap serve a2a`` as a real process: its refusals (exit 2, one line, no traceback) and a
published agent driven by the a2a-sdk client until SIGTERM / SIGINT end it cleanly."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest
import trio
from a2a.types import GetTaskRequest

from tests.serve_a2a.conftest import (
    BOUND,
    TOKEN,
    ids_of,
    in_thread,
    last_state,
    run_cap,
    sdk_client,
    serving,
    texts_of,
    user_message,
)
from trio_cap.events.kinds import InputInjected, SessionCancelled
from trio_cap.events.log import FileEventLog

_EXCEPTION_LINE = re.compile(r"^\s*(\w+\.)*\w*(Error|Exception|ExceptionGroup)\b[:(]",
                             re.MULTILINE)


def one_line_refusal(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    everything = result.stdout + result.stderr
    assert "Traceback" not in everything and not _EXCEPTION_LINE.search(everything), everything
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert result.returncode == 2, (result.returncode, result.stderr)
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_a_non_loopback_address_without_a_token_is_refused(tmp_path: Path) -> None:
    result = run_cap(["serve", "a2a", "--listen", "0.0.0.0:0", "--agent", "cap-agent"],
                     tmp_path)
    one_line_refusal(result, "non-loopback", "--token-file")
    assert not (tmp_path / ".cap").exists()  # refused before any log was made


def test_a_missing_fleet_file_is_refused_in_one_line(tmp_path: Path) -> None:
    """(A published fleet itself: tests/fleet_face/test_a2a_sdk.py.)"""
    result = run_cap(["serve", "a2a", "--listen", "127.0.0.1:0", "--fleet", "f.toml"],
                     tmp_path)
    one_line_refusal(result, "f.toml")
    assert not (tmp_path / ".cap").exists()  # refused before any log was made


@pytest.mark.parametrize(("content", "needle"), [
    (None, "No such file"),
    ("# only a comment\n\n", "no tokens"),
    ("short\n", "at least 16"),
    ("a b c\n", "TOKEN or NAME TOKEN"),
])
def test_unusable_token_files_are_refused(tmp_path: Path, content: str | None,
                                          needle: str) -> None:
    tokens = tmp_path / "tokens"
    if content is not None:
        tokens.write_text(content)
    result = run_cap(["serve", "a2a", "--listen", "127.0.0.1:0", "--agent", "cap-agent",
                      "--token-file", str(tokens)], tmp_path)
    one_line_refusal(result, "--token-file", needle)


def test_an_unknown_agent_and_a_used_port_are_refused(tmp_path: Path) -> None:
    result = run_cap(["serve", "a2a", "--listen", "127.0.0.1:0", "--agent", "no-such-agent"],
                     tmp_path)
    # the resolver's own account (as cap run gives it): the places it looked, one a line
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("cap: error: no manifest found for 'no-such-agent'")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cap(["serve", "a2a", "--listen", f"127.0.0.1:{port}", "--agent",
                          "cap-agent"], tmp_path)
    one_line_refusal(result, "already in use")
    assert not (tmp_path / ".cap").exists()


def test_help_explains_the_command(tmp_path: Path) -> None:
    result = run_cap(["serve", "a2a", "--help"], tmp_path)
    assert result.returncode == 0
    for needle in ("--listen", "--agent", "--fleet", "--token-file", "input-required",
                   "include_raw", "agent-card.json", "non-loopback", "exit codes",
                   "--a2a-version"):
        assert needle in result.stdout, needle


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
async def test_a_published_agent_serves_a_turn_then_stops_cleanly(
        tmp_path: Path, signum: int, code: int) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {TOKEN}\n")
    log = tmp_path / "serve.caplog"
    async with serving(["--agent", "cap-agent", "--token-file", str(tokens), "--log",
                        str(log)], tmp_path) as (proc, url):
        async def flow():
            client = await sdk_client(url, TOKEN)
            done = [ev async for ev in client.send_message(user_message("hello"))]
            waiting = [ev async for ev in client.send_message(user_message("ask: x? [a|b]"))]
            task_id, _ = ids_of(waiting)
            task = await client.get_task(GetTaskRequest(id=task_id))
            await client.close()
            return done, task

        done, open_task = await in_thread(flow)
        assert last_state(done) == "TASK_STATE_COMPLETED"
        assert "hello" in texts_of(done)
        proc.send_signal(signum)
        with trio.fail_after(BOUND):
            assert await proc.wait() == code
    assert proc.stderr is not None
    stderr = (await proc.stderr.receive_some(65536)).decode()
    assert "Traceback" not in stderr, stderr
    reader = FileEventLog(log, readonly=True)
    try:
        events = [e.event for e in reader.read(1)]
    finally:
        reader.close()
    assert [e.text for e in events if isinstance(e, InputInjected)] == ["hello",
                                                                        "ask: x? [a|b]"]
    # the conversation still open at the signal was closed in the log, not left dangling
    ends = [e for e in events if isinstance(e, SessionCancelled)]
    assert len(ends) == 2 and open_task.context_id
