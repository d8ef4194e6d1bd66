"""``cap replay --check`` of ACP sessions: recorded against the official SDKs' agents, then
re-fed through the ACP client machine with no agent on PATH."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from tests.driver_acp.conftest import model_server, peer_program, sdk_python
from tests.harness.conftest import PeerFactory, peer
from tests.replay.helpers import NO_AGENTS, assert_clean, cap, read_log, sessions_of
from trio_cap.actors.bindings.acp.connector import AcpConnector
from trio_cap.actors.model_server import ModelServer
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.actors.replay.check import check_sessions, group_sessions
from trio_cap.events.kinds import (
    Artifact,
    CapError,
    FrameIn,
    FrameOut,
    PermissionRequest,
    SessionIdle,
    TextChunk,
    ToolCallEnd,
)
from trio_cap.events.log import MemoryEventLog

pytestmark = pytest.mark.peers  # the official SDKs' peers (cap peers install)

SECONDS = 60
__all__ = ["model_server", "peer"]  # fixtures, for the real agents' test
EXERCISER = Path(__file__).parents[1] / "driver_acp" / "exerciser_agent.py"


def ts_agent() -> str:
    return "acp:" + str(peer_program("acp-ts-sdk"))


def exerciser() -> str:
    return "acp:" + shlex.join([str(sdk_python()), str(EXERCISER)])


async def _texts(log: MemoryEventLog, sid: str) -> list[str]:
    return [e.event.text for e in log.read(1, sid) if type(e.event) is TextChunk]


async def test_every_shell_step_of_an_exerciser_session_replays_through_the_acp_machine(
        tmp_path: Path) -> None:
    """Served reads and writes (one refused outside the scope), an embedded terminal, a
    human's permission answer and a cancel mid-turn: each a batch of the shell's own."""
    log = MemoryEventLog()
    work = tmp_path / "work"
    work.mkdir()
    (work / "r.txt").write_text("read me\n")
    steps = [{"call": "write", "path": str(work / "w.txt"), "content": "new\n"},
             {"call": "read", "path": str(work / "r.txt")},
             {"call": "read", "path": "/etc/hostname"},
             {"call": "terminal", "command": "echo", "args": ["hi there"], "embed": "call_t"}]
    with trio.fail_after(SECONDS):
        async with open_orchestrator(log, grace=5.0) as orch:
            orch.record = "frames"
            auto = await orch.start_session(exerciser(), "acp", cwd=work, permissions="allow")
            turn = await auto.run_turn(json.dumps(steps))
            await auto.close()
            asked = await orch.start_session(exerciser(), "acp", cwd=work, permissions="ask",
                                             human=True)
            await asked.inject(json.dumps([{"call": "permission", "path": str(work / "a")}]))
            await asked.wait_status("input_required")
            req = next(e.event for e in log.read(1, asked.id)
                       if type(e.event) is PermissionRequest)
            await asked.decide(req.req_id, "allow_once")
            await asked.wait_status("ready")
            await asked.inject(json.dumps([{"call": "hang"}]))
            while "waiting for the cancel" not in await _texts(log, asked.id):
                seen = log.last_seq
                await orch.wait_until(lambda s, seen=seen: s.last_seq > seen)
            await asked.cancel()
            await asked.wait_status("ready")
            await asked.close()
    answers = json.loads(turn.text)
    assert [("ok" in a) for a in answers] == [True, True, False, True], answers
    envs = log.read()
    auto_events = [e.event for e in envs if e.stream == auto.id]
    assert any(type(e) is CapError and e.code == "cap_scope_violation" for e in auto_events)
    assert any(type(e) is Artifact for e in auto_events)  # the turn's diff
    assert any(type(e) is ToolCallEnd and "hi there" in e.output for e in auto_events)
    asked_events = [e.event for e in envs if e.stream == asked.id]
    assert [e.stop_reason for e in asked_events if type(e) is SessionIdle] == [
        "end_turn", "cancelled"]
    result = check_sessions(group_sessions([envs]))
    assert result.sessions == 2 and not result.undecoded
    assert result.events == sum(1 for e in envs if e.stream)


def test_cap_run_against_the_ts_sdk_agent_then_check_with_no_agent_on_path(tmp_path):
    run = cap("run", "--agent", ts_agent(), "--task", "fix the config", "--next", "again",
              "--permissions", "allow", "--headless", "--log", "a.caplog", cwd=tmp_path)
    assert_clean(run, 0)
    (recorded,) = sessions_of(tmp_path / "a.caplog").values()
    assert sum(type(e.event) is FrameIn for e in recorded) > 5
    checked = cap("replay", "a.caplog", "--check", cwd=tmp_path, env=NO_AGENTS)
    assert_clean(checked, 0, f"checked {len(recorded)} events of 1 session(s)")
    assert "no replay machine" not in checked.stdout + checked.stderr


PATCH = """
import sys
import msgspec
from trio_cap.actors.bindings.acp import machine
from trio_cap.events.kinds import TextChunk
real = machine.AcpClient.receive_data
def patched(self, data):
    return [msgspec.structs.replace(o, text=o.text.upper()) if type(o) is TextChunk else o
            for o in real(self, data)]
