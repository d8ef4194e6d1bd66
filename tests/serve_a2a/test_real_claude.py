"""A bridged real agent published over A2A: ``cap serve a2a --agent claude-code`` (the pinned
Claude Code from ``cap peers install``, on ``cap model serve``) driven by the official a2a-sdk
client through a turn whose Write needs a permission, granted via ``input-required``.

The server is a real process in the peer's isolated environment; the scripted
model runs in this test's Trio loop and the asyncio SDK client in a thread.
A missing peer fails the test (CI installs it first).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.harness.conftest import PeerFactory, model_server, peer  # noqa: F401
from tests.serve_a2a.conftest import (
    BOUND,
    ids_of,
    in_thread,
    last_state,
    sdk_client,
    serving,
    texts_of,
    user_message,
)
from trio_cap.actors.model_server import ModelServer, script_from_obj
from trio_cap.events.kinds import PermissionDecided, PermissionRequest
from trio_cap.events.log import FileEventLog

pytestmark = pytest.mark.peers


@pytest.mark.parametrize("version", ["both", "0.3"])
async def test_sdk_client_drives_real_claude_with_a_permission_round_trip(
        tmp_path: Path, peer: PeerFactory, model_server: ModelServer,  # noqa: F811
        version: str) -> None:
    penv, workdir = peer("claude-code")
    target = workdir / "yes.txt"
    model_server.set_script(script_from_obj({
        "default": {"text": "Hello from the published model."},
        "rules": [{"match": "create yes", "text": "On it.",
                   "tool_calls": [{"name": "Write", "arguments": {
                       "file_path": str(target), "content": "yes from claude\n"}}],
                   "then": {"text": "Finished yes."}}]}))
    log = tmp_path / "served.caplog"
    async with serving(["--agent", "claude-code", "--binding", "stream-json", "--log",
                        str(log), "--a2a-version", version], workdir,
                       env=penv.env) as (proc, url):
        async def flow():
            client = await sdk_client(url)
            hello = [ev async for ev in client.send_message(user_message("say hello"))]
            _, context = ids_of(hello)
            asked = [ev async for ev in client.send_message(
                user_message("please create yes.txt", context_id=context))]
            task_id, _ = ids_of(asked)
            written_before = target.exists()
            granted = [ev async for ev in client.send_message(
                user_message("allow", task_id=task_id, context_id=context))]
            await client.close()
            return hello, asked, written_before, granted

        hello, asked, written_before, granted = await in_thread(flow)
        assert last_state(hello) == "TASK_STATE_COMPLETED"
        assert "Hello from the published model." in texts_of(hello)
        assert last_state(asked) == "TASK_STATE_INPUT_REQUIRED"
        request = asked[-1].status_update.status.message.parts[1].data.struct_value
        assert request["kind"] == "cap.permission.request" and request["tool"] == "Write"
        assert not written_before  # asked before the write, not after
        assert last_state(granted) == "TASK_STATE_COMPLETED"
        assert "Finished yes." in texts_of(granted)
        assert target.read_text() == "yes from claude\n"
        proc.terminate()
        with trio.fail_after(BOUND):
            assert await proc.wait() == 0
    reader = FileEventLog(log, readonly=True)
    try:
        events = [e.event for e in reader.read(1)]
    finally:
        reader.close()
    requests = [e for e in events if isinstance(e, PermissionRequest)]
    decided = [e for e in events if isinstance(e, PermissionDecided)]
    assert [r.tool for r in requests] == ["Write"]
    assert [(d.decision, d.by) for d in decided] == [("allow_once", "human")]
