"""ACP all the way: the official SDK client drives ``cap agent --cap-speak acp --bridge
'acp:cap agent --cap-speak acp'`` — trio-cap's ACP agent side in front of trio-cap's ACP
driver in front of a second ``cap agent``.  The inner agent's permission request reaches the
outer client (the bridge's session asks its human), its write goes through the driver's
fs service, and the diff it reported reaches the outer client on the tool call."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from acp import text_block

from tests.agent_acp.sdk_client import CAP, RecordingClient, open_agent, run


def test_an_acp_agent_bridged_over_acp_keeps_permissions_and_diffs(tmp_path: Path) -> None:
    inner = "acp:" + shlex.join([CAP, "agent", "--cap-speak", "acp"])
    client = RecordingClient(tmp_path)

    async def main() -> Any:
        async with open_agent(client, "--bridge", inner) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            return await conn.prompt(session_id=session.session_id,
                                     prompt=[text_block("write b.txt: nested acp")])

    assert run(main(), limit=90).stop_reason == "end_turn"
    assert (tmp_path / "b.txt").read_text() == "nested acp\n"
    (perm,) = client.permissions
    assert perm.title == f"Write {tmp_path / 'b.txt'}"
    done = [u for u in client.of_kind("tool_call_update") if u.status == "completed"]
    diffs = [c for c in done[0].content if c.type == "diff"]
    assert [(d.path, d.new_text) for d in diffs] == [(str(tmp_path / "b.txt"), "nested acp\n")]
    assert "Wrote 11 bytes to b.txt." in client.reply_text()
