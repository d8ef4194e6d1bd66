"""The official Python Claude Agent SDK drives ``cap-agent`` through a bridge of itself.

``cli_path`` is ``cap-agent --bridge cap-agent --binding stream-json``: the SDK
talks stream-json to the agent side, the bridge brain drives a second
``cap-agent`` process through the stream-json *driver*, and everything the
driven agent says comes back out — so both directions of the binding and the
bridge are on the path.  Plain functions running their own asyncio loop, every
wait bounded.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from tests.bridge.conftest import BridgeCli

LIMIT = 90.0


def run(coro) -> Any:
    return asyncio.run(asyncio.wait_for(coro, LIMIT))


def texts(messages: list[Any]) -> str:
    return "".join(b.text for m in messages if isinstance(m, AssistantMessage)
                   for b in m.content if isinstance(b, TextBlock))


def test_multi_turn_text_and_a_permission_round_trip(bridge_cli: BridgeCli, tmp_path: Path):
    cli = bridge_cli("cap-agent", "stream-json")
    work = tmp_path / "work"
    work.mkdir()
    asked: list[tuple[str, dict]] = []

    async def can_use_tool(tool: str, tool_input: dict, _context) -> Any:
        asked.append((tool, tool_input))
        if tool == "Bash":
            return PermissionResultAllow(updated_input={"command": "echo rewritten"})
        if tool_input["file_path"].endswith("yes.txt"):
            return PermissionResultAllow()
        return PermissionResultDeny(message="no writes today")

    async def conversation() -> list[list[Any]]:
        turns = []
        opts = ClaudeAgentOptions(cli_path=cli, cwd=str(work), can_use_tool=can_use_tool)
        async with ClaudeSDKClient(options=opts) as client:
            for prompt in ("hello bridge", "write yes.txt: allowed", "write no.txt: nope",
                           "run: echo original", "bye now"):
                await client.query(prompt)
                turns.append([m async for m in client.receive_response()])
        return turns

    first, allowed, denied, rewritten, last = run(conversation())
    # every turn ends with exactly one result
    for turn in (first, allowed, denied, rewritten, last):
        assert [type(m) for m in turn].count(ResultMessage) == 1
        assert isinstance(turn[-1], ResultMessage)
    assert first[-1].subtype == "success"
    assert 'You said: "hello bridge"' in first[-1].result == texts(first)
    assert 'You said: "bye now"' in last[-1].result
    # the bridge's init: the agent side's own session, through the driven agent
    init = next(m for m in first if isinstance(m, SystemMessage) and m.subtype == "init")
    assert init.data["cwd"] == str(work)
    # the driven agent's Write reached can_use_tool in Claude Code's shape, both times
    assert asked[:2] == [
        ("Write", {"file_path": str(work / "yes.txt"), "content": "allowed\n"}),
        ("Write", {"file_path": str(work / "no.txt"), "content": "nope\n"})]
    assert (work / "yes.txt").read_text() == "allowed\n"
    assert not (work / "no.txt").exists()
    (tool_use,) = [b for m in allowed if isinstance(m, AssistantMessage) for b in m.content
                   if isinstance(b, ToolUseBlock)]
    assert tool_use.input == {"file_path": str(work / "yes.txt"), "content": "allowed\n"}
    (deny_result,) = [b for m in denied if isinstance(m, UserMessage) for b in m.content
                      if isinstance(b, ToolResultBlock)]
    assert deny_result.is_error and deny_result.content == "no writes today"
    assert [d["tool_name"] for d in denied[-1].permission_denials] == ["Write"]
    # allow with updatedInput: the rewritten command ran in the driven agent
    assert asked[2] == ("Bash", {"command": "echo original"})
    (bash_result,) = [b for m in rewritten if isinstance(m, UserMessage) for b in m.content
                      if isinstance(b, ToolResultBlock)]
    assert bash_result.content == "rewritten\n" and not bash_result.is_error
    # usage flowed through: the driven agent's turns were counted
    assert all(t[-1].usage and t[-1].usage["input_tokens"] > 0 for t in (first, last))


def test_interrupt_through_the_bridge(bridge_cli: BridgeCli, tmp_path: Path):
    cli = bridge_cli("cap-agent", "stream-json")

    async def conversation() -> tuple[list[Any], list[Any]]:
        opts = ClaudeAgentOptions(cli_path=cli, cwd=str(tmp_path),
                                  include_partial_messages=True)
        async with ClaudeSDKClient(options=opts) as client:
            await client.query("think: about to wait\nwait 60")
            seen: list[Any] = []
            interrupted = False
            async for m in client.receive_response():
                seen.append(m)
                delta = m.event.get("delta", {}) if isinstance(m, StreamEvent) else {}
                if delta.get("type") == "thinking_delta" and not interrupted:
                    interrupted = True  # the driven turn is visibly running
                    await client.interrupt()
            await client.query("after the interrupt")
            return seen, [m async for m in client.receive_response()]

    cancelled, after = run(conversation())
    assert cancelled[-1].subtype == "error_during_execution"
    assert after[-1].subtype == "success" and "after the interrupt" in after[-1].result
