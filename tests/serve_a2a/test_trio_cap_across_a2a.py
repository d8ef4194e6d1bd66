"""trio-cap drives trio-cap across A2A — the multi-node path (DESIGN §2c): an orchestrator's
A2A driver (``a2a:URL``, ``A2aConnector``) against another orchestrator's publisher.

The driven node publishes cap-agent; the driving node's session sees its text,
its asks and its permission requests as its own, answers them, and the
answers reach the agent behind the publisher.  Both spellings: the card
offers both (the driver picks 1.0) or only 0.3.
"""

from __future__ import annotations

import json
from pathlib import Path

import trio

from tests.serve_a2a.conftest import BOUND, TOKEN, publish, run_cap, serving
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.events.kinds import (
    AskAnswered,
    AskUser,
    InputInjected,
    PermissionDecided,
    PermissionRequest,
    SessionTurnEnded,
)


async def test_a_session_drives_a_published_session(tmp_path: Path, spelling: str) -> None:
    async with publish(tmp_path, spelling=spelling) as pub, open_orchestrator() as down:
        session = await down.start_session("a2a:" + pub.url, permissions="ask", human=True,
                                           cwd=str(tmp_path))

        async def human() -> None:  # the driving node's human, answering what comes up
            async for batch in down.log.subscribe(1, session.id):
                for env in batch:
                    if isinstance(env.event, AskUser):
                        await session.answer(env.event.ask_id, "b")
                    elif isinstance(env.event, PermissionRequest):
                        await session.decide(env.event.req_id, "allow_once")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(human)
            with trio.fail_after(BOUND):
                hello = await session.run_turn("hello")
                asked = await session.run_turn("ask: which? [a|b]")
                wrote = await session.run_turn("write across.txt: over A2A")
            nursery.cancel_scope.cancel()
        await session.close()

    assert 'You said: "hello".' in hello.text and hello.stop_reason == "end_turn"
    assert asked.text.endswith("You answered b.")
    assert wrote.text.endswith("Wrote 9 bytes to across.txt.")
    assert (tmp_path / "across.txt").read_text() == "over A2A\n"
    down_events = [e.event for e in down.log.read(1, session.id)]
    assert [e.tool for e in down_events if isinstance(e, PermissionRequest)] == ["Write"]
    assert [e.prompt for e in down_events if isinstance(e, AskUser)] == ["which?"]
    # the driven node: one session, three turns, the answers given by "the human" upstream
    (context,) = pub.orch.state.sessions.sessions
    up_events = [e.event for e in pub.orch.log.read(1, context)]
    assert [e.text for e in up_events if isinstance(e, InputInjected)] == [
        "hello", "ask: which? [a|b]", "write across.txt: over A2A"]
    assert [(e.value, e.by) for e in up_events if isinstance(e, AskAnswered)] == [("b", "human")]
    assert [(e.decision, e.by) for e in up_events if isinstance(e, PermissionDecided)] == [
        ("allow_once", "human")]
    assert sum(isinstance(e, SessionTurnEnded) for e in up_events) == 3
    assert pub.methods.get("SendStreamingMessage" if spelling == "1.0" else "message/stream")


async def test_a_cancel_crosses_the_wire(tmp_path: Path) -> None:
    async with publish(tmp_path) as pub, open_orchestrator() as down:
        session = await down.start_session("a2a:" + pub.url, cwd=str(tmp_path))
        accepted = await session.inject("wait 30")
        with trio.fail_after(BOUND):
            await session.wait_status("working")
            while not pub.server.publisher.machine.tasks:  # noqa: ASYNC110 - bounded poll
                await trio.sleep(0.01)
            await session.cancel()
            await down.wait_until(lambda s: s.sessions.sessions[session.id].ended_turn >= 1)
        ended = [e.event for e in down.log.read(accepted.seq, session.id)
                 if isinstance(e.event, SessionTurnEnded)]
        assert [e.stop_reason for e in ended] == ["cancelled"]
        (task,) = pub.server.publisher.machine.tasks.values()
        assert task.state == "canceled"
        await session.close()


async def test_cap_run_drives_a_published_agent_process(tmp_path: Path) -> None:
    """``cap run --agent a2a:URL --token-file F`` against a ``cap serve a2a`` process."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {TOKEN}\n")
    async with serving(["--agent", "cap-agent", "--token-file", str(tokens), "--log",
                        str(tmp_path / "up.caplog")], tmp_path) as (proc, url):
        token_file = tmp_path / "token"
        token_file.write_text(TOKEN + "\n")
        result = await trio.to_thread.run_sync(lambda: run_cap(
            ["run", "--agent", f"a2a:{url}", "--token-file", str(token_file), "--task",
             "hello from afar", "--log", str(tmp_path / "down.caplog"), "--json"], tmp_path))
        proc.terminate()
        with trio.fail_after(BOUND):
            assert await proc.wait() == 0
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    text = "".join(e["text"] for e in events if e["kind"] == "cap.text_chunk")
    assert 'You said: "hello from afar".' in text
    assert events[-1]["kind"] == "session.completed"
