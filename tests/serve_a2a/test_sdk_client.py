"""The official a2a-sdk client (PyPI ``a2a-sdk``) against ``cap serve a2a``, in both spellings.

The card offers 1.0 and 0.3 (the client speaks 1.0) or only 0.3 (the client
switches to its v0.3 compat transport); ``Published.methods`` shows which method
names really arrived, so each test proves its spelling.  The agent is trio-cap's
scripted ``cap-agent`` (inproc), whose command language makes it ask, want
permissions and wait.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from a2a.types import CancelTaskRequest, GetTaskRequest, SubscribeToTaskRequest
from a2a.utils.errors import A2AError

from tests.serve_a2a.conftest import (
    OTHER_TOKEN,
    TOKEN,
    Published,
    ids_of,
    in_thread,
    last_state,
    publish,
    sdk_client,
    state_name,
    texts_of,
    user_message,
)
from trio_cap.events.kinds import (
    AskAnswered,
    InputInjected,
    PermissionDecided,
    SessionTurnEnded,
    TextChunk,
)

STREAM = {"1.0": "SendStreamingMessage", "0.3": "message/stream"}


def _spoke(pub: Published, method_10: str, method_03: str) -> None:
    expected = method_10 if pub.spelling == "1.0" else method_03
    assert pub.methods.get(expected), (expected, pub.methods)
    other = method_03 if pub.spelling == "1.0" else method_10
    assert not pub.methods.get(other), pub.methods


async def test_a_turn_streams_to_completion(tmp_path: Path, spelling: str) -> None:
    async with publish(tmp_path, spelling=spelling) as pub:
        async def flow():
            client = await sdk_client(pub.url)
            events = [ev async for ev in client.send_message(user_message("hello there"))]
            task_id, _ = ids_of(events)
            task = await client.get_task(GetTaskRequest(id=task_id))
            await client.close()
            return events, task

        events, task = await in_thread(flow)
        _spoke(pub, "SendStreamingMessage", "message/stream")
        assert events[0].HasField("task")
        assert state_name(events[0].task.status.state) == "TASK_STATE_SUBMITTED"
        text = texts_of(events)
        assert 'You said: "hello there".' in text
        assert last_state(events) == "TASK_STATE_COMPLETED"
        # the result an A2A user reads: one artifact per agent message, its text appended
        updates = [ev.artifact_update for ev in events if ev.HasField("artifact_update")]
        assert {u.artifact.artifact_id for u in updates} == {"msg_1"}
        assert [u.append for u in updates] == [False] + [True] * (len(updates) - 1)
        assert len(updates) > 3  # streamed in chunks, not at the end
        final = events[-1].status_update.status.message
        usage = [p.data.struct_value for p in final.parts if p.HasField("data")]
        assert usage and usage[0]["kind"] == "cap.usage"
        assert state_name(task.status.state) == "TASK_STATE_COMPLETED"
        assert [a.name for a in task.artifacts] == ["response"]
        assert "".join(p.text for p in task.artifacts[0].parts) == text
        assert [m.parts[0].text for m in task.history] == ["hello there"]
        # the session behind it: the context is the session, and the log holds the turn
        session_events = [e.event for e in pub.orch.log.read(1, task.context_id)]
        injected = [e for e in session_events if isinstance(e, InputInjected)]
        assert [e.text for e in injected] == ["hello there"]
        assert injected[0].source == f"a2a:{task.id}"
        logged = "".join(e.text for e in session_events if isinstance(e, TextChunk))
        assert logged == text
        assert any(isinstance(e, SessionTurnEnded) for e in session_events)


async def test_a_blocking_send_returns_the_finished_task(tmp_path: Path, spelling: str) -> None:
    async with publish(tmp_path, spelling=spelling) as pub:
        async def flow():
            client = await sdk_client(pub.url, streaming=False)
            events = [ev async for ev in client.send_message(user_message("what now"))]
            await client.close()
            return events

        events = await in_thread(flow)
        _spoke(pub, "SendMessage", "message/send")
        assert len(events) == 1 and events[0].HasField("task")
        task = events[0].task
        assert state_name(task.status.state) == "TASK_STATE_COMPLETED"
        assert "what now" in "".join(p.text for p in task.artifacts[0].parts)


async def test_a_second_task_continues_the_same_context(tmp_path: Path, spelling: str) -> None:
    async with publish(tmp_path, spelling=spelling) as pub:
        async def flow():
            client = await sdk_client(pub.url)
            first = [ev async for ev in client.send_message(user_message("one"))]
            task1, context = ids_of(first)
            second = [ev async for ev in client.send_message(
                user_message("two", context_id=context))]
            await client.close()
            return task1, context, second

        task1, context, second = await in_thread(flow)
        task2, context2 = ids_of(second)
        assert context2 == context and task2 != task1
        assert last_state(second) == "TASK_STATE_COMPLETED"
        injected = [e.event.text for e in pub.orch.log.read(1, context)
                    if isinstance(e.event, InputInjected)]
        assert injected == ["one", "two"]  # one session, two turns


async def test_ask_round_trip_through_input_required(tmp_path: Path, spelling: str) -> None:
    async with publish(tmp_path, spelling=spelling) as pub:
        async def flow():
            client = await sdk_client(pub.url)
            turn1 = [ev async for ev in client.send_message(
                user_message("ask: which colour? [red|blue]"))]
            task_id, context = ids_of(turn1)
            turn2 = [ev async for ev in client.send_message(
                user_message("blue", task_id=task_id, context_id=context))]
            await client.close()
            return turn1, turn2

        turn1, turn2 = await in_thread(flow)
        assert last_state(turn1) == "TASK_STATE_INPUT_REQUIRED"
        ask = turn1[-1].status_update.status.message
        assert ask.parts[0].text == "which colour?"
        data = ask.parts[1].data.struct_value
        assert data["kind"] == "cap.ask_user" and ask.parts[1].metadata["cap.kind"] == \
            "cap.ask_user"
        assert last_state(turn2) == "TASK_STATE_COMPLETED"
        assert "You answered blue." in texts_of(turn2)
        _, context = ids_of(turn1)
        answered = [e.event for e in pub.orch.log.read(1, context)
                    if isinstance(e.event, AskAnswered)]
        assert [(a.value, a.by) for a in answered] == [("blue", "human")]


async def test_permission_round_trip_and_an_unclear_answer(tmp_path: Path,
                                                          spelling: str) -> None:
    async with publish(tmp_path, spelling=spelling) as pub:
        async def flow():
            client = await sdk_client(pub.url)
            turn1 = [ev async for ev in client.send_message(
                user_message("write note.txt: hi"))]
            task_id, context = ids_of(turn1)
            try:
                async for _ in client.send_message(
                        user_message("perhaps", task_id=task_id, context_id=context)):
                    pass
            except A2AError as exc:
                unclear = str(exc)
            else:
                unclear = ""
            turn2 = [ev async for ev in client.send_message(
                user_message("", task_id=task_id, context_id=context,
                             data={"kind": "cap.permission.response",
                                   "decision": "allow_once"}))]
            await client.close()
            return turn1, unclear, turn2

        turn1, unclear, turn2 = await in_thread(flow)
        assert last_state(turn1) == "TASK_STATE_INPUT_REQUIRED"
        request = turn1[-1].status_update.status.message.parts[1].data.struct_value
        assert request["kind"] == "cap.permission.request" and request["tool"] == "Write"
        assert "allow, always or deny" in unclear  # refused, and the task still waits
        assert last_state(turn2) == "TASK_STATE_COMPLETED"
        assert (tmp_path / "note.txt").read_text() == "hi\n"
        _, context = ids_of(turn1)
        decided = [e.event for e in pub.orch.log.read(1, context)
                   if isinstance(e.event, PermissionDecided)]
        assert [(d.decision, d.by) for d in decided] == [("allow_once", "human")]


async def test_cancel_ends_a_working_task(tmp_path: Path, spelling: str) -> None:
    async with publish(tmp_path, spelling=spelling) as pub:
        async def flow():
            client = await sdk_client(pub.url)
            stream = client.send_message(user_message("wait 30"))
            seen = []
            async for ev in stream:
                seen.append(ev)
                if ev.HasField("status_update") and state_name(
                        ev.status_update.status.state) == "TASK_STATE_WORKING":
                    task_id, _ = ids_of(seen)
                    canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
                    break
            rest = [ev async for ev in stream]
            await stream.aclose()
            try:
                await client.cancel_task(CancelTaskRequest(id=task_id))
            except A2AError as exc:
                again = type(exc).__name__
            await client.close()
            return canceled, rest, again

        canceled, rest, again = await in_thread(flow)
        _spoke(pub, "CancelTask", "tasks/cancel")
        assert state_name(canceled.status.state) == "TASK_STATE_CANCELED"
        assert rest and last_state(rest) == "TASK_STATE_CANCELED"
        assert again == "TaskNotCancelableError"


async def test_resubscribe_to_a_working_task_follows_it_to_its_end(tmp_path: Path,
                                                                   spelling: str) -> None:
    async with publish(tmp_path, spelling=spelling) as pub:
        async def flow():
            client = await sdk_client(pub.url)
            stream = client.send_message(user_message("wait 30"))
            first = []
            async for ev in stream:
                first.append(ev)
                if ev.HasField("status_update"):
                    break  # working: the caller's connection drops here
            await stream.aclose()
            task_id, _ = ids_of(first)
            snapshot_seen = asyncio.Event()
            again = []

            async def follow() -> None:
                async for ev in client.subscribe(SubscribeToTaskRequest(id=task_id)):
                    again.append(ev)
                    snapshot_seen.set()

            follower = asyncio.create_task(follow())
            await snapshot_seen.wait()
            await client.cancel_task(CancelTaskRequest(id=task_id))
            await follower
            await client.close()
            return again

        again = await in_thread(flow)
        _spoke(pub, "SubscribeToTask", "tasks/resubscribe")
        assert again[0].HasField("task")  # the snapshot first …
        assert state_name(again[0].task.status.state) == "TASK_STATE_WORKING"
        assert again[0].task.history[0].parts[0].text == "wait 30"
        rest = [state_name(ev.status_update.status.state) for ev in again[1:]]
        assert rest == ["TASK_STATE_CANCELED"]  # … then what came after it, once


async def test_resubscribe_to_a_waiting_task_then_answer_it(tmp_path: Path,
                                                           spelling: str) -> None:
    async with publish(tmp_path, spelling=spelling) as pub:
        async def flow():
            client = await sdk_client(pub.url)
            stream = client.send_message(user_message("ask: go on? [yes|no]"))
            async for ev in stream:
                task_id, context = ids_of([ev])
                break
            await stream.aclose()
            while True:  # bounded by the flow's timeout: the ask comes within moments
                task = await client.get_task(GetTaskRequest(id=task_id))
                if state_name(task.status.state) == "TASK_STATE_INPUT_REQUIRED":
                    break
                await asyncio.sleep(0.05)
            again = [ev async for ev in client.subscribe(SubscribeToTaskRequest(id=task_id))]
            answer = [ev async for ev in client.send_message(
                user_message("yes", task_id=task_id, context_id=context))]
            await client.close()
            return again, answer

        again, answer = await in_thread(flow)
        assert len(again) == 1 and again[0].HasField("task")  # the snapshot is its last word
        status = again[0].task.status
        assert state_name(status.state) == "TASK_STATE_INPUT_REQUIRED"
        assert status.message.parts[1].data.struct_value["kind"] == "cap.ask_user"
        assert last_state(answer) == "TASK_STATE_COMPLETED"
        assert "You answered yes." in texts_of(answer)


async def test_resubscribing_to_a_finished_task_is_refused(tmp_path: Path,
                                                          spelling: str) -> None:
    async with publish(tmp_path, spelling=spelling) as pub:
        async def flow():
            client = await sdk_client(pub.url)
            events = [ev async for ev in client.send_message(user_message("hi"))]
            task_id, _ = ids_of(events)
            try:
                async for _ in client.subscribe(SubscribeToTaskRequest(id=task_id)):
                    pass
            except A2AError as exc:
                return type(exc).__name__
            return "no error"

        assert await in_thread(flow) == "UnsupportedOperationError"


@pytest.mark.parametrize("token", [None, "wrong-token-0123456789"])
async def test_auth_refuses_a_missing_or_wrong_token(tmp_path: Path, spelling: str,
                                                     token: str | None) -> None:
    async with publish(tmp_path, spelling=spelling, tokens={TOKEN: "alice"}) as pub:
        async def flow():
            client = await sdk_client(pub.url, token)
            try:
                async for _ in client.send_message(user_message("hi")):
                    pass
            except A2AError as exc:
                return str(exc)
            return "accepted"

        assert "401" in await in_thread(flow)
        assert pub.orch.state.sessions.sessions == {}  # nothing started


async def test_a_token_sees_only_its_own_tasks(tmp_path: Path, spelling: str) -> None:
    tokens = {TOKEN: "alice", OTHER_TOKEN: "bob"}
    async with publish(tmp_path, spelling=spelling, tokens=tokens) as pub:
        async def flow():
            alice = await sdk_client(pub.url, TOKEN)
            turn = [ev async for ev in alice.send_message(
                user_message("ask: ok? [yes|no]"))]
            task_id, context = ids_of(turn)
            bob = await sdk_client(pub.url, OTHER_TOKEN)
            refusals = []
            for call in (
                lambda: bob.get_task(GetTaskRequest(id=task_id)),
                lambda: bob.cancel_task(CancelTaskRequest(id=task_id)),
            ):
                try:
                    await call()
                except A2AError as exc:
                    refusals.append(type(exc).__name__)
            try:
                async for _ in bob.send_message(user_message("yes", task_id=task_id,
                                                             context_id=context)):
                    pass
            except A2AError as exc:
                refusals.append(type(exc).__name__)
            still = await alice.get_task(GetTaskRequest(id=task_id))
            return refusals, still

        refusals, still = await in_thread(flow)
        assert refusals == ["TaskNotFoundError"] * 3
        assert state_name(still.status.state) == "TASK_STATE_INPUT_REQUIRED"


async def test_idle_conversations_are_closed(tmp_path: Path) -> None:
    """One finished conversation and one whose question nobody answers: both closed."""
    import trio

    from trio_cap.actors.bindings.a2a.serve_sessions import SessionOptions

    options = SessionOptions(cwd=str(tmp_path), idle_close=0.3)
    async with publish(tmp_path, options=options) as pub:
        async def first():
            client = await sdk_client(pub.url)
            done = [ev async for ev in client.send_message(user_message("hi"))]
            asked = [ev async for ev in client.send_message(user_message("ask: x? [a|b]"))]
            await client.close()
            return done, asked

        done, asked = await in_thread(first)
        (_, finished), (waiting_task, waiting) = ids_of(done), ids_of(asked)
        with trio.fail_after(30):
            await pub.orch.wait_until(lambda s: all(
                s.sessions.sessions[c].status in ("completed", "cancelled", "failed")
                for c in (finished, waiting)))

        async def again():
            client = await sdk_client(pub.url)
            try:
                async for _ in client.send_message(user_message("more", context_id=finished)):
                    pass
            except A2AError as exc:
                return type(exc).__name__
            return "accepted"

        assert await in_thread(again) == "UnsupportedOperationError"
        task = pub.server.publisher.machine.tasks[waiting_task]
        assert task.state == "failed" and "without use" in task.status.message.parts[0].text
