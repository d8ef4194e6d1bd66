"""BridgeCore fed CAP frames directly, bridging trio-cap's own agent over ``inproc``.

The test plays the agent side: it hands the core frames and reads what the
core emits, so every relay rule (ids renumbered, decisions and answers mapped
back, ``session.idle`` as the turn end, a dead agent as the end) is checked
without a wire in between.  Waits are on emitted events, bounded by
``fail_after``; nothing sleeps.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_cap.actors.agent.core import CoreEnded, Emitted
from trio_cap.actors.bindings.base import UPDATED_INPUT, TurnEnded
from trio_cap.actors.bridge import BRIDGED, BridgeCore, bridge_log_path
from trio_cap.events.kinds import (
    AskUser,
    AskUserAnswer,
    Cancel,
    CapError,
    CapSessionReady,
    ContentBlock,
    Event,
    PermissionDecided,
    PermissionRequest,
    PermissionResponse,
    SessionConfig,
    TextChunk,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UserInputInject,
)

SECONDS = 20


class Client:
    """Plays the agent side: sends frames, collects the core's batches, waits on them."""

    def __init__(self) -> None:
        self.out: list[Emitted] = []
        self._changed = trio.Event()
        self.send, self._recv = trio.open_memory_channel[Event](64)

    async def emit(self, batch: Sequence[Emitted]) -> None:
        self.out.extend(batch)
        self._changed.set()
        self._changed = trio.Event()

    async def wait(self, predicate: Callable[[list[Emitted]], Any]) -> Any:
        while not (found := predicate(self.out)):
            await self._changed.wait()
        return found

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.out if type(e) is kind]

    async def turn_end(self, n: int) -> TurnEnded:
        """The ``n``-th turn end (1-based)."""
        ends = await self.wait(lambda out: (e := [x for x in out if isinstance(x, TurnEnded)])
                               and len(e) >= n and e)
        return ends[n - 1]

    async def prompt(self, text: str) -> None:
        await self.send.send(UserInputInject(content=(ContentBlock(text=text),)))


@asynccontextmanager
async def bridged(workdir: Path, agent: str = "cap-agent",
                  binding: str | None = "inproc") -> AsyncIterator[tuple[Client, BridgeCore]]:
    client = Client()
    core = BridgeCore(agent, client.emit, binding=binding, session_id="bridge-1")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(core.run, client._recv)
        await client.send.send(SessionConfig(cwd=str(workdir)))
        yield client, core
        nursery.cancel_scope.cancel()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


