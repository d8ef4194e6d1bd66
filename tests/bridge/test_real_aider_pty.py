"""A PTY-only agent bridged out as stream-json: the official Claude Agent SDK drives aider.

``cli_path`` runs ``cap-agent --bridge aider --binding pty`` in the pinned aider's
isolated environment: the SDK speaks stream-json to trio-cap's agent side, the
bridge brain drives the real ``aider`` TUI on a pseudo-terminal through the PTY
driver (ready, prompt typed, reply read off the screen) against the scripted
model server.  The SDK's user takes the result message as the answer, so it must
be aider's reply exactly, with none of aider's screen around it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import trio
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ResultMessage,
    TextBlock,
)

from tests.bridge.conftest import BridgeCli
from tests.harness.conftest import PeerFactory
from trio_cap.actors.model_server import ModelServer, script_from_obj

pytestmark = pytest.mark.peers

LIMIT = 200.0


async def test_sdk_drives_aider_over_pty_through_the_bridge(
    bridge_cli: BridgeCli, peer: PeerFactory, model_server: ModelServer
) -> None:
    penv, workdir = peer("aider")
    model_server.set_script(script_from_obj({"rules": [
        {"match": "zzfirst", "text": "aider answers through a terminal"},
        {"match": "zzsecond", "text": "and a second time"}]}))
    cli = bridge_cli("aider", "pty", env=penv.env)

    async def conversation() -> list[list[Any]]:
        turns = []
        opts = ClaudeAgentOptions(cli_path=cli, cwd=str(workdir))
        async with ClaudeSDKClient(options=opts) as client:
            for prompt in ("please zzfirst", "now zzsecond"):
                await client.query(prompt)
                turns.append([m async for m in client.receive_response()])
        return turns

    first, second = await trio.to_thread.run_sync(
        lambda: asyncio.run(asyncio.wait_for(conversation(), LIMIT)))
    for turn, expected in ((first, "aider answers through a terminal"),
                           (second, "and a second time")):
        assert [type(m) for m in turn].count(ResultMessage) == 1, turn
        result = turn[-1]
        assert isinstance(result, ResultMessage) and result.subtype == "success", result
        assert result.result is not None and result.result.strip() == expected, result
        text = "".join(b.text for m in turn if isinstance(m, AssistantMessage)
                       for b in m.content if isinstance(b, TextBlock))
        assert text.strip() == expected, turn
    # aider asked the scripted model once per turn, with the prompt as typed
    chats = [r for r in model_server.records if r["route"] == "openai-chat"]
    assert len(chats) == 2
    assert "please zzfirst" in str(chats[0]["body"]["messages"][-1]["content"])
