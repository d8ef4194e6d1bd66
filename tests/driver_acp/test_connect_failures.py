"""Every way an ACP handshake fails is one readable line, and nothing is left running.

Each case is a real process: a missing program, an agent that exits, one that
never answers, one that speaks another protocol version, one that refuses
``session/new``; then the agent dying mid-session; then ``cap run`` against a
broken agent, for its exit code and its one-line message.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from trio_cap.actors.bindings.acp.connector import AcpConnector
from trio_cap.actors.bindings.process import live_groups
from trio_cap.actors.orchestrator import Orchestrator
from trio_cap.events.kinds import SessionFailed

SECONDS = 60
PY = sys.executable
CAP = str(Path(sys.executable).with_name("cap"))

ANSWER_VERSION_7 = """
import json, sys
line = sys.stdin.readline()
print(json.dumps({"jsonrpc": "2.0", "id": json.loads(line)["id"],
                  "result": {"protocolVersion": 7}}), flush=True)
sys.stdin.read()
"""
REFUSE_NEW = """
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg["method"] == "initialize":
        out = {"result": {"protocolVersion": 1}}
    else:
        out = {"error": {"code": -32603, "message": "no sessions today"}}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], **out}), flush=True)
"""
DIE_IN_TURN = """
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg["method"] == "initialize":
        out = {"result": {"protocolVersion": 1}}
    elif msg["method"] == "session/new":
        out = {"result": {"sessionId": "s"}}
    else:
        sys.stderr.write("boom: out of memory\\n")
        sys.exit(9)
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], **out}), flush=True)
"""


def agent(script: str, tmp_path: Path, name: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(script)
    return "acp:" + shlex.join([PY, str(path)])


async def failure(orch: Orchestrator, spec: str, workdir: Path) -> str:
    before = set(live_groups())
    session = await orch.start_session(spec, "acp", cwd=workdir)
    with trio.fail_after(SECONDS):
        view = await session.wait_terminal()
    assert view.status == "failed"
    assert set(live_groups()) <= before  # the group is gone on every failure path
    (failed,) = [e.event for e in orch.log.read(1, session.id) if type(e.event) is SessionFailed]
    return failed.message


@pytest.fixture
def quick(orch: Orchestrator) -> Orchestrator:
    orch.connectors["acp"] = AcpConnector(init_timeout=3, grace=1)
    return orch


async def test_missing_program(quick: Orchestrator, workdir: Path) -> None:
    message = await failure(quick, "acp:/nonexistent/acp-agent", workdir)
    assert "acp: program '/nonexistent/acp-agent' does not exist" in message


async def test_agent_exits_during_the_handshake(quick: Orchestrator, workdir: Path) -> None:
    spec = "acp:" + shlex.join([PY, "-c", "import sys; sys.stderr.write('bad flag'); "
                                "sys.exit(3)"])
    message = await failure(quick, spec, workdir)
    assert "ACP agent ended during the handshake: the agent exited with code 3" in message
    assert "bad flag" in message


async def test_agent_that_never_answers(quick: Orchestrator, workdir: Path) -> None:
    spec = "acp:" + shlex.join([PY, "-c", "import sys; sys.stdin.read()"])
    message = await failure(quick, spec, workdir)
    assert "did not finish the handshake within 3 s (initialize sent, no answer)" in message


async def test_other_protocol_version(quick: Orchestrator, workdir: Path,
                                      tmp_path: Path) -> None:
    message = await failure(quick, agent(ANSWER_VERSION_7, tmp_path, "v7"), workdir)
    assert "protocol version 7; trio-cap speaks ACP version 1" in message


async def test_session_new_refused(quick: Orchestrator, workdir: Path, tmp_path: Path) -> None:
    message = await failure(quick, agent(REFUSE_NEW, tmp_path, "refuse"), workdir)
    assert "ACP handshake failed: session/new failed: no sessions today" in message


async def test_agent_dying_mid_turn_fails_the_session(quick: Orchestrator, workdir: Path,
                                                      tmp_path: Path) -> None:
    session = await quick.start_session(agent(DIE_IN_TURN, tmp_path, "die"), "acp",
                                        cwd=workdir)
    with trio.fail_after(SECONDS):
        await session.inject("hello")
        view = await session.wait_terminal()
    assert view.status == "failed"
    (failed,) = [e.event for e in quick.log.read(1, session.id)
                 if type(e.event) is SessionFailed]
    assert failed.code == "agent_died"
    assert "exited with code 9" in failed.message and "out of memory" in failed.message


async def test_cap_run_against_a_broken_agent_exits_1_with_one_line(
        workdir: Path, tmp_path: Path) -> None:
    spec = agent(REFUSE_NEW, tmp_path, "refuse")
    with trio.fail_after(SECONDS):
        result = await trio.run_process(
            [CAP, "run", "--agent", spec, "--headless", "--cwd", str(workdir), "--task", "hi",
             "--log", str(tmp_path / "run.caplog")],
            capture_stdout=True, capture_stderr=True, check=False, stdin=subprocess.DEVNULL)
    err = result.stderr.decode()
    assert result.returncode == 1, err
    assert "Traceback" not in err
    assert "session/new failed: no sessions today" in err
