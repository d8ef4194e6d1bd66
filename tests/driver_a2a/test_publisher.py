"""The driver against trio-cap's own publisher (``cap serve a2a``) through a proxy that cuts
the first SSE answer: the driver resubscribes with ``Last-Event-ID`` and the turn arrives
whole, once, in both spellings — the multi-node path surviving a broken connection."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.driver_a2a.conftest import SECONDS, events_of
from tests.serve_a2a.conftest import publish
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.events.kinds import AgentRaw, Plan, TextChunk, Thought


class CutProxy:
    """A TCP relay on 127.0.0.1 that aborts the first answer after ``events`` SSE events."""

    def __init__(self, events: int) -> None:
        self.events = events
        self.port = 0
        self.upstream = 0
        self.cuts = 0

    async def serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._relay, listeners)

    async def _relay(self, client: trio.SocketStream) -> None:
        upstream = await trio.open_tcp_stream("127.0.0.1", self.upstream)
        async with client, upstream, trio.open_nursery() as nursery:
            nursery.start_soon(self._pipe, client, upstream, False, nursery.cancel_scope)
            nursery.start_soon(self._pipe, upstream, client, True, nursery.cancel_scope)

    async def _pipe(self, src: trio.SocketStream, dst: trio.SocketStream, answer: bool,
                    both: trio.CancelScope) -> None:
        seen = 0
        try:
            async for chunk in src:
                if answer and self.cuts == 0:
                    seen += chunk.count(b"data: ")
                    if seen > self.events:
                        self.cuts += 1
                        return  # drop this chunk and close both sides: a broken stream
                await dst.send_all(chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            both.cancel()


PROMPT = "think: first\nplan: a; b\nwait 1\nhello after the cut"


async def test_a_cut_stream_from_our_publisher_resumes_exactly(tmp_path: Path,
                                                               spelling: str) -> None:
    proxy = CutProxy(events=2)
    async with trio.open_nursery() as nursery:
        await nursery.start(proxy.serve)
        async with publish(tmp_path, spelling=spelling,
                           public_url=f"http://127.0.0.1:{proxy.port}") as pub:
            proxy.upstream = pub.server.port
            async with open_orchestrator() as down:
                with trio.fail_after(SECONDS):
                    session = await down.start_session(f"a2a:http://127.0.0.1:{proxy.port}",
                                                       cwd=str(tmp_path))
                    turn = await session.run_turn(PROMPT)
                    await session.close()
                (context,) = pub.orch.state.sessions.sessions
                up_text = "".join(e.event.text for e in pub.orch.log.read(1, context)
                                  if type(e.event) is TextChunk)
                down_events = events_of(down, session.id)
                resubscribes = pub.methods.get("SubscribeToTask" if spelling == "1.0"
                                               else "tasks/resubscribe", 0)
        nursery.cancel_scope.cancel()
    assert proxy.cuts == 1 and resubscribes == 1
    assert any(type(e) is AgentRaw and e.reason == "a2a_stream_dropped" for e in down_events)
    assert turn.stop_reason == "end_turn"
    assert turn.text == up_text and "hello after the cut" in turn.text
    assert [e.text for e in down_events if type(e) is Thought] == ["first"]
    assert len([e for e in down_events if type(e) is Plan]) >= 1
