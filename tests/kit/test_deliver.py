"""The one delivery loop: a step's events are one batch, turn ends and exits keep their place."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio

from trio_cap.actors.bindings.base import AgentBatch, AgentGone, KillAgent, ToAgent, TurnEnded
from trio_cap.actors.bindings.deliver import Deliverer
from trio_cap.events.kinds import TextChunk, Thought


def text(t: str) -> TextChunk:
    return TextChunk(message_id="m", text=t)


@attrs.frozen
class DriverToAgent:
    """A machine's own ToAgent-shaped output (the stream-json driver has one)."""

    data: bytes


async def run(outputs: list[Any], **kw: Any) -> tuple[list[Any], list[Any]]:
    send, receive = trio.open_memory_channel[Any](100)
    effects: list[Any] = []

    async def write(data: bytes) -> None:
        effects.append(("write", data))

    async def kill(reason: str) -> None:
        effects.append(("kill", reason))

    deliver = Deliverer(send, write=kw.get("write", write), kill=kw.get("kill", kill))
    await deliver(outputs)
    send.close()
    return [m async for m in receive], effects


async def test_the_events_of_one_step_are_one_batch() -> None:
    inbox, effects = await run([text("a"), Thought(message_id="m", text="t"), text("b")])
    assert inbox == [AgentBatch([text("a"), Thought(message_id="m", text="t"), text("b")])]
    assert effects == []


async def test_turn_ends_and_exits_are_forwarded_in_order_after_the_events_before_them() -> None:
    inbox, _ = await run([text("a"), TurnEnded(), text("b"), TurnEnded("max_tokens"),
                          AgentGone("bye", 3), text("late")])
    assert inbox == [AgentBatch([text("a")]), TurnEnded(), AgentBatch([text("b")]),
                     TurnEnded("max_tokens"), AgentGone("bye", 3), AgentBatch([text("late")])]


async def test_bytes_for_the_agent_are_written_in_order_without_splitting_the_batch() -> None:
    inbox, effects = await run([text("a"), ToAgent(b"1"), text("b"), DriverToAgent(b"2")])
    assert inbox == [AgentBatch([text("a"), text("b")])]
    assert effects == [("write", b"1"), ("write", b"2")]


async def test_a_kill_comes_after_the_events_that_explain_it() -> None:
    inbox, effects = await run([text("why"), KillAgent("hard cancel")])
    assert inbox == [AgentBatch([text("why")])]
    assert effects == [("kill", "hard cancel")]


async def test_nothing_in_nothing_out() -> None:
    assert await run([]) == ([], [])


@pytest.mark.parametrize("outputs", [[object()], [ToAgent(b"x")], [KillAgent("x")]])
async def test_what_a_shell_cannot_do_is_a_loud_bug_not_a_silent_drop(outputs) -> None:
    with pytest.raises(TypeError):
        await run(outputs, write=None, kill=None)
