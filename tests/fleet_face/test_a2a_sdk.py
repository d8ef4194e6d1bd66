"""The official a2a-sdk client drives ``cap serve a2a --fleet`` (a real server process)
through a two-agent pipeline fleet of scripted agents, in both A2A spellings: the task
streams the fleet's plan and member-named text, a member's permission request makes the
task input-required with the member named, the answer goes back to that member, and the
server's log holds the fleet's events beside the conversation's."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import httpx
import trio
from google.protobuf.json_format import MessageToDict

from tests.fleet.helpers import worktree
from tests.fleet_face.helpers import FAILS, git, make_pipeline
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
from trio_cap.events.log import FileEventLog


def data_parts(events: list[Any]) -> list[dict[str, Any]]:
    """Every data part anywhere in the stream (status messages and artifacts), as dicts."""
    out = []
    for ev in events:
        found = MessageToDict(ev)
        stack: list[Any] = [found]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                if "data" in item and isinstance(item["data"], dict):
                    out.append(item["data"])
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
    return out


async def test_the_a2a_sdk_drives_a_published_fleet(tmp_path: Path, spelling: str) -> None:
    fleet = make_pipeline(tmp_path)
    repo = tmp_path / "repo"
    log = tmp_path / "serve.caplog"
    version = {"1.0": "both", "0.3": "0.3"}[spelling]
    async with serving(["--fleet", str(fleet), "--log", str(log), "--a2a-version", version],
                       tmp_path) as (proc, url):
        async def flow():
            client = await sdk_client(url)
            async with httpx.AsyncClient(timeout=BOUND) as http:
                card = (await http.get(f"{url}/.well-known/agent-card.json")).json()
            turn1 = [ev async for ev in client.send_message(user_message("greet"))]
            task_id, context = ids_of(turn1)
            turn2 = [ev async for ev in client.send_message(
                user_message("", task_id=task_id, context_id=context,
                             data={"kind": "cap.permission.response",
                                   "decision": "allow_once"}))]
            await client.close()
            return card, turn1, turn2, context

        card, turn1, turn2, context = await in_thread(flow)
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(BOUND):
            assert await proc.wait() == 0

    assert card["name"] == "duo"
    # en's write waits on the caller, and the request names en
    assert last_state(turn1) == "TASK_STATE_INPUT_REQUIRED"
    (request,) = [d for d in data_parts(turn1) if d.get("kind") == "cap.permission.request"]
    assert request["tool"] == "Write" and request["_meta"]["cap.member"] == "en"
    assert request["intent"]["path"] == str(worktree(repo, "en") / "hello.txt")
    # the answer let en write; then fr took en's result and wrote its own
    assert last_state(turn2) == "TASK_STATE_COMPLETED"
    assert (worktree(repo, "en") / "hello.txt").read_text() == "hello\n"
    assert (worktree(repo, "fr") / "hello.txt").read_text() == "bonjour\n"
    text = texts_of(turn1 + turn2)
    assert "[en] " in text and "[fr] " in text and "hello.txt says bonjour." in text
    plans = [d for d in data_parts(turn1 + turn2) if d.get("kind") == "cap.plan"]
    assert plans, "the fleet's plan streams as cap.plan data parts"
    last = plans[-1]["entries"]
    assert [(e["content"].split(":")[0], e.get("status")) for e in last] == [
        ("en", "completed"), ("fr", "completed")]

    events = FileEventLog(log, readonly=True)
    kinds = [env.kind for env in events.read(1, "fleet:duo")]
    assert kinds[0] == "fleet.started" and kinds[-1] == "fleet.completed"
    decided = [env.event for env in events.read(1, "duo.en") if env.kind == "permission.decided"]
    assert [(d.decision, d.by) for d in decided] == [("allow_once", "human")]
    face = [env.kind for env in events.read(1, context)]  # the conversation's own session
    assert face[0] == "session.created" and {"cap.plan", "cap.permission.request"} <= set(face)
    assert git(repo, "branch", "--list", "cap/duo/*/fr").strip()


async def test_a_published_fleet_that_fails_fails_the_task(tmp_path: Path) -> None:
    fleet = make_pipeline(tmp_path)
    (tmp_path / "scripts" / "fr.toml").write_text(FAILS)
    text = fleet.read_text().replace('permissions = "ask"\n', "")
    fleet.write_text(text)
    async with serving(["--fleet", str(fleet), "--log", str(tmp_path / "s.caplog")],
                       tmp_path) as (proc, url):
        async def flow():
            client = await sdk_client(url)
            events = [ev async for ev in client.send_message(user_message("greet"))]
            await client.close()
            return events

        events = await in_thread(flow)
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(BOUND):
            assert await proc.wait() == 0
    assert last_state(events) == "TASK_STATE_FAILED"
    errors = [d for d in data_parts(events) if d.get("kind") == "cap.error"]
    assert any(e["code"] == "fleet_failed" and "fr" in e["message"] for e in errors), errors
