"""The official Python ACP SDK's client drives ``cap agent --cap-speak acp``.

Each test spawns the real ``cap`` with the SDK's ``spawn_agent_process`` and
plays an editor: it answers permissions, and — when it advertises them — its
own fs handlers write the files and its own terminals run the commands.  The
SDK is asyncio-based, so each test is a plain function running its own event
loop; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block

from tests.agent_acp.sdk_client import (
    CAP,
    RecordingClient,
    nothing_after_response,
    open_agent,
    prompt_ids,
    run,
)


def test_a_file_write_asks_first_then_goes_through_the_clients_fs(tmp_path: Path) -> None:
    target = tmp_path / "notes" / "a.txt"
    seen_before: list[bool] = []

    def answer(call: Any, _options: list[Any]) -> str:
        seen_before.append(target.exists())
        return "allow_once"

    client = RecordingClient(tmp_path, fs=True, answer=answer)

    async def main() -> Any:
        async with open_agent(client) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            first = await conn.prompt(session_id=session.session_id,
                                      prompt=[text_block("write notes/a.txt: hello acp")])
            second = await conn.prompt(session_id=session.session_id,
                                       prompt=[text_block("just chatting")])
            return first, second

    first, second = run(main())
    assert first.stop_reason == "end_turn" and second.stop_reason == "end_turn"
    assert target.read_text() == "hello acp\n"
    # written by the client's own fs handler, at the absolute path, after it was asked
    assert client.writes == [(str(target), "hello acp\n")]
    assert seen_before == [False]
    (perm,) = client.permissions
    assert perm.kind == "edit" and perm.title == f"Write {target}"
    # the tool call: announced pending, then the real diff, then completed
    (call,) = client.of_kind("tool_call")
    assert call.tool_call_id == perm.tool_call_id and call.status == "pending"
    assert [loc.path for loc in call.locations] == [str(target)]
    done = [u for u in client.of_kind("tool_call_update") if u.status == "completed"]
    (diff,) = [c for c in done[0].content if c.type == "diff"]
    assert (diff.path, diff.old_text, diff.new_text) == (str(target), None, "hello acp\n")
    assert "Wrote 10 bytes to notes/a.txt." in client.reply_text()
    # the prompt response was the last thing of the turn
    assert all(nothing_after_response(client.wire, pid) for pid in prompt_ids(client.wire))


def test_an_overwrite_shows_the_old_text_read_through_the_client(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("before\n")
    client = RecordingClient(tmp_path, fs=True)

    async def main() -> Any:
        async with open_agent(client) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            return await conn.prompt(session_id=session.session_id,
                                     prompt=[text_block("write a.txt: after")])

    assert run(main()).stop_reason == "end_turn"
    assert client.reads == [str(tmp_path / "a.txt")]
    done = [u for u in client.of_kind("tool_call_update") if u.status == "completed"]
    (diff,) = [c for c in done[0].content if c.type == "diff"]
    assert (diff.old_text, diff.new_text) == ("before\n", "after\n")


def test_without_fs_the_agent_writes_itself_inside_the_workspace(tmp_path: Path) -> None:
    client = RecordingClient(tmp_path, fs=False)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"

    async def main() -> Any:
        async with open_agent(client, "--permission-mode", "acceptEdits") as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            return await conn.prompt(session_id=session.session_id, prompt=[text_block(
                f"write b.txt: own tool\nwrite ../{outside.name}: escape")])

    assert run(main()).stop_reason == "end_turn"
    assert (tmp_path / "b.txt").read_text() == "own tool\n"
    assert not outside.exists()  # confined to the workspace
    assert client.writes == [] and client.reads == []
    statuses = [u.status for u in client.of_kind("tool_call_update") if u.status != "in_progress"]
    assert statuses == ["completed", "failed"]


@pytest.mark.parametrize("terminal", [True, False], ids=["client-terminal", "own-tool"])
def test_a_shell_command_output_is_in_the_reply(tmp_path: Path, terminal: bool) -> None:
    client = RecordingClient(tmp_path, terminal=terminal)

    async def main() -> Any:
        async with open_agent(client) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            return await conn.prompt(session_id=session.session_id,
                                     prompt=[text_block("run: echo from-$((6*7)) && pwd")])

    assert run(main()).stop_reason == "end_turn"
    reply = client.reply_text()
    assert "exited 0" in reply and "from-42" in reply and str(tmp_path.resolve()) in reply
    (perm,) = client.permissions
    assert perm.kind == "execute"
    done = [u for u in client.of_kind("tool_call_update") if u.status == "completed"]
    kinds = [c.type for c in done[0].content]
    if terminal:
        assert client.commands == [("/bin/sh", ["-c", "echo from-$((6*7)) && pwd"])]
        assert kinds[0] == "terminal" and not client.terminals  # embedded, then released
    else:
        assert client.commands == [] and "terminal" not in kinds


def test_a_rejected_write_does_not_run_and_the_reply_says_so(tmp_path: Path) -> None:
    client = RecordingClient(tmp_path, fs=True, answer=lambda _c, _o: "reject_once")

    async def main() -> Any:
        async with open_agent(client) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            return await conn.prompt(session_id=session.session_id,
                                     prompt=[text_block("write no.txt: never")])

    assert run(main()).stop_reason == "end_turn"
    assert not (tmp_path / "no.txt").exists() and client.writes == []
    (update,) = client.of_kind("tool_call_update")
    assert update.status == "failed"
    assert "denied" in client.reply_text()


def test_reject_always_is_remembered_for_the_session(tmp_path: Path) -> None:
    client = RecordingClient(tmp_path, fs=True, answer=lambda _c, _o: "reject_always")

    async def main() -> Any:
        async with open_agent(client) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            return await conn.prompt(session_id=session.session_id,
                                     prompt=[text_block("write a.txt: 1\nwrite b.txt: 2")])

    assert run(main()).stop_reason == "end_turn"
    assert len(client.permissions) == 1  # the second write was refused without asking
    assert not (tmp_path / "a.txt").exists() and not (tmp_path / "b.txt").exists()


def test_cancel_mid_turn_ends_the_prompt_cancelled(tmp_path: Path) -> None:
    client = RecordingClient(tmp_path)

    async def main() -> Any:
        async with open_agent(client) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            turn = asyncio.ensure_future(conn.prompt(
                session_id=session.session_id, prompt=[text_block("think: working\nwait 60")]))
            await client.updated.wait()  # the turn is under way (bounded by run's limit)
            await conn.cancel(session_id=session.session_id)
            response = await turn
            after = await conn.prompt(session_id=session.session_id,
                                      prompt=[text_block("still there?")])
            return response, after

    response, after = run(main(), limit=30)
    assert response.stop_reason == "cancelled"
    assert after.stop_reason == "end_turn"  # the session goes on
    assert all(nothing_after_response(client.wire, pid) for pid in prompt_ids(client.wire))


def test_cancel_while_a_permission_is_pending_answers_cancelled(tmp_path: Path) -> None:
    state: dict[str, Any] = {}

    async def answer(_call: Any, _options: list[Any]) -> None:
        await state["conn"].cancel(session_id=state["session"])
        return None  # the spec: a client answers pending permissions "cancelled"

    client = RecordingClient(tmp_path, fs=True, answer=answer)

    async def main() -> Any:
        async with open_agent(client) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            state.update(conn=conn, session=session.session_id)
            return await conn.prompt(session_id=session.session_id,
                                     prompt=[text_block("write c.txt: cancelled")])

    assert run(main()).stop_reason == "cancelled"
    assert not (tmp_path / "c.txt").exists() and client.writes == []


def test_session_load_replays_a_logged_session_then_continues(tmp_path: Path) -> None:
    log = str(tmp_path / "agent.caplog")
    first = RecordingClient(tmp_path, fs=True)

    async def record() -> str:
        async with open_agent(first, "--log", log) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=[text_block(
                "plan: write it\nwrite d.txt: kept")])
            return session.session_id

    session_id = run(record())
    second = RecordingClient(tmp_path, fs=True)

    async def load() -> Any:
        async with open_agent(second, "--log", log) as conn:
            loaded = await conn.load_session(cwd=str(tmp_path), session_id=session_id,
                                             mcp_servers=[])
            replayed = list(second.kinds())
            more = await conn.prompt(session_id=session_id, prompt=[text_block("and now?")])
            with pytest.raises(RequestError) as missing:
                await conn.load_session(cwd=str(tmp_path), session_id="no-such-session",
                                        mcp_servers=[])
            return loaded, replayed, more, missing.value

    loaded, replayed, more, missing = run(load())
    assert loaded.modes.current_mode_id == "default"
    assert replayed[0] == "user_message_chunk"
    user = second.of_kind("user_message_chunk")[0]
    assert user.content.text == "plan: write it\nwrite d.txt: kept"
    for kind in ("plan", "tool_call", "tool_call_update", "agent_message_chunk"):
        assert kind in replayed
    # the replay is what the first client saw (bar the live-only diff progress)
    live = [k for k in first.kinds() if k != "tool_call_update"]
    assert [k for k in replayed[1:] if k != "tool_call_update"] == live
    assert more.stop_reason == "end_turn"
    assert missing.code == -32002


def test_a_plain_command_line_reaches_the_clients_terminal_as_its_own_argv(
        tmp_path: Path) -> None:
    client = RecordingClient(tmp_path, terminal=True)

    async def main() -> Any:
        async with open_agent(client) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            return await conn.prompt(session_id=session.session_id,
                                     prompt=[text_block("run: echo plain words")])

    assert run(main()).stop_reason == "end_turn"
    # no shell in between: a client that vets commands sees the program itself
    assert client.commands == [("echo", ["plain", "words"])]
    assert "plain words" in client.reply_text()


def test_an_ask_becomes_a_form_elicitation_and_its_answer_reaches_the_brain(
        tmp_path: Path) -> None:
    client = RecordingClient(tmp_path, elicit="blue")

    async def main() -> Any:
        async with open_agent(client) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            return await conn.prompt(session_id=session.session_id,
                                     prompt=[text_block("ask: which colour? [red|blue]")])

    assert run(main()).stop_reason == "end_turn"
    ((message, mode),) = client.elicitations
    assert message == "which colour?"
    options = mode.requested_schema.properties["answer"]
    assert [o.const for o in options.one_of] == ["red", "blue"]
    assert "You answered blue." in client.reply_text()


def test_a_pty_only_agent_appears_as_an_acp_agent_through_the_bridge(tmp_path: Path) -> None:
    """``--bridge cap-agent --binding pty``: trio-cap's TUI agent on a real pseudo-terminal;
    its ``(y/n)`` prompt reaches the client as a permission request, typed back as "y"."""
    client = RecordingClient(tmp_path)
    bindir = str(Path(CAP).parent)

    async def main() -> Any:
        async with open_agent(client, "--bridge", "cap-agent", "--binding", "pty",
                              env={"PATH": f"{bindir}:{os.environ.get('PATH', '')}"}) as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            return await conn.prompt(session_id=session.session_id,
                                     prompt=[text_block("write p.txt: from a pty")])

    assert run(main(), limit=90).stop_reason == "end_turn"
    assert (tmp_path / "p.txt").read_text() == "from a pty\n"
    (perm,) = client.permissions
    assert "Write(p.txt)" in perm.title
    assert "Wrote 11 bytes to p.txt." in client.reply_text()


def test_cancel_while_a_command_runs_in_the_clients_terminal_releases_it(
        tmp_path: Path) -> None:
    client = RecordingClient(tmp_path, terminal=True)

    async def main() -> Any:
        async with open_agent(client, "--permission-mode", "bypassPermissions") as conn:
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            turn = asyncio.ensure_future(conn.prompt(session_id=session.session_id,
                                                     prompt=[text_block("run: sleep 60")]))
            await client.terminal_made.wait()
            await conn.cancel(session_id=session.session_id)
            return await turn

    assert run(main(), limit=30).stop_reason == "cancelled"
    assert client.commands == [("sleep", ["60"])]
    assert client.killed == ["term_1"] and client.terminals == {}  # released while running
