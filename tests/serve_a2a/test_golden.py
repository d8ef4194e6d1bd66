"""Recorded traffic: what the publisher writes for a fixed conversation, byte for byte.

cap-agent with deterministic ids answers a text turn, asks a question and gets
its answer, once in each spelling; the SSE bodies (timestamps blanked and usage
durations dropped: clock reads vary with scheduling) must equal ``golden/*.sse``.  A change
to the wire shows up here as a diff to review, not as a silent drift.
Regenerate with ``CAP_GOLDEN_WRITE=1``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import httpx
import pytest

from trio_cap.actors.bindings.a2a.serve_server import open_a2a_server
from trio_cap.actors.bindings.a2a.serve_sessions import SessionOptions
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.orchestrator import open_orchestrator, resolve

GOLDEN = Path(__file__).with_name("golden")
_STAMP = re.compile(rb'"timestamp":"[^"]*"')
# A turn's duration is left out when the clock read gives 0 ms, so the field
# itself comes and goes with scheduling: drop it, not just its value.
_DURATION = re.compile(rb',?"duration_ms":[0-9.]+')


def _message(spelling: str, text: str, task: str = "", context: str = "") -> dict:
    if spelling == "1.0":
        message = {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]}
    else:
        message = {"kind": "message", "messageId": f"m-{text}", "role": "user",
                   "parts": [{"kind": "text", "text": text}]}
    if task:
        message |= {"taskId": task, "contextId": context}
    return message


@pytest.mark.parametrize("spelling", ["1.0", "0.3"])
async def test_a_conversation_matches_its_recording(tmp_path: Path, spelling: str) -> None:
    method = "SendStreamingMessage" if spelling == "1.0" else "message/stream"
    headers = {"A2A-Version": "1.0"} if spelling == "1.0" else {}
    agent = await resolve("cap-agent")
    bodies = []
    async with open_orchestrator(ids=SequentialIds()) as orch, open_a2a_server(
            orch, agent, options=SessionOptions(cwd=str(tmp_path))) as server, \
            httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
        async def stream(n: int, message: dict) -> bytes:
            response = await http.post("/a2a/jsonrpc", headers=headers, json={
                "jsonrpc": "2.0", "id": n, "method": method, "params": {"message": message}})
            return response.content

        bodies.append(await stream(1, _message(spelling, "hello")))
        context = json.loads(bodies[0].split(b"\n")[0][6:])["result"]
        context = (context.get("task") or context)["contextId"]
        asked = await stream(2, {**_message(spelling, "ask: which? [a|b]"),
                                 "contextId": context})
        bodies.append(asked)
        first = json.loads(asked.split(b"\n")[0][6:])["result"]
        task = (first.get("task") or first)["id"]
        bodies.append(await stream(3, _message(spelling, "b", task, context)))
    recorded = b"".join(_STAMP.sub(b'"T"', _DURATION.sub(b"", body)) for body in bodies)
    golden = GOLDEN / f"conversation-{spelling}.sse"
    if os.environ.get("CAP_GOLDEN_WRITE"):
        GOLDEN.mkdir(exist_ok=True)
        golden.write_bytes(recorded)
    if recorded != golden.read_bytes():
        (tmp_path / "got.sse").write_bytes(recorded)
        print("GOT", tmp_path / "got.sse")
    assert recorded == golden.read_bytes()
