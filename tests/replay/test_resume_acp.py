"""``cap run --resume`` of an ACP session, against an agent on the official ACP Python SDK
(``memo_agent.py``): ``session/load`` when the agent declared ``loadSession``, its replayed
history kept out of the turn's output; a restart with the transcript when it did not, or
when the load is refused."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import trio

from tests.driver_acp.conftest import model_server, sdk_python
from tests.harness.conftest import PeerFactory, peer
from tests.replay.helpers import CAP, NO_AGENTS, VENV_BIN, assert_clean, cap, read_log
from tests.replay.test_resume_claude import cut_after
from trio_cap.actors.model_server import ModelServer, script_from_obj
from trio_cap.actors.recording import frame_bytes
from trio_cap.events.kinds import (
    AgentRaw,
    FrameOut,
    RunResumed,
    SessionCompleted,
    SessionConfig,
    SessionReady,
    TextChunk,
)

pytestmark = pytest.mark.peers  # the official Python SDK's peer (cap peers install)

MEMO = Path(__file__).with_name("memo_agent.py")
__all__ = ["model_server", "peer"]  # fixtures, for opencode's test


def killed_run(tmp_path: Path, env: dict[str, str]) -> tuple[Path, list]:
    """A two-prompt run whose log ends right after the second prompt went out."""
    agent = "acp:" + shlex.join([str(sdk_python()), str(MEMO)])
    assert_clean(cap("run", "--agent", agent, "--task", "first", "--next", "second",
                     "--permissions", "allow", "--headless", "--log", "acp.caplog",
                     cwd=tmp_path, env=env), 0)
    log = tmp_path / "acp.caplog"
    second = [e for e in read_log(log) if e.kind == "cap.user_input.inject"][1]
    cut_after(log, second.seq)
    return log, read_log(log)


def prompts_sent(envs: list) -> list[list[str]]:
    """The text blocks of each ``session/prompt`` the client wrote."""
    out = []
    for env in envs:
        data = frame_bytes(env.event) if type(env.event) is FrameOut else None
        for line in (data or b"").splitlines():
            message = json.loads(line) if line.strip().startswith(b"{") else {}
            if message.get("method") == "session/prompt":
                out.append([b["text"] for b in message["params"]["prompt"]])
    return out


def resume(tmp_path: Path, env: dict[str, str]) -> tuple[list, list, RunResumed]:
    log = tmp_path / "acp.caplog"
    before = read_log(log)
    assert_clean(cap("run", "--resume", str(log), cwd=tmp_path, env=env), 0)
    after = read_log(log)
    assert after[: len(before)] == before
    (event,) = [e.event for e in after if type(e.event) is RunResumed]
    assert [e.event.turns for e in after if type(e.event) is SessionCompleted] == [2]
    assert_clean(cap("replay", str(log), "--check", cwd=tmp_path, env=NO_AGENTS), 0,
                 "identically")
    return before, after[len(before):], event


def test_an_acp_agent_that_loads_sessions_continues_its_own(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    env = {**NO_AGENTS, "MEMO_STATE": str(tmp_path / "state")}
    _, before = killed_run(tmp_path, env)
    recorded = next(e.event.agent_session_id for e in before if type(e.event) is SessionReady)
    _, tail, event = resume(tmp_path, env)
    assert (event.how, event.rerun_turns, event.agent_session_id) == ("resumed", (2,), recorded)
    assert "session/load" in event.reason
    configs = [e.event for e in tail if type(e.event) is SessionConfig]
    assert configs[-1].session_resume_id == recorded
    # the agent had answered both prompts before the kill: its 4 history entries come back
    # while it loads, as agent.raw replayed_history, never as the turn's text
    replayed = [e.event for e in tail if type(e.event) is AgentRaw
                and e.event.reason == "replayed_history"]
    assert [json.loads(r.text)["sessionUpdate"] for r in replayed] == [
        "user_message_chunk", "agent_message_chunk"] * 2
    text = "".join(e.event.text for e in tail if type(e.event) is TextChunk)
    assert text == f"second (session {recorded}, prompt 3, 0 context block(s))"
    assert prompts_sent(tail) == [["second"]]  # no transcript: the agent has its history


def test_a_refused_load_starts_a_new_session_with_the_transcript(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    env = {**NO_AGENTS, "MEMO_STATE": str(tmp_path / "state")}
    killed_run(tmp_path, env)
    for kept in (tmp_path / "state").iterdir():
        kept.unlink()  # the agent lost its sessions: session/load is refused (-32002)
    _, tail, event = resume(tmp_path, env)
    assert event.how == "resumed"  # what was tried; the fallback is logged by the driver
    (failed,) = [e.event for e in tail if type(e.event) is AgentRaw
                 and e.event.reason == "load_failed"]
    assert "a new session was started (its first prompt carries the context)" in failed.text
    (sent,) = prompts_sent(tail)
    assert sent[1] == "second" and "User: first" in sent[0]
    assert "This session was restarted" in sent[0]
    text = "".join(e.event.text for e in tail if type(e.event) is TextChunk)
    assert text.startswith("second (session ") and text.endswith(
        ", prompt 1, 1 context block(s))")


def test_an_acp_agent_without_load_session_is_restarted_with_the_transcript(
        tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    env = {**NO_AGENTS, "MEMO_STATE": str(tmp_path / "state"), "MEMO_NO_LOAD": "1"}
    killed_run(tmp_path, env)
    _, tail, event = resume(tmp_path, env)
    assert (event.how, event.agent_session_id) == ("restarted", None)
    assert "did not declare loadSession" in event.reason
    assert [e.event.session_resume_id for e in tail if type(e.event) is SessionConfig] == [None]
    (sent,) = prompts_sent(tail)
    assert sent[1] == "second" and "User: first" in sent[0]
    assert not [e for e in tail if e.kind == "agent.raw" and "load" in e.event.reason]


async def test_opencode_loads_its_session_after_the_run_died(
        peer: PeerFactory, model_server: ModelServer, tmp_path: Path) -> None:
    """A real agent that declares loadSession (opencode 1.18, on the scripted model server):
    the resumed run loads its session and the re-run prompt is answered in it."""
    penv, workdir = peer("opencode")
    env = {**penv.env, "PATH": f"{VENV_BIN}:{penv.env['PATH']}"}
    model_server.set_script(script_from_obj({"rules": [
        {"match": "second prompt", "text": "second answer"},
        {"match": "first prompt", "text": "first answer"},
    ]}))
    log = tmp_path / "oc.caplog"
    argv = [*CAP, "run", "--agent", "opencode", "--binding", "acp", "--task", "first prompt",
            "--next", "second prompt", "--permissions", "allow", "--headless", "--log",
            str(log)]
    with trio.fail_after(300):
        done = await trio.run_process(argv, cwd=workdir, env=env, capture_stdout=True,
                                      capture_stderr=True, check=False)
        assert done.returncode == 0, done.stderr.decode()
        second = [e for e in read_log(log) if e.kind == "cap.user_input.inject"][1]
        cut_after(log, second.seq)
        before = read_log(log)
        resumed = await trio.run_process([*CAP, "run", "--resume", str(log)], cwd=workdir,
                                         env=env, capture_stdout=True, capture_stderr=True,
                                         check=False)
    assert resumed.returncode == 0, resumed.stderr.decode()
    after = read_log(log)
    assert after[: len(before)] == before
    recorded = next(e.event.agent_session_id for e in before if type(e.event) is SessionReady)
    (event,) = [e.event for e in after if type(e.event) is RunResumed]
    assert (event.how, event.agent_session_id) == ("resumed", recorded)
    tail = after[len(before):]
    assert not [e for e in tail if type(e.event) is AgentRaw
                and e.event.reason in ("load_failed", "resume_unsupported")]
    replayed = [e for e in tail if type(e.event) is AgentRaw
                and e.event.reason == "replayed_history"]
    assert replayed  # opencode sent its history while it loaded …
    text = "".join(e.event.text for e in tail if type(e.event) is TextChunk)
    assert text == "second answer"  # … and none of it became the re-run turn's output
    assert [e.event.turns for e in after if type(e.event) is SessionCompleted] == [2]
    assert_clean(cap("replay", str(log), "--check", cwd=tmp_path, env=NO_AGENTS), 0,
                 "identically")
