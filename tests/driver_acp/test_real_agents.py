"""The four real ACP agents ``cap peers install`` sets up, driven on the scripted model server.

opencode (``opencode acp``), Gemini CLI (``gemini --acp``), codex-acp and
claude-code-acp, each through its bundled manifest, the session actor, the
ACP connector and the log: a turn that writes a file with a permission
prompt answered by trio-cap's policy, a cancel in the middle of a streamed
reply (after which the session still works), and close (the whole process
group is gone: codex-acp and claude-code-acp ignore stdin EOF).  Finally
``cap run --agent opencode --permissions allow`` as a real process in a shell
set up by ``cap peers env``.  A missing peer fails, never skips.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.harness.conftest import PeerFactory
from trio_cap.actors.bindings.acp.connector import AcpConnector
from trio_cap.actors.bindings.process import live_groups
from trio_cap.actors.model_server import ModelServer, script_from_obj
from trio_cap.actors.orchestrator import Orchestrator, open_orchestrator
from trio_cap.events.kinds import (
    Artifact,
    CapSessionReady,
    PermissionDecided,
    PermissionRequest,
    SessionIdle,
    TextChunk,
)

pytestmark = pytest.mark.peers

SECONDS = 150
AGENTS = ["opencode", "gemini-cli", "codex-acp", "claude-code-acp"]
SLOW = " ".join(f"word{i}" for i in range(200))
CAP = str(Path(sys.executable).with_name("cap"))  # the cap of the venv running the tests


def write_calls(name: str, target: Path) -> list[dict[str, Any]]:
    """Each agent's own tool for writing ``target`` (and, for codex, a command that asks)."""
    content = "hi from the agent\n"
    if name == "opencode":
        return [{"name": "write", "arguments": {"filePath": str(target), "content": content}}]
    if name == "gemini-cli":
        return [{"name": "write_file", "arguments": {"file_path": str(target),
                                                     "content": content}}]
    if name == "claude-code-acp":  # with our fs capabilities it writes through fs/*
        return [{"name": "mcp__acp__Write", "arguments": {"file_path": str(target),
                                                          "content": content}}]
    patch = f"*** Begin Patch\n*** Add File: {target}\n+{content}*** End Patch\n"
    return [{"name": "apply_patch", "arguments": {"input": patch}, "custom": True},
            {"name": "exec_command", "arguments": {"cmd": "touch second.txt"}}]


def script(name: str, target: Path) -> Any:
    return script_from_obj({"rules": [
        {"match": "create hello", "text": "On it.", "tool_calls": write_calls(name, target),
         "then": {"text": "Done."}},
        {"match": "say hi", "text": "hello after the cancel"},  # before: Claude Code keeps
        {"match": "talk slowly", "text": SLOW, "delay_ms": 150},  # the cut prompt in context
    ]})


def options(name: str) -> dict[str, Any]:
    # codex's own workspace-write sandbox needs bubblewrap, which this machine lacks;
    # trio-cap reviews every command it runs instead (the manifest's review-args).
    if name == "codex-acp":
        return {"acp_args": ["-c", 'sandbox_mode="danger-full-access"']}
    return {}


@pytest.fixture
async def driven(peer: PeerFactory, monkeypatch: pytest.MonkeyPatch,
                 request: pytest.FixtureRequest) -> AsyncIterator[tuple[Orchestrator, Path]]:
    penv, workdir = peer(request.param)
    monkeypatch.setenv("PATH", penv.env["PATH"])  # the manifest finds the pinned program
    async with open_orchestrator(grace=10.0) as orch:
        orch.connectors["acp"] = AcpConnector(env=penv.env, inherit_env=False)
        yield orch, workdir


def log_of(orch: Orchestrator, session_id: str, kind: type) -> list[Any]:
    return [env.event for env in orch.log.read(1, session_id) if type(env.event) is kind]


