"""Every client method an ACP agent can call, served by trio-cap and checked from the agent.

The agent is ``exerciser_agent.py`` on the official Python SDK (run with the
``acp-python-sdk`` peer's interpreter): each prompt is a JSON list of calls and
its reply is what the SDK got back, so these tests see the wire results
exactly as an agent does.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.driver_acp.conftest import sdk_python
from trio_cap.actors.orchestrator import Orchestrator, Session
from trio_cap.actors.session.actor import CommandRefused
from trio_cap.events.kinds import (
    Artifact,
    AskUser,
    CapError,
    PermissionDecided,
    PermissionRequest,
    ToolCallEnd,
)

pytestmark = pytest.mark.peers  # the official SDKs' peers (cap peers install)

SECONDS = 60
EXERCISER = Path(__file__).with_name("exerciser_agent.py")


def agent() -> str:
    return "acp:" + shlex.join([str(sdk_python()), str(EXERCISER)])


def log_of(orch: Orchestrator, session: Session, kind: type) -> list[Any]:
    return [env.event for env in orch.log.read(1, session.id) if type(env.event) is kind]


async def run(session: Session, *steps: dict[str, Any]) -> list[dict[str, Any]]:
    turn = await session.run_turn(json.dumps(list(steps)))
    assert turn.stop_reason == "end_turn", turn
    return json.loads(turn.text)


async def start(orch: Orchestrator, workdir: Path, **kwargs: Any) -> Session:
    kwargs.setdefault("permissions", "allow")
    return await orch.start_session(agent(), "acp", cwd=workdir, **kwargs)


async def test_initialize_shows_what_trio_cap_serves(orch: Orchestrator, workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        session = await start(orch, workdir)
        (caps,) = await run(session, {"call": "caps"})
        await session.close()
    caps = caps["ok"]
    assert caps["fs"] == {"readTextFile": True, "writeTextFile": True, "_meta": None}
    assert caps["terminal"] is True
    assert caps["elicitation"]["form"] is not None and caps["elicitation"]["url"] is None


async def test_write_then_read_lines_and_the_turn_diff(orch: Orchestrator, workdir: Path) -> None:
    target = workdir / "sub" / "notes.txt"
    with trio.fail_after(SECONDS):
        session = await start(orch, workdir)
        wrote, part, missing = await run(
            session,
            {"call": "write", "path": str(target), "content": "a\nb\nc\nd\n"},
            {"call": "read", "path": str(target), "line": 2, "limit": 2},
            {"call": "read", "path": str(workdir / "nope.txt")})
        await session.close()
    assert wrote == {"ok": None} or wrote == {"ok": {"_meta": None}}
    assert target.read_text() == "a\nb\nc\nd\n"
    assert part == {"ok": {"content": "b\nc\n", "_meta": None}}
    assert missing["error"]["code"] == -32002
    decided = log_of(orch, session, PermissionDecided)
    assert [(d.decision, d.risk) for d in decided] == [("allow_once", "medium")]
    assert log_of(orch, session, PermissionRequest)[0].tool == "Write"
    (diff,) = log_of(orch, session, Artifact)
    assert diff.mime_type == "application/vnd.cap.coding.diff.v1+text"
    assert "+++ b/sub/notes.txt" in (diff.content or "") and "+b" in (diff.content or "")


async def test_policy_refuses_a_write_outside_the_workspace(
        orch: Orchestrator, workdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    with trio.fail_after(SECONDS):
        session = await start(orch, workdir)
        (wrote,) = await run(session, {"call": "write", "path": str(outside), "content": "x"})
        await session.close()
    assert wrote["error"]["code"] == -32603 and "permission denied" in wrote["error"]["message"]
    assert not outside.exists()
    assert log_of(orch, session, PermissionDecided)[0].risk == "high"


def _no_oracle(errors: list[dict[str, Any]], paths: list[str]) -> None:
    """Every refusal has the same code and the same words once its own path is taken out."""
    codes = {e["error"]["code"] for e in errors}
    shapes = {e["error"]["message"].replace(p, "PATH") for e, p in zip(errors, paths,
                                                                      strict=True)}
    assert len(codes) == 1 and len(shapes) == 1, errors


async def test_reads_outside_the_scope_never_escape_and_reveal_nothing(
        orch: Orchestrator, workdir: Path, tmp_path: Path) -> None:
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    (secret_dir / "key").write_text("TOP SECRET")
    (workdir / "link").symlink_to(secret_dir)
    (workdir / "filelink").symlink_to(secret_dir / "key")
    paths = [str(workdir / ".." / "secret" / "key"), str(workdir / ".." / "secret" / "none"),
             str(secret_dir / "key"), str(tmp_path / "missing" / "x"), "/etc/passwd",
             str(workdir / "link" / "key"), str(workdir / "link" / "none"),
             str(workdir / "filelink")]
    with trio.fail_after(SECONDS):
        session = await start(orch, workdir, permissions="bypass")
        results = await run(session, *({"call": "read", "path": p} for p in paths))
        await session.close()
    assert all("error" in r for r in results), results
    assert "TOP SECRET" not in json.dumps(results)
    _no_oracle(results, paths)
    errors = log_of(orch, session, CapError)
    assert [e.code for e in errors] == ["cap_scope_violation"] * len(paths)


async def test_writes_outside_the_scope_are_refused_even_unvetted(
        orch: Orchestrator, workdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "out"
    outside.mkdir()
    (workdir / "link").symlink_to(outside)
    (workdir / "dangling").symlink_to(outside / "new.txt")
    paths = [str(workdir / ".." / "out" / "a.txt"), str(outside / "b.txt"),
             str(workdir / "link" / "c.txt"), str(workdir / "dangling")]
    with trio.fail_after(SECONDS):
        session = await start(orch, workdir, permissions="bypass")  # no vetting: fs confines
        results = await run(session, *({"call": "write", "path": p, "content": "x"}
                                       for p in paths))
        await session.close()
    assert all("error" in r for r in results), results
    _no_oracle(results, paths)
    assert list(outside.iterdir()) == []


async def test_relative_path_is_refused(orch: Orchestrator, workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        session = await start(orch, workdir, permissions="bypass")
        (result,) = await run(session, {"call": "read", "path": "notes.txt"})
        await session.close()
    assert result["error"]["code"] == -32602 and "absolute" in result["error"]["message"]


async def test_terminal_output_limit_keeps_the_tail_on_a_character_boundary(
        orch: Orchestrator, workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        session = await start(orch, workdir, allow_high_risk=True)
        plain, utf8, env = await run(
            session,
            {"call": "terminal", "command": "sh", "args": ["-c", "printf 0123456789abcdefghijXYZ"
                                                            "; exit 3"], "limit": 20},
            {"call": "terminal", "command": "sh", "args": ["-c", "printf 'éééééééééé'"],
             "limit": 7},
            {"call": "terminal", "command": "sh", "args": ["-c", 'printf "$GREETING"'],
             "env": {"GREETING": "hi there"}})
        await session.close()
    plain = plain["ok"]
    assert plain["exit"] == {"exitCode": 3, "signal": None, "_meta": None}
    assert plain["output"]["output"] == "3456789abcdefghijXYZ"
    assert plain["output"]["truncated"] is True
    assert plain["output"]["exitStatus"]["exitCode"] == 3
    assert plain["after_release"] == -32002
    text = utf8["ok"]["output"]["output"]
    assert text == "ééé" and utf8["ok"]["output"]["truncated"] is True  # 6 of 7 bytes: whole é
    assert env["ok"]["output"] == {"output": "hi there", "truncated": False,
                                   "exitStatus": {"exitCode": 0, "signal": None, "_meta": None},
                                   "_meta": None}


async def test_terminal_kill_and_release(orch: Orchestrator, workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        session = await start(orch, workdir)
        (killed,) = await run(session, {"call": "terminal", "command": "sleep", "args": ["30"],
                                        "kill": True})
        await session.close()
    killed = killed["ok"]
    assert "exitStatus" not in killed["early"] or killed["early"]["exitStatus"] is None
    assert killed["exit"]["exitCode"] is None and killed["exit"]["signal"] == "SIGTERM"
    assert killed["output"]["exitStatus"]["signal"] == "SIGTERM"
    assert killed["after_release"] == -32002


def group_members(pgid: int) -> list[tuple[int, str]]:
    """(pid, state) of every process whose process group is ``pgid``, from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # gone meanwhile
        fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "
        if int(fields[2]) == pgid:
            members.append((int(stat.parent.name), fields[0]))
    return members


