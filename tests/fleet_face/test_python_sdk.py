"""The official Python Claude Agent SDK drives ``cap-agent --fleet`` (a two-worker
fan-out/join fleet of scripted agents) as if it were one agent.

``cli_path`` is a two-line wrapper that execs ``cap-agent --fleet FLEET "$@"``, the way
the SDK tests in ``tests/agent_stream_json`` point the SDK at ``cap-agent``.  The SDK is
asyncio-based, so each test is a plain function with its own loop; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultAllow,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ToolUseBlock,
)

from tests.fleet.helpers import worktree
from tests.fleet_face.helpers import FAILS, git, make_fleet
from trio_cap.events.log import FileEventLog

LIMIT = 90.0


def wrapper(cap_agent: str, fleet: Path, tmp_path: Path, *extra: str) -> str:
    path = tmp_path / "bin" / "claude"
    path.parent.mkdir()
    flags = " ".join(f"'{e}'" for e in extra)
    path.write_text(f"#!/bin/sh\nexec '{cap_agent}' --fleet '{fleet}' {flags} \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


async def one_turn(cli: str, cwd: Path, prompt: str, asked: list[tuple[str, dict, Any]]):
    async def can_use_tool(tool: str, tool_input: dict, context) -> Any:
        asked.append((tool, tool_input, context))
        return PermissionResultAllow()

    opts = ClaudeAgentOptions(cli_path=cli, cwd=str(cwd), can_use_tool=can_use_tool)
    async with ClaudeSDKClient(options=opts) as client:
        await client.query(prompt)
        return [m async for m in client.receive_response()]


def test_the_sdk_drives_a_fan_out_join_fleet_as_one_agent(cap_agent, tmp_path):
    fleet = make_fleet(tmp_path)
    log = tmp_path / "face.caplog"
    cli = wrapper(cap_agent, fleet, tmp_path, "--log", str(log))
    repo = tmp_path / "repo"
    asked: list[tuple[str, dict, Any]] = []
    messages = asyncio.run(asyncio.wait_for(
        one_turn(cli, repo, "Add a greeting in two languages", asked), LIMIT))

    # en's write (its policy is ask) reached the client, named after en, with its path
    ((tool, tool_input, context),) = asked
    assert tool == "Write" and context.agent_id == "en"
    assert tool_input["file_path"] == str(worktree(repo, "en") / "hello.txt")
    # both workers ran, each in its own worktree; their diffs are in the fleet's log
    assert (worktree(repo, "en") / "hello.txt").read_text() == "hello\n"
    assert (worktree(repo, "fr") / "hello.txt").read_text() == "bonjour\n"
    texts = [b.text for m in messages if isinstance(m, AssistantMessage) for b in m.content
             if isinstance(b, TextBlock)]
    assert texts[0] == "[lead] English greeting to en, French greeting to fr."
    assert any(t.startswith("[en] ") and "hello.txt says hello." in t for t in texts)
    assert any(t.startswith("[fr] ") and "hello.txt says bonjour." in t for t in texts)
    # the plan streams as TodoWrite; the last one has every message completed
    todos = [b.input["todos"] for m in messages if isinstance(m, AssistantMessage)
             for b in m.content if isinstance(b, ToolUseBlock) and b.name == "TodoWrite"]
    assert len(todos) >= 3
    assert todos[0][0]["content"].startswith("lead: Add a greeting")
    assert [(t["content"].split(":")[0], t["status"]) for t in todos[-1]] == [
        ("lead", "completed"), ("en", "completed"), ("fr", "completed"), ("lead", "completed")]
    # the result is the fleet's answer, and nothing follows it
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.subtype == "success"
    assert result.result == "Both greetings are written."
    assert sum(isinstance(m, ResultMessage) for m in messages) == 1
    assert isinstance(messages[0], SystemMessage) and messages[0].subtype == "init"

    fleet_log = FileEventLog(tmp_path / "face.fleet.caplog", readonly=True)
    kinds = [env.kind for env in fleet_log.read(1, "fleet:face")]
    assert kinds[0] == "fleet.started" and kinds[-1] == "fleet.completed"
    assert kinds.count("fleet.route") == 2  # the fan-out and the join
    diffs = {env.event.meta["cap.member"]: env.event.content
             for env in fleet_log.read(1, "fleet:face") if env.kind == "cap.artifact"}
    assert "+hello" in diffs["en"] and "+bonjour" in diffs["fr"]
    decided = [env.event for env in fleet_log.read(1, "face.en")
               if env.kind == "permission.decided"]
    assert [(d.decision, d.by) for d in decided] == [("allow_once", "human")]
    assert git(repo, "branch", "--list", "cap/face/*/fr").strip()


def test_a_fleet_that_fails_ends_with_an_error_result_last(cap_agent, tmp_path):
    fleet = make_fleet(tmp_path, en_permissions="allow", fr_script=FAILS)
    cli = wrapper(cap_agent, fleet, tmp_path)
    messages = asyncio.run(asyncio.wait_for(
        one_turn(cli, tmp_path / "repo", "greet", []), LIMIT))
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.is_error
    assert result.subtype == "error_during_execution"
    assert any("fr" in e and "fleet_failed" in e for e in result.errors or [])
    assert sum(isinstance(m, ResultMessage) for m in messages) == 1
