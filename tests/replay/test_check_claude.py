"""A session with real Claude Code (the pinned peer), recorded, then checked with claude gone."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.harness.conftest import PeerFactory, peer  # noqa: F401 - the fixture
from tests.replay.helpers import NO_AGENTS, assert_clean, cap, sessions_of
from trio_cap.actors.bindings.stream_json.connector import StreamJsonConnector
from trio_cap.actors.model_server import ModelServer, script_from_obj
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.events.kinds import FrameIn, FrameOut, PermissionDecided, TextChunk

pytestmark = pytest.mark.peers


async def test_claude_code_session_recorded_then_checked_without_claude(
    peer: PeerFactory, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
    tmp_path: Path,
) -> None:
    penv, workdir = peer("claude-code")
    monkeypatch.setenv("PATH", penv.env["PATH"])
    target = Path(workdir) / "hello.txt"
    model_server.set_script(script_from_obj({"rules": [
        {"match": "create hello", "text": "On it.",
         "tool_calls": [{"name": "Write", "arguments": {"file_path": str(target),
                                                         "content": "hi\n"}}],
         "then": {"text": "Finished."}},
        {"match": "say something", "thinking": "Let me think.", "text": "first answer here"},
    ]}))
    path = tmp_path / "claude.caplog"
    with trio.fail_after(180):
        async with open_orchestrator(path, grace=10.0) as orch:
            orch.record = "frames"
            orch.connectors["stream-json"] = StreamJsonConnector(env=penv.env,
                                                                 inherit_env=False)
            session = await orch.start_session("claude-code", "stream-json", cwd=workdir,
                                               permissions="allow")
            first = await session.run_turn("say something")
            await session.run_turn("create hello please")
            view = await session.close()
    assert view.status == "completed", view
    assert first.text == "first answer here"
    (recorded,) = sessions_of(path).values()
    kinds = [type(e.event) for e in recorded]
    assert kinds.count(FrameIn) > 5 and kinds.count(FrameOut) >= 3
    assert TextChunk in kinds and PermissionDecided in kinds
    checked = cap("replay", str(path), "--check", cwd=tmp_path, env=NO_AGENTS)
    assert_clean(checked, 0, f"checked {len(recorded)} events of 1 session(s)")
