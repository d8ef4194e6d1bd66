"""The peer of ``python -m bench a2a``: a2a-sdk's own server streaming the same turn.

Run as ``python bench/a2a_sdk_peer.py WORDS WAIT [artifact|status]``: an a2a-sdk 1.3.0 Starlette
app (``DefaultRequestHandler``, in-memory task store, draft and v1 JSON-RPC on
one URL) under uvicorn on 127.0.0.1, whose executor makes a task, waits
``WAIT`` seconds and then streams ``WORDS`` words as appended artifact chunks
(``TaskUpdater.add_artifact(append=True)``), one SSE event each, as trio-cap's
publisher does — or, with ``status``, as one working status message each.
Prints ``PORT`` on stdout once listening.
"""

from __future__ import annotations

import asyncio
import socket
import sys

import uvicorn
from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    TaskState,
)
from starlette.applications import Starlette


class Talker(AgentExecutor):
    def __init__(self, words: int, wait: float, mode: str) -> None:
        self.words, self.wait, self.mode = words, wait, mode

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        if context.current_task is None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        up = TaskUpdater(event_queue, context.task_id, context.context_id)
        await up.start_work()
        await asyncio.sleep(self.wait)
        for i in range(self.words):
            if self.mode == "status":  # each word a working status message instead
                await up.update_status(TaskState.TASK_STATE_WORKING,
                                       up.new_agent_message([Part(text=f"w{i} ")]))
            else:
                await up.add_artifact([Part(text=f"w{i} ")], artifact_id="msg_1",
                                      name="response", append=i > 0, last_chunk=False)
        await up.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def main() -> None:
    words, wait = int(sys.argv[1]), float(sys.argv[2])
    mode = sys.argv[3] if len(sys.argv) > 3 else "artifact"
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)  # connections wait in the backlog until uvicorn accepts them
    port = sock.getsockname()[1]
    rpc = f"http://127.0.0.1:{port}/a2a/jsonrpc"
    card = AgentCard(
        name="peer", description="a2a-sdk peer", version="1.0.0",
        supported_interfaces=[AgentInterface(url=rpc, protocol_binding="JSONRPC",
                                             protocol_version="1.0"),
                              AgentInterface(url=rpc, protocol_binding="JSONRPC",
                                             protocol_version="0.3")],
        capabilities=AgentCapabilities(streaming=True), default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="talk", name="talk", description="talks", tags=["talk"])])
    handler = DefaultRequestHandler(agent_executor=Talker(words, wait, mode),
                                    task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=[*create_agent_card_routes(card),
                            *create_jsonrpc_routes(handler, rpc_url="/a2a/jsonrpc",
                                                   enable_v0_3_compat=True)])
    print(port, flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    asyncio.run(server.serve(sockets=[sock]))


if __name__ == "__main__":
    main()
