"""A full turn through Gemini's real A2A server (draft spelling) on ``cap model serve``.

The server binds every interface, so the whole scenario runs in its own
loopback-only network namespace (``unshare -n``; ``gemini_netns.py``): no
port of it is ever reachable from outside the namespace.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import msgspec
import pytest
import trio

from trio_cap.actors.peers.install import PeerMissing, find_binary
from trio_cap.events.kinds import AgentRaw, SessionTurnEnded, TextChunk
from trio_cap.events.log import FileEventLog

HERE = Path(__file__).resolve().parent


@pytest.mark.peers
async def test_one_turn_through_geminis_a2a_server() -> None:
    try:
        find_binary("gemini-a2a-server")
    except PeerMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    assert shutil.which("unshare") and shutil.which("ip"), "needs util-linux unshare and iproute2"
    with trio.fail_after(400):
        done = await trio.run_process(
            ["unshare", "-n", sys.executable, str(HERE / "gemini_netns.py")],
            capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    result = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert result["returncode"] == 0, result["stderr"][-2000:]
    assert result["model_requests"] >= 1
    assert "hello from the scripted model via A2A" in result["stdout"]
    async with await FileEventLog.open(result["log"]) as log:
        events = [env.event for env in log.read(1)]
    text = "".join(e.text for e in events if type(e) is TextChunk)
    assert "hello from the scripted model via A2A" in text
    assert [e.stop_reason for e in events if type(e) is SessionTurnEnded] == ["end_turn"]
    raws = [e for e in events if type(e) is AgentRaw]
    assert not [r for r in raws if r.reason.startswith("a2a_malformed")], \
        msgspec.json.encode(raws).decode()[:2000]
