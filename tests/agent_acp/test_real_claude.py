"""The official Python ACP SDK client drives real Claude Code *through* trio-cap:
``cap agent --cap-speak acp --bridge claude-code``.

The pinned Claude Code (``cap peers install claude-code``) runs against the
scripted model server in an isolated environment; the bridge drives it over
stream-json and speaks ACP for it, so Claude's own permission prompt reaches
the SDK client as ``session/request_permission`` and Claude writes the file
with its own tool.  A missing peer fails.  The model server lives in this
test's Trio loop, so the asyncio SDK runs in a thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import trio
from acp import text_block

from tests.agent_acp.sdk_client import RecordingClient, nothing_after_response, open_agent
from tests.harness.conftest import PeerFactory
from trio_cap.actors.model_server import ModelServer, script_from_obj

pytestmark = pytest.mark.peers

LIMIT = 150.0


async def test_an_acp_client_drives_real_claude_code_through_the_bridge(
        peer: PeerFactory, model_server: ModelServer) -> None:
    penv, workdir = peer("claude-code")
    target = workdir / "yes.txt"
    model_server.set_script(script_from_obj({
        "default": {"text": "Hello from the bridged model."},
        "rules": [{"match": "create yes", "text": "On it.",
                   "tool_calls": [{"name": "Write", "arguments": {
                       "file_path": str(target), "content": "yes from claude\n"}}],
                   "then": {"text": "Finished yes."}}]}))
    before: list[bool] = []

    def answer(_call: Any, _options: list[Any]) -> str:
        before.append(target.exists())
        return "allow_once"

    client = RecordingClient(workdir, answer=answer)

    async def conversation() -> Any:
        async with open_agent(client, "--bridge", "claude-code", "--binding", "stream-json",
                              env=dict(penv.env)) as conn:
            session = await conn.new_session(cwd=str(workdir), mcp_servers=[])
            return await conn.prompt(session_id=session.session_id,
                                     prompt=[text_block("please create yes.txt")])

    response = await trio.to_thread.run_sync(
        lambda: asyncio.run(asyncio.wait_for(conversation(), LIMIT)))
    assert response.stop_reason == "end_turn"
    # Claude's own Write came to the ACP client before it ran, then Claude wrote the file
    (perm,) = client.permissions
    assert perm.title == f"Write {target}" and perm.kind == "edit"
    assert before == [False]
    assert target.read_text() == "yes from claude\n"
    (call,) = client.of_kind("tool_call")
    assert call.kind == "edit" and [loc.path for loc in call.locations] == [str(target)]
    statuses = [u.status for u in client.of_kind("tool_call_update")]
    assert statuses[-1] == "completed"
    assert client.reply_text().replace("\n", "") == "On it.Finished yes."
    assert nothing_after_response(client.wire, 2)  # initialize 0, session/new 1, prompt 2
