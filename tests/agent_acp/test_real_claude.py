"""The official Python ACP SDK client drives real Claude Code *through* trio-cap:
``cap agent --cap-speak acp --bridge claude-code``.

The pinned Claude Code (``cap peers install claude-code``) runs against the
scripted model server in an isolated environment; the bridge drives it over
stream-json and speaks ACP for it, so Claude's own permission prompt reaches
the SDK client as ``session/request_permission``: allowed, Claude writes the
file with its own tool; rejected, it does not, and its model is told why.  A
missing peer fails.  The model server lives in this
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
    refused = workdir / "no.txt"
    model_server.set_script(script_from_obj({
        "default": {"text": "Hello from the bridged model."},
        "rules": [{"match": f"create {word}", "text": "On it.",
                   "tool_calls": [{"name": "Write", "arguments": {
                       "file_path": str(workdir / f"{word}.txt"),
                       "content": f"{word} from claude\n"}}],
                   "then": {"text": f"Finished {word}."}} for word in ("yes", "no")]}))
    before: list[bool] = []

    def answer(call: Any, _options: list[Any]) -> str:
        before.append(target.exists())
        return "allow_once" if call.title.endswith("yes.txt") else "reject_once"

    client = RecordingClient(workdir, answer=answer)

    async def conversation() -> Any:
        async with open_agent(client, "--bridge", "claude-code", "--binding", "stream-json",
                              env=dict(penv.env)) as conn:
            session = await conn.new_session(cwd=str(workdir), mcp_servers=[])
            first = await conn.prompt(session_id=session.session_id,
                                      prompt=[text_block("please create yes.txt")])
            text = client.reply_text()
            second = await conn.prompt(session_id=session.session_id,
                                       prompt=[text_block("please create no.txt")])
            return first, text, second

    response, text, rejected = await trio.to_thread.run_sync(
        lambda: asyncio.run(asyncio.wait_for(conversation(), LIMIT)))
    assert response.stop_reason == "end_turn" and rejected.stop_reason == "end_turn"
    # a rejected Write: Claude did not write, and its model was told why
    assert not refused.exists()
    follow_up = model_server.records[-1]["body"]["messages"][-1]["content"]
    errors = [b for b in follow_up if b.get("type") == "tool_result" and b.get("is_error")]
    assert errors and "rejected" in str(errors[0]["content"])
    # Claude's own Write came to the ACP client before it ran, then Claude wrote the file
    perm = client.permissions[0]
    assert perm.title == f"Write {target}" and perm.kind == "edit"
    assert target.read_text() == "yes from claude\n"
    call = client.of_kind("tool_call")[0]
    assert perm.tool_call_id == call.tool_call_id  # the request names the call shown
    assert call.kind == "edit" and [loc.path for loc in call.locations] == [str(target)]
    statuses = [u.status for u in client.of_kind("tool_call_update") if u.status]
    assert statuses[0] == "completed" and statuses[-1] == "failed"
    assert text.replace("\n", "") == "On it.Finished yes."
    assert before == [False, True]
    # initialize 0, session/new 1, the prompts 2 and 3
    assert nothing_after_response(client.wire, 2) and nothing_after_response(client.wire, 3)