machine.AcpClient.receive_data = patched
from trio_cap.actors.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_check_with_a_patched_acp_machine_fails_at_its_first_text_readably(tmp_path):
    assert_clean(cap("run", "--agent", ts_agent(), "--task", "fix the config",
                     "--permissions", "allow", "--headless", "--log", "a.caplog",
                     cwd=tmp_path), 0)
    envs = read_log(tmp_path / "a.caplog")
    first_text = next(e for e in envs if type(e.event) is TextChunk)
    result = subprocess.run([sys.executable, "-c", PATCH, "replay", "a.caplog", "--check"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env=NO_AGENTS)
    assert_clean(result, 1, f"first divergence at seq {first_text.seq}")
    assert json.dumps(first_text.event.text)[1:-1] in result.stdout
    assert json.dumps(first_text.event.text.upper())[1:-1] in result.stdout
    assert result.stderr.strip().splitlines() == [
        f"cap: replay check failed: session {first_text.stream} diverges at seq "
        f"{first_text.seq}"]


def test_a_log_from_before_the_client_options_were_recorded_is_checked_from_events(tmp_path):
    """An older ACP log (no ``acp_options`` frame.out) cannot rebuild the client: --check
    says so and still re-runs the session machine over its events."""
    assert_clean(cap("run", "--binding", "acp", "--task", "hello", "--headless",
                     "--log", "a.caplog", cwd=tmp_path), 0)
    envs = [e for e in read_log(tmp_path / "a.caplog")
            if not (type(e.event) is FrameOut and isinstance(e.event.frame, dict))]
    result = check_sessions(group_sessions([envs]))
    assert result.undecoded == {"acp"}


# ---- real ACP agents on the scripted model server ---------------------------------------------

REAL = ["opencode", "codex-acp", "gemini-cli", "claude-code-acp"]


@pytest.mark.parametrize("name", REAL)
async def test_a_real_agents_write_and_cancel_replay_through_the_acp_machine(
        name: str, peer: PeerFactory, model_server: ModelServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A real agent's turn that writes a file (a permission answered by policy), a reply
    cancelled mid-stream and one more turn, recorded, then checked offline."""
    from tests.driver_acp.test_real_agents import SECONDS as REAL_SECONDS
    from tests.driver_acp.test_real_agents import options, script

    penv, workdir = peer(name)
    monkeypatch.setenv("PATH", penv.env["PATH"])
    model_server.set_script(script(name, workdir / "hello.txt"))
    log = MemoryEventLog()
    with trio.fail_after(REAL_SECONDS):
        async with open_orchestrator(log, grace=10.0) as orch:
            orch.record = "frames"
            orch.connectors["acp"] = AcpConnector(env=penv.env, inherit_env=False)
            session = await orch.start_session(name, "acp", cwd=workdir, permissions="allow",
                                               options=options(name))
            written = await session.run_turn("create hello.txt please")
            await session.inject("talk slowly please")
            while not [t for t in await _texts(log, session.id) if "word" in t]:
                seen = log.last_seq
                await orch.wait_until(lambda s, seen=seen: s.last_seq > seen)
            await session.cancel()
            await session.wait_status("ready")
            after = await session.run_turn("say hi")
            await session.close()
    assert "Done." in written.text and "hello after the cancel" in after.text
    envs = log.read()
    result = check_sessions(group_sessions([envs]))
    assert result.sessions == 1 and not result.undecoded
    assert result.events == sum(1 for e in envs if e.stream)
