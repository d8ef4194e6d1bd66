"""``cap run --resume`` with real Claude Code: the agent continues its own session (--resume)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.harness.conftest import PeerFactory, peer  # noqa: F401 - the fixture
from tests.replay.helpers import CAP, NO_AGENTS, VENV_BIN, assert_clean, cap, read_log
from trio_cap.actors.model_server import ModelServer, script_from_obj
from trio_cap.events.kinds import RunResumed, SessionCompleted, SessionConfig, TextChunk
from trio_cap.events.log import FileEventLog
from trio_cap.events.log.records import HEADER_SIZE

pytestmark = pytest.mark.peers


def cut_after(path: Path, seq: int) -> None:
    """Power loss: the file ends right after the record holding ``seq``."""
    log = FileEventLog(path, readonly=True)
    try:
        i = max(k for k, first in enumerate(log._firsts) if first <= seq)
        end = log._offsets[i] + HEADER_SIZE + log._lengths[i]
    finally:
        log.close()
    with open(path, "r+b") as f:
        f.truncate(end)


async def test_a_killed_claude_code_run_resumes_its_own_session(
    peer: PeerFactory, model_server: ModelServer, tmp_path: Path,  # noqa: F811
) -> None:
    penv, workdir = peer("claude-code")
    env = {**penv.env, "PATH": f"{VENV_BIN}:{penv.env['PATH']}"}
    model_server.set_script(script_from_obj({"rules": [
        {"match": "first prompt", "text": "first answer"},
        {"match": "second prompt", "text": "second answer"},
    ]}))
    log = tmp_path / "claude.caplog"
    argv = [*CAP, "run", "--agent", "claude-code", "--binding", "stream-json", "--task",
            "first prompt", "--next", "second prompt", "--permissions", "allow",
            "--headless", "--log", str(log)]
    with trio.fail_after(240):
        done = await trio.run_process(argv, cwd=workdir, env=env, capture_stdout=True,
                                      capture_stderr=True, check=False)
        assert done.returncode == 0, done.stderr.decode()
        envs = read_log(log)
        second = [e for e in envs if e.kind == "cap.user_input.inject"][1]
        cut_after(log, second.seq)  # the second prompt went out; its answer never came back
        before = read_log(log)
        resumed = await trio.run_process([*CAP, "run", "--resume", str(log)], cwd=workdir,
                                         env=env, capture_stdout=True, capture_stderr=True,
                                         check=False)
    assert resumed.returncode == 0, resumed.stderr.decode()
    after = read_log(log)
    assert after[: len(before)] == before
    (event,) = [e.event for e in after if type(e.event) is RunResumed]
    ready = next(e.event.agent_session_id for e in before if e.kind == "session.ready")
    assert (event.how, event.rerun_turns, event.agent_session_id) == ("resumed", (2,), ready)
    configs = [e.event for e in after if type(e.event) is SessionConfig]
    assert configs[-1].session_resume_id == ready  # Claude Code was started with --resume
    tail = after[len(before):]
    assert "".join(e.event.text for e in tail if type(e.event) is TextChunk) == "second answer"
    assert [e.event.turns for e in after if type(e.event) is SessionCompleted] == [2]
    checked = cap("replay", str(log), "--check", cwd=tmp_path, env=NO_AGENTS)
    assert_clean(checked, 0, "identically")