async def test_text_turns_are_relayed_and_idle_ends_each_turn(workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        async with bridged(workdir) as (client, core):
            await client.prompt("hello there")
            first = await client.turn_end(1)
            await client.prompt("think: quietly\nagain")
            second = await client.turn_end(2)
    assert first.stop_reason == second.stop_reason == "end_turn"
    (ready,) = client.of(CapSessionReady)
    assert ready.session_id == "bridge-1"
    bridged_meta = ready.meta[BRIDGED]
    assert bridged_meta["agent"] == "cap-agent" and bridged_meta["binding"] == "inproc"
    assert core.session is not None and bridged_meta["session"] == core.session.id
    text = "".join(c.text for c in client.of(TextChunk))
    assert 'You said: "hello there"' in text and 'said: "again"' in text
    assert len(client.of(Usage)) == 2
    # the ready comes before the first turn's events, every turn's events before its end
    kinds = [type(e) for e in client.out]
    assert kinds.index(CapSessionReady) < kinds.index(TextChunk)
    assert isinstance(client.out[-1], TurnEnded)


async def test_permission_ids_are_renumbered_and_decisions_go_back(workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        async with bridged(workdir) as (client, core):
            await client.prompt("write a.txt: allowed")
            (req,) = await client.wait(lambda out: [e for e in out
                                                    if isinstance(e, PermissionRequest)])
            assert req.req_id == "perm_1" and req.tool == "Write"
            assert req.intent == {"path": "a.txt", "content": "allowed\n"}
            assert not (workdir / "a.txt").exists()
            await client.send.send(PermissionResponse(req_id="perm_1", decision="allow_once"))
            await client.turn_end(1)
            await client.prompt("write b.txt: denied")
            await client.wait(lambda out: len([e for e in out
                                               if isinstance(e, PermissionRequest)]) == 2)
            await client.send.send(PermissionResponse(req_id="perm_2", decision="deny",
                                                      meta={"cap.message": "no"}))
            await client.turn_end(2)
            # an id nobody waits on is an error, not a hang
            await client.send.send(PermissionResponse(req_id="perm_9", decision="allow_once"))
            await client.wait(lambda out: any(isinstance(e, CapError)
                                              and e.code == "cap_unknown_permission"
                                              for e in out))
            assert core.orch is not None and core.session is not None
            decided = [env.event for env in core.orch.log.read(1, core.session.id)
                       if isinstance(env.event, PermissionDecided)]
    assert (workdir / "a.txt").read_text() == "allowed\n"
    assert not (workdir / "b.txt").exists()
    # the driven agent's own ids (the inproc brain's perm_N) got the decisions
    assert [(d.decision, d.by, d.reason) for d in decided] == [
        ("allow_once", "human", ""), ("deny", "human", "no")]
    ends = client.of(ToolCallEnd)
    assert [e.is_error for e in ends] == [False, True]


async def test_a_rewritten_input_reaches_the_driven_agent(workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        async with bridged(workdir) as (client, _core):
            await client.prompt("write a.txt: original")
            await client.wait(lambda out: client.of(PermissionRequest))
            await client.send.send(PermissionResponse(
                req_id="perm_1", decision="allow_once",
                meta={UPDATED_INPUT: {"path": "b.txt", "content": "rewritten\n"}}))
            await client.turn_end(1)
    assert not (workdir / "a.txt").exists()
    assert (workdir / "b.txt").read_text() == "rewritten\n"


async def test_asks_are_renumbered_and_answered(workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        async with bridged(workdir) as (client, _core):
            await client.prompt("ask: which colour? [red|blue]")
            (ask,) = await client.wait(lambda out: client.of(AskUser))
            assert ask.ask_id == "ask_1" and ask.prompt == "which colour?"
            await client.send.send(AskUserAnswer(ask_id="ask_1", value="blue"))
            await client.turn_end(1)
    assert "You answered blue." in "".join(c.text for c in client.of(TextChunk))


async def test_cancel_interrupts_the_driven_turn_and_the_session_goes_on(workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        async with bridged(workdir) as (client, _core):
            await client.prompt("think: starting\nwait 60")
            await client.wait(lambda out: any(type(e).__name__ == "Thought" for e in out))
            await client.send.send(Cancel(scope="current_turn"))
            first = await client.turn_end(1)
            await client.prompt("after")
            second = await client.turn_end(2)
    assert first.stop_reason == "cancelled"
    assert second.stop_reason == "end_turn"


async def test_cancel_before_the_driven_turn_starts_still_cancels_it(workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        async with bridged(workdir) as (client, _core):
            await client.prompt("wait 60")
            await client.send.send(Cancel(scope="current_turn"))
            end = await client.turn_end(1)
    assert end.stop_reason == "cancelled"


async def test_tool_calls_keep_their_ids(workdir: Path) -> None:
    with trio.fail_after(SECONDS):
        async with bridged(workdir) as (client, _core):
            await client.prompt("run: echo hi")
            await client.wait(lambda out: client.of(PermissionRequest))
            await client.send.send(PermissionResponse(req_id="perm_1", decision="allow_once"))
            await client.turn_end(1)
    (start,) = client.of(ToolCallStart)
    (end,) = client.of(ToolCallEnd)
    assert start.name == "Bash" and start.input == {"command": "echo hi"}
    assert end.call_id == start.call_id and end.output.strip() == "hi"


async def test_a_session_cancel_ends_the_core(workdir: Path) -> None:
    client = Client()
    core = BridgeCore("cap-agent", client.emit, binding="inproc")
    with trio.fail_after(SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(core.run, client._recv)
            await client.send.send(SessionConfig(cwd=str(workdir)))
            await client.wait(lambda out: client.of(CapSessionReady))
            await client.send.send(Cancel(scope="session"))
    assert core.session is not None and core.session.view.status == "cancelled"


async def test_an_agent_that_cannot_be_driven_ends_the_core(workdir: Path) -> None:
    client = Client()
    core = BridgeCore("no-such-agent-anywhere", client.emit)
    await client.send.send(SessionConfig(cwd=str(workdir)))
    with trio.fail_after(SECONDS), pytest.raises(CoreEnded, match="no-such-agent-anywhere"):
        await core.run(client._recv)


async def test_a_driven_agent_that_dies_fails_the_bridge(workdir: Path, tmp_path: Path) -> None:
    dies = tmp_path / "dies.sh"
    dies.write_text("#!/bin/sh\nexit 3\n")
    dies.chmod(0o755)
    client = Client()
    core = BridgeCore(f"stream-json:{dies}", client.emit)
    await client.send.send(SessionConfig(cwd=str(workdir)))
    await client.prompt("hello")
    with trio.fail_after(SECONDS), pytest.raises(CoreEnded, match="failed"):
        await core.run(client._recv)


async def test_the_first_frame_must_be_the_config(workdir: Path) -> None:
    client = Client()
    core = BridgeCore("cap-agent", client.emit, binding="inproc")
    await client.prompt("too early")
    with trio.fail_after(SECONDS):
        await core.run(client._recv)
    (error,) = client.of(CapError)
    assert error.code == "cap_session_config_missing" and core.session is None


def test_the_bridge_logs_beside_the_agent_log() -> None:
    assert bridge_log_path(None) is None
    assert bridge_log_path("/x/run.caplog") == "/x/run.bridge.caplog"
    assert bridge_log_path("/x/run") == "/x/run.bridge.caplog"