async def test_terminal_kill_escalates_to_sigkill_and_ends_the_whole_group(
        orch: Orchestrator, workdir: Path) -> None:
    # the shell and its background child ignore SIGTERM; the kill must not stop there
    script = 'trap "" TERM; sleep 3600 & echo "group $$ child $!"; wait'
    with trio.fail_after(SECONDS):
        session = await start(orch, workdir, allow_high_risk=True)
        (killed,) = await run(session, {"call": "terminal", "command": "sh",
                                        "args": ["-c", script], "ready": "child ",
                                        "kill": True})
        await session.close()
    killed = killed["ok"]
    words = killed["ready"].split()
    pgid, child = int(words[1]), int(words[3])
    assert child != pgid  # the child is no group leader: only a group kill reaches it
    assert killed["exit"] == {"exitCode": None, "signal": "SIGKILL", "_meta": None}
    assert killed["output"]["exitStatus"]["signal"] == "SIGKILL"
    # nothing of the group runs on (the orphaned child is reaped by init in its own time)
    assert [m for m in group_members(pgid) if m[1] != "Z"] == []
    with trio.fail_after(10):
        while group_members(pgid):  # noqa: ASYNC110 - bounded: init reaps the orphan
            await trio.sleep(0.01)
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)


async def test_a_tool_call_embedding_a_released_terminal_ends_with_its_output(
        orch: Orchestrator, workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        session = await start(orch, workdir)
        (ran,) = await run(session, {"call": "terminal", "command": "echo", "args": ["shown"],
                                     "embed": "call_t"})
        await session.close()
    assert ran["ok"]["after_release"] == -32002  # the id is gone …
    (end,) = [e for e in log_of(orch, session, ToolCallEnd) if e.call_id == "call_t"]
    assert end.output == "shown\n" and end.meta["acp"]["terminals"]  # … its output is not


async def test_terminal_commands_go_through_the_permission_policy(
        orch: Orchestrator, workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        session = await start(orch, workdir)
        listed, inline = await run(
            session,
            {"call": "terminal", "command": "ls", "args": ["-a"]},
            {"call": "terminal", "command": "sh", "args": ["-c", "rm -rf ~"]})
        await session.close()
    assert listed["ok"]["exit"]["exitCode"] == 0
    assert inline["error"]["code"] == -32603
    requests = log_of(orch, session, PermissionRequest)
    assert [(r.tool, r.intent["command"]) for r in requests] == [("Bash", "ls -a"),
                                                                ("Bash", "sh -c 'rm -rf ~'")]
    decided = log_of(orch, session, PermissionDecided)
    assert [d.decision for d in decided] == ["allow_once", "deny"]
    assert decided[0].risk != "high" and decided[1].risk == "high"


SCHEMA = {"properties": {"strategy": {"type": "string", "enum": ["fast", "safe"]},
                         "depth": {"type": "integer", "minimum": 1, "maximum": 3}},
          "required": ["strategy"]}


@pytest.mark.parametrize("answer", ["accept", "decline"])
async def test_elicitation_accept_and_decline(orch: Orchestrator, workdir: Path,
                                              answer: str) -> None:
    with trio.fail_after(SECONDS):
        session = await start(orch, workdir, permissions="ask", human=True)
        await session.inject(json.dumps([{"call": "elicit", "message": "How?",
                                          "schema": SCHEMA}]))
        await session.wait_status("input_required")
        ask = log_of(orch, session, AskUser)[0]
        assert ask.prompt == "How?" and ask.form["properties"]["depth"]["maximum"] == 3
        with pytest.raises(CommandRefused) as refused:
            await session.answer(ask.ask_id, {"strategy": "reckless"})
        assert refused.value.error.code == "cap_invalid_answer"
        value = {"strategy": "safe", "depth": 2} if answer == "accept" else None
        await session.answer(ask.ask_id, value)
        await session.wait_status("ready")
        await session.close()
    text = [env.event for env in orch.log.read(1, session.id)
            if type(env.event).__name__ == "TextChunk"][-1].text
    (result,) = json.loads(text)
    if answer == "accept":
        assert result["ok"]["action"] == "accept"
        assert result["ok"]["content"] == {"strategy": "safe", "depth": 2}
    else:
        assert result["ok"]["action"] == "decline"


async def test_agent_permission_request_answered_by_policy(
        orch: Orchestrator, workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        session = await start(orch, workdir)
        inside, outside = await run(session,
                                    {"call": "permission", "path": str(workdir / "a.py")},
                                    {"call": "permission", "path": "/etc/hosts", "id": "c2"})
        await session.close()
    assert inside["ok"]["outcome"] == {"outcome": "selected", "optionId": "ok", "_meta": None}
    assert outside["ok"]["outcome"] == {"outcome": "selected", "optionId": "no", "_meta": None}
