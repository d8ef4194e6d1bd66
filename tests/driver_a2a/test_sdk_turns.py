"""The A2A driver against real a2a-sdk 1.3.0 servers, in both spellings, through the orchestrator.

Each test runs twice (``spelling`` fixture): against a card that offers only
the 1.0 interface and against one that offers only 0.3 (the SDK's
``enable_v0_3_compat`` layer then writes every frame in the draft spelling),
so the driver must pick the spelling from the card and speak it end to end.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import trio

from tests.driver_a2a.conftest import SECONDS, SPELLINGS, events_of, one_turn
from tests.driver_a2a.servers import A2aServer, Ask, CapAsk, Chunks, Echo, EchoMessage, Fail, Slow
from trio_cap.actors.orchestrator import Orchestrator
from trio_cap.events.kinds import (
    AgentRaw,
    Artifact,
    AskAnswered,
    AskUser,
    CapError,
    SessionInputRequired,
    SessionWarning,
    TextChunk,
    Usage,
)


async def _poll(orch: Orchestrator, predicate: Callable[[], bool]) -> None:
    """Wait for a condition on the log, re-checked at every change the orchestrator sees."""
    await orch.wait_until(lambda _state: predicate())


async def test_echo_turns_share_one_context(orch: Orchestrator, spelling: str,
                                            tmp_path: Path) -> None:
    with A2aServer(Echo(), versions=SPELLINGS[spelling]).running() as srv, \
            trio.fail_after(SECONDS):
        session = await orch.start_session(f"a2a:{srv.base}", cwd=tmp_path)
        first = await session.run_turn("hi")
        second = await session.run_turn("again")
        view = await session.close()
        contexts = {t.context_id for t in srv.executor.contexts}
    assert (first.stop_reason, first.text) == ("end_turn", "echo: hi")
    assert (second.stop_reason, second.text) == ("end_turn", "echo: again")
    assert view.status == "completed"
    assert len(contexts) == 1, "the second task must be in the first task's context"
    arts = events_of(orch, session.id, Artifact)
    assert [(a.name, a.mime_type, a.size, a.content) for a in arts] == [
        ("echo", "text/plain", 8, None), ("echo", "text/plain", 11, None)]
    (warning,) = events_of(orch, session.id, SessionWarning)
    assert warning.code == "a2a_no_cap_extension"


async def test_direct_message_reply_ends_the_turn(orch: Orchestrator, spelling: str,
                                                  tmp_path: Path) -> None:
    with A2aServer(EchoMessage(), versions=SPELLINGS[spelling]).running() as srv, \
            trio.fail_after(SECONDS):
        _session, turn = await one_turn(orch, srv.base, tmp_path, "ping")
    assert (turn.stop_reason, turn.text) == ("end_turn", "echo: ping")


async def test_input_required_round_trip_continues_the_task(orch: Orchestrator, spelling: str,
                                                             tmp_path: Path) -> None:
    """input-required without a CAP ask ends the turn; the next input answers the same task
    (the executor asks again unless the follow-up carries taskId and contextId)."""
    with A2aServer(Ask(), versions=SPELLINGS[spelling]).running() as srv, \
            trio.fail_after(SECONDS):
        session = await orch.start_session(f"a2a:{srv.base}", cwd=tmp_path)
        question = await session.run_turn("hello")
        answer = await session.run_turn("Ada")
        view = await session.close()
    assert (question.stop_reason, question.text) == ("end_turn", "What is your name?")
    assert (answer.stop_reason, answer.text) == ("end_turn", "Hello, Ada!")
    assert view.status == "completed"


async def test_chunked_artifact_streams_in_order_and_closes_once(
        orch: Orchestrator, spelling: str, tmp_path: Path) -> None:
    with A2aServer(Chunks(6), versions=SPELLINGS[spelling]).running() as srv, \
            trio.fail_after(SECONDS):
        session, turn = await one_turn(orch, srv.base, tmp_path, "tell me a story")
    expected = "".join(f"chunk{i} " for i in range(6))
    assert turn.text == expected
    chunks = [c for c in events_of(orch, session.id, TextChunk)]
    assert len(chunks) == 6 and {c.message_id for c in chunks} == {"art-1"}
    (art,) = events_of(orch, session.id, Artifact)
    assert (art.artifact_id, art.name, art.size) == ("art-1", "story", len(expected))


async def test_failed_task_is_a_typed_error_and_a_failed_turn(
        orch: Orchestrator, spelling: str, tmp_path: Path) -> None:
    with A2aServer(Fail(), versions=SPELLINGS[spelling]).running() as srv, \
            trio.fail_after(SECONDS):
        session = await orch.start_session(f"a2a:{srv.base}", cwd=tmp_path)
        turn = await session.run_turn("do it")
        view = await session.close()
    assert turn.stop_reason == "error"
    errors = events_of(orch, session.id, CapError)
    assert [e.code for e in errors] == ["agent_error"]
    assert "failed" in errors[0].message and "the disk is on fire" in errors[0].message
    assert view.status == "failed"


async def test_cancel_cancels_the_task_at_the_agent(orch: Orchestrator, spelling: str,
                                                    tmp_path: Path) -> None:
    slow = Slow()
    with A2aServer(slow, versions=SPELLINGS[spelling]).running() as srv, \
            trio.fail_after(SECONDS):
        session = await orch.start_session(f"a2a:{srv.base}", cwd=tmp_path)
        accepted = await session.inject("work forever")
        await _poll(orch, lambda: any(c.text == "started" for c in
                                events_of(orch, session.id, TextChunk)))
        await session.cancel()
        await _poll(orch, lambda: (session.view or None) is not None
                    and session.view.ended_turn >= (accepted.turn or 1))
        await session.close()
    assert slow.cancelled.is_set(), "tasks/cancel / CancelTask must reach the executor"
    assert session.view is not None and session.view.last_stop_reason == "cancelled"


async def test_resubscribe_after_a_dropped_stream_loses_and_repeats_nothing(
        orch: Orchestrator, spelling: str, tmp_path: Path) -> None:
    """The first stream is cut after three SSE events while the executor is paused; the
    driver resubscribes and the rest of the artifact arrives once, in order."""
    chunks = Chunks(6, pause_at=3)
    with A2aServer(chunks, versions=SPELLINGS[spelling], drop_after=3).running() as srv, \
            trio.fail_after(SECONDS):
        session = await orch.start_session(f"a2a:{srv.base}", cwd=tmp_path)
        accepted = await session.inject("a long story")
        await _poll(orch, lambda: any(r.reason == "a2a_stream_dropped"
                                for r in events_of(orch, session.id, AgentRaw)))
        assert await trio.to_thread.run_sync(srv.resubscribe_seen.wait, SECONDS)
        chunks.gate.set()
        await _poll(orch, lambda: session.view is not None
                    and session.view.ended_turn >= (accepted.turn or 1))
        await session.close()
    assert srv.dropper is not None and srv.dropper.dropped == 1
    text = "".join(c.text for c in events_of(orch, session.id, TextChunk))
    assert text == "".join(f"chunk{i} " for i in range(6))
    assert session.view is not None and session.view.last_stop_reason == "end_turn"
    assert len(events_of(orch, session.id, Artifact)) == 1


async def test_resubscribe_to_a_task_that_finished_meanwhile_reads_it(
        orch: Orchestrator, spelling: str, tmp_path: Path) -> None:
    """Cut while the executor runs on: by the time the driver resubscribes the task may be
    done (the SDK refuses with -32004), so the final snapshot is read; nothing is lost."""
    with A2aServer(Chunks(8), versions=SPELLINGS[spelling], drop_after=3).running() as srv, \
            trio.fail_after(SECONDS):
        session, turn = await one_turn(orch, srv.base, tmp_path, "a long story")
    assert srv.dropper is not None and srv.dropper.dropped == 1
    assert turn.stop_reason == "end_turn"
    text = "".join(c.text for c in events_of(orch, session.id, TextChunk))
    assert text == "".join(f"chunk{i} " for i in range(8))


async def test_cap_ask_through_a_data_part_and_usage_on_completion(
        orch: Orchestrator, spelling: str, tmp_path: Path) -> None:
    """An agent declaring cap-protocol/v1 asks with a CAP data part; the answer goes back
    as a CAP data part on the same task, the turn goes on, usage arrives as a data part."""
    with A2aServer(CapAsk(), versions=SPELLINGS[spelling], cap_extension=True).running() as srv, \
            trio.fail_after(SECONDS):
        session = await orch.start_session(f"a2a:{srv.base}", cwd=tmp_path, human=True)
        accepted = await session.inject("paint it")
        await session.wait_status("input_required")
        (ask,) = events_of(orch, session.id, AskUser)
        assert (ask.ask_id, ask.prompt) == ("ask-1", "Which colour?")
        await session.answer("ask-1", "blue")
        await _poll(orch, lambda: session.view is not None
                    and session.view.ended_turn >= (accepted.turn or 1))
        await session.close()
        extensions = srv.executor.extensions
    texts = "".join(c.text for c in events_of(orch, session.id, TextChunk))
    assert texts == "I need to know a colour.colour is blue"
    (usage,) = events_of(orch, session.id, Usage)
    assert (usage.input_tokens, usage.output_tokens) == (12, 5)
    assert events_of(orch, session.id, AskAnswered)[0].value == "blue"
    assert len(events_of(orch, session.id, SessionInputRequired)) == 1
    assert not events_of(orch, session.id, SessionWarning)
    assert extensions and all("cap-protocol/v1" in e for e in extensions)


async def test_cancelling_the_session_cancels_the_running_task(
        orch: Orchestrator, spelling: str, tmp_path: Path) -> None:
    slow = Slow()
    with A2aServer(slow, versions=SPELLINGS[spelling]).running() as srv, \
            trio.fail_after(SECONDS):
        session = await orch.start_session(f"a2a:{srv.base}", cwd=tmp_path)
        await session.inject("work forever")
        await _poll(orch, lambda: any(c.text == "started" for c in
                                      events_of(orch, session.id, TextChunk)))
        await session.cancel("session")
        view = await session.wait_terminal()
        cancelled = await trio.to_thread.run_sync(slow.cancelled.wait, SECONDS)
    assert view.status == "cancelled"
    assert cancelled, "leaving the session must cancel the A2A task at the agent"