@pytest.mark.parametrize("driven", AGENTS, indirect=True)
async def test_turn_writes_a_file_with_the_permission_answered_by_policy(
        driven: tuple[Orchestrator, Path], model_server: ModelServer,
        request: pytest.FixtureRequest) -> None:
    orch, workdir = driven
    name = request.node.callspec.params["driven"]
    target = workdir / "hello.txt"
    model_server.set_script(script(name, target))
    before = set(live_groups())
    with trio.fail_after(SECONDS):
        # Gemini's model is no ACP config option: the manifest puts `-m MODEL` in the argv
        model = "gemini-picked-model" if name == "gemini-cli" else None
        session = await orch.start_session(name, "acp", cwd=workdir, permissions="allow",
                                           model=model, options=options(name))
        turn = await session.run_turn("create hello.txt please")
        view = await session.close()
    assert turn.stop_reason == "end_turn", log_of(orch, session.id, TextChunk)
    assert "Done." in turn.text
    assert target.read_text() == "hi from the agent\n"
    assert view.status == "completed"
    ready = log_of(orch, session.id, CapSessionReady)[0]
    assert ready.session_id and ready.meta["acp"]["protocol_version"] == 1
    requests = log_of(orch, session.id, PermissionRequest)
    decided = log_of(orch, session.id, PermissionDecided)
    assert requests, "the agent asked nothing: trio-cap's policy never decided"
    assert [(d.decision, d.by) for d in decided][:1] == [("allow_once", "policy:allow")]
    if name == "codex-acp":
        assert (workdir / "second.txt").exists()
    else:  # the write went through fs/write_text_file: it is in the turn's diff
        diffs = [a for a in log_of(orch, session.id, Artifact)
                 if a.mime_type == "application/vnd.cap.coding.diff.v1+text"]
        assert diffs and "+hi from the agent" in (diffs[0].content or "")
    assert set(live_groups()) <= before  # the agent's whole process group is gone
    if model is not None:
        assert any(model in str(r.get("path", "")) for r in model_server.records)


@pytest.mark.parametrize("driven", AGENTS, indirect=True)
async def test_cancel_mid_turn_then_the_session_goes_on(
        driven: tuple[Orchestrator, Path], model_server: ModelServer,
        request: pytest.FixtureRequest) -> None:
    orch, workdir = driven
    name = request.node.callspec.params["driven"]
    model_server.set_script(script(name, workdir / "unused.txt"))
    with trio.fail_after(SECONDS):
        session = await orch.start_session(name, "acp", cwd=workdir, permissions="allow",
                                           options=options(name))
        await session.inject("talk slowly please")
        while not log_of(orch, session.id, TextChunk):
            seen = orch.log.last_seq
            await orch.wait_until(lambda s, seen=seen: s.last_seq > seen)
        await session.cancel()
        await session.wait_status("ready")
        cancelled = log_of(orch, session.id, SessionIdle)[-1]
        streamed = "".join(t.text for t in log_of(orch, session.id, TextChunk))
        after = await session.run_turn("say hi")
        await session.close()
    assert cancelled.stop_reason == "cancelled"
    assert "word0" in streamed and "word199" not in streamed
    assert after.stop_reason == "end_turn" and "hello after the cancel" in after.text


async def test_cap_run_opencode_from_a_shell_with_peers_env(
        peer: PeerFactory, model_server: ModelServer, tmp_path: Path) -> None:
    _, workdir = peer("opencode")  # fails when opencode is missing
    target = workdir / "hello.txt"
    model_server.set_script(script("opencode", target))
    cap = CAP
    home = tmp_path / "shell-home"
    shell = (f'eval "$({shlex.quote(cap)} peers env opencode --model-url {model_server.url} '
             f'--home {shlex.quote(str(home))} --workdir {shlex.quote(str(workdir))})" && '
             f'{shlex.quote(cap)} run --agent opencode --permissions allow --headless '
             f'--cwd {shlex.quote(str(workdir))} --task "create hello.txt please"')
    with trio.fail_after(SECONDS):
        result = await trio.run_process(["bash", "-c", shell], capture_stdout=True,
                                        capture_stderr=True, check=False,
                                        stdin=subprocess.DEVNULL)
    out = result.stdout.decode() + result.stderr.decode()
    assert result.returncode == 0, out
    assert "Done." in out
    assert "Traceback" not in out
    assert target.read_text() == "hi from the agent\n"
