"""The official Python Claude Agent SDK drives real Claude Code *through* trio-cap's bridge.

``cli_path`` is ``cap-agent --bridge claude-code --binding stream-json`` in the
pinned peer's isolated environment: the SDK speaks stream-json to trio-cap's
agent side, the bridge brain drives the pinned ``claude`` through the
stream-json driver against the scripted model server, and Claude's permission
prompts come back to the SDK's ``can_use_tool``.  A missing peer fails.  The
model server runs in the test's Trio loop, so the asyncio SDK runs in a thread.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import trio
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    TextBlock,
    ToolResultBlock,
    UserMessage,
)

from tests.bridge.conftest import BridgeCli
from tests.harness.conftest import PeerFactory
from trio_cap.actors.model_server import ModelServer, script_from_obj

pytestmark = pytest.mark.peers

LIMIT = 150.0


def write_rule(word: str, target: Path) -> dict[str, Any]:
    return {"match": f"create {word}", "text": "On it.",
            "tool_calls": [{"name": "Write", "arguments": {"file_path": str(target),
                                                            "content": f"{word} from claude\n"}}],
            "then": {"text": f"Finished {word}."}}


async def test_sdk_drives_real_claude_through_the_bridge(
    bridge_cli: BridgeCli, peer: PeerFactory, model_server: ModelServer
) -> None:
    penv, workdir = peer("claude-code")
    yes, no = workdir / "yes.txt", workdir / "no.txt"
    model_server.set_script(script_from_obj({
        "default": {"text": "Hello from the bridged model."},
        "rules": [write_rule("yes", yes), write_rule("no", no)]}))
    cli = bridge_cli("claude-code", "stream-json", env=penv.env)
    asked: list[tuple[str, dict]] = []

    async def can_use_tool(tool: str, tool_input: dict, _context) -> Any:
        asked.append((tool, tool_input))
        if tool_input.get("file_path", "").endswith("yes.txt"):
            assert not yes.exists()  # asked before the write, not after
            return PermissionResultAllow()
        return PermissionResultDeny(message="not this one")

    async def conversation() -> list[list[Any]]:
        turns = []
        opts = ClaudeAgentOptions(cli_path=cli, cwd=str(workdir), can_use_tool=can_use_tool)
        async with ClaudeSDKClient(options=opts) as client:
            for prompt in ("say hello", "please create yes.txt", "please create no.txt"):
                await client.query(prompt)
                turns.append([m async for m in client.receive_response()])
        return turns

    # the model server lives in this test's Trio loop; the asyncio SDK runs in a thread
    hello, allowed, denied = await trio.to_thread.run_sync(
        lambda: asyncio.run(asyncio.wait_for(conversation(), LIMIT)))
    for turn in (hello, allowed, denied):
        assert [type(m) for m in turn].count(ResultMessage) == 1, turn
    # a text turn with the real model's reply, once (partial messages never doubled it)
    assert hello[-1].subtype == "success", hello[-1]
    assert hello[-1].result == "Hello from the bridged model."
    text = "".join(b.text for m in hello if isinstance(m, AssistantMessage) for b in m.content
                   if isinstance(b, TextBlock))
    assert text == "Hello from the bridged model."
    assert hello[-1].usage and hello[-1].usage["input_tokens"] > 0
    # real Claude's Write reached can_use_tool, in Claude's own shape, both times
    assert [(t, i.get("file_path")) for t, i in asked] == [
        ("Write", str(yes)), ("Write", str(no))]
    assert asked[0][1]["content"] == "yes from claude\n"
    # allow → written; deny → not written, the model saw an error tool result
    assert yes.read_text() == "yes from claude\n"
    assert allowed[-1].subtype == "success" and allowed[-1].result == "Finished yes."
    assert not no.exists()
    (deny_result,) = [b for m in denied if isinstance(m, UserMessage) for b in m.content
                      if isinstance(b, ToolResultBlock)]
    assert deny_result.is_error
    assert [d["tool_name"] for d in denied[-1].permission_denials] == ["Write"]
    follow_up = model_server.records[-1]["body"]["messages"][-1]["content"]
    refusals = [b for b in follow_up if b.get("type") == "tool_result" and b.get("is_error")]
    assert refusals and "not this one" in str(refusals[0]["content"])  # the client's reason


async def test_real_claude_asking_through_the_bridge_reaches_the_sdk_and_gets_the_answer(
    bridge_cli: BridgeCli, peer: PeerFactory, model_server: ModelServer
) -> None:
    penv, workdir = peer("claude-code")
    question = {"questions": [{"question": "Which database?", "header": "DB",
                               "multiSelect": False,
                               "options": [{"label": "postgres", "description": "server"},
                                           {"label": "sqlite", "description": "a file"}]}]}
    model_server.set_script(script_from_obj({"rules": [{
        "match": "pick a database", "text": "Let me ask.",
        "tool_calls": [{"name": "AskUserQuestion", "arguments": question}],
        "then": {"text": "Going with your choice."}}]}))
    cli = bridge_cli("claude-code", "stream-json", env=penv.env)
    asked: list[tuple[str, dict]] = []

    async def can_use_tool(tool: str, tool_input: dict, _context) -> Any:
        asked.append((tool, tool_input))
        question = tool_input["questions"][0]["question"]
        return PermissionResultAllow(updated_input={**tool_input,
                                                    "answers": {question: "sqlite"}})

    async def conversation() -> list[Any]:
        opts = ClaudeAgentOptions(cli_path=cli, cwd=str(workdir), can_use_tool=can_use_tool)
        async with ClaudeSDKClient(options=opts) as client:
            await client.query("pick a database for me")
            return [m async for m in client.receive_response()]

    turn = await trio.to_thread.run_sync(
        lambda: asyncio.run(asyncio.wait_for(conversation(), LIMIT)))
    assert turn[-1].subtype == "success" and turn[-1].result == "Going with your choice."
    ((tool, tool_input),) = asked
    assert tool == "AskUserQuestion"
    assert tool_input["questions"][0]["question"] == "Which database?"
    labels = [o["label"] for o in tool_input["questions"][0]["options"]]
    assert labels == ["postgres", "sqlite"]
    follow_up = model_server.records[-1]["body"]["messages"][-1]["content"]
    results = [b for b in follow_up if b.get("type") == "tool_result"]
    assert results and "sqlite" in str(results[0]["content"])  # real Claude got the answer
