"""The official Python Claude Agent SDK drives ``cap-agent --fleet`` whose coder is real
Claude Code (the pinned peer, over stream-json, on the scripted model server): Claude's
own permission prompt for its Write — in Claude Code's ``file_path`` shape, in the
coder's worktree — reaches the SDK's ``can_use_tool`` named after the coder, the allow
goes back to Claude, and the reviewer (trio-cap's scripted agent) gets Claude's result.
A missing peer fails.  The model server runs in the test's Trio loop, so the asyncio
SDK runs in a thread."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Any

import pytest
import trio
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, PermissionResultAllow

from tests.agent_stream_json.conftest import cap_agent
from tests.harness.conftest import PeerFactory, model_server, peer
from trio_cap.actors.model_server import ModelServer, script_from_obj
from trio_cap.events.log import FileEventLog

__all__ = ["cap_agent", "model_server", "peer"]
pytestmark = pytest.mark.peers

LIMIT = 150.0
FLEET = '''\
name = "realface"
repo = "repo"
permissions = "allow"

[[session]]
id = "coder"
agent = "claude-code"
binding = "stream-json"
permissions = "ask"

[[session]]
id = "reviewer"
binding = "inproc"
script = "reviewer.toml"

[[route]]
pipeline = ["coder", "reviewer"]
'''


async def test_sdk_drives_a_fleet_whose_coder_is_real_claude(
        cap_agent: str, peer: PeerFactory, model_server: ModelServer,
        tmp_path: Path) -> None:
    penv, _workdir = peer("claude-code")
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q", "-b", "main"],
                 ["-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q",
                  "--allow-empty", "-m", "first"]):
        await trio.run_process(["git", "-C", str(repo), *args])
    (tmp_path / "fleet.toml").write_text(FLEET)
    (tmp_path / "reviewer.toml").write_text('[[turn]]\nsteps = [ { say = "looks good" } ]\n')
    target = repo / ".cap-worktrees" / "realface" / "r1" / "coder" / "hello.txt"
    model_server.set_script(script_from_obj({"rules": [
        {"match": "create hello", "text": "On it.",
         "tool_calls": [{"name": "Write", "arguments": {"file_path": str(target),
                                                         "content": "hi from claude\n"}}],
         "then": {"text": "Finished: hello.txt is written."}}]}))
    log = tmp_path / "face.caplog"
    cli = tmp_path / "bin" / "claude"
    cli.parent.mkdir()
    env = {**penv.env, "CAP_FLEET_RUN_ID": "r1"}  # the run's paths, known before it starts
    pairs = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
    argv = [cap_agent, "--fleet", str(tmp_path / "fleet.toml"), "--log", str(log)]
    cli.write_text(f"#!/bin/sh\nexec env -i {pairs} {shlex.join(argv)} \"$@\"\n")
    cli.chmod(0o755)
    asked: list[tuple[str, dict, Any]] = []

    async def can_use_tool(tool: str, tool_input: dict, context) -> Any:
        asked.append((tool, tool_input, context.agent_id))
        assert not target.exists()  # asked before the write
        return PermissionResultAllow()

    async def turn() -> list[Any]:
        opts = ClaudeAgentOptions(cli_path=str(cli), cwd=str(repo), can_use_tool=can_use_tool)
        async with ClaudeSDKClient(options=opts) as client:
            await client.query("please create hello.txt")
            return [m async for m in client.receive_response()]

    messages = await trio.to_thread.run_sync(
        lambda: asyncio.run(asyncio.wait_for(turn(), LIMIT)))
    ((tool, tool_input, agent_id),) = asked
    assert (tool, tool_input["file_path"], agent_id) == ("Write", str(target), "coder")
    assert target.read_text() == "hi from claude\n"
    result = messages[-1]
    assert type(result).__name__ == "ResultMessage" and result.subtype == "success", result
    assert result.result == "looks good"
    fleet_log = FileEventLog(tmp_path / "face.fleet.caplog", readonly=True)
    created = [env.event for env in fleet_log.read(1, "realface.coder")
               if env.kind == "session.created"]
    assert [(c.agent, c.binding) for c in created] == [("claude-code", "stream-json")]
    decided = [env.event for env in fleet_log.read(1, "realface.coder")
               if env.kind == "permission.decided"]
    assert [(d.decision, d.by) for d in decided] == [("allow_once", "human")]
    handed = [env.event.text for env in fleet_log.read(1, "fleet:realface")
              if env.kind == "fleet.message.queued" and env.event.target == "reviewer"]
    assert len(handed) == 1 and "Finished: hello.txt is written." in handed[0]
