"""The official ACP Python SDK's client drives ``cap agent --cap-speak acp --fleet`` (a
two-worker fan-out/join of scripted agents): the plan arrives as ``session/update``
plans, the members' text is named, en's write is a ``session/request_permission`` whose
title names en, and the prompt's response comes after every update of its turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp import text_block

from tests.agent_acp.sdk_client import RecordingClient, nothing_after_response, open_agent
from tests.agent_acp.sdk_client import run as run_acp
from tests.fleet.helpers import worktree
from tests.fleet_face.helpers import make_fleet
from trio_cap.events.log import FileEventLog


def test_an_acp_client_drives_a_fleet_as_one_agent(tmp_path: Path) -> None:
    fleet = make_fleet(tmp_path)
    repo = tmp_path / "repo"
    client = RecordingClient(repo)
    log = tmp_path / "acp.caplog"

    async def main() -> Any:
        async with open_agent(client, "--fleet", str(fleet), "--log", str(log)) as conn:
            session = await conn.new_session(cwd=str(repo), mcp_servers=[])
            reply = await conn.prompt(session_id=session.session_id,
                                      prompt=[text_block("greet")])
            return session.session_id, reply

    session_id, reply = run_acp(main(), limit=90)
    assert reply.stop_reason == "end_turn"
    (perm,) = client.permissions
    assert perm.title.startswith("en: Write") and perm.title.endswith("hello.txt")
    assert (worktree(repo, "en") / "hello.txt").read_text() == "hello\n"
    assert (worktree(repo, "fr") / "hello.txt").read_text() == "bonjour\n"
    text = client.reply_text()
    for said in ("[lead] English greeting", "[en] ", "[fr] ", "hello.txt says bonjour."):
        assert said in text
    assert text.endswith("Both greetings are written.")
    plans = client.of_kind("plan")
    assert plans and [(e.content.split(":")[0], e.status) for e in plans[-1].entries] == [
        ("lead", "completed"), ("en", "completed"), ("fr", "completed"), ("lead", "completed")]
    prompt_id = next(m["id"] for way, m in client.wire
                     if way == "out" and m.get("method") == "session/prompt")
    assert nothing_after_response(client.wire, prompt_id)
    # one fleet log per ACP session, beside --log
    fleet_log = FileEventLog(tmp_path / f"acp.fleet.{session_id}.caplog", readonly=True)
    kinds = [env.kind for env in fleet_log.read(1, "fleet:face")]
    assert kinds[0] == "fleet.started" and kinds[-1] == "fleet.completed"
