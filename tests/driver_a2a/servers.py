"""Real a2a-sdk 1.3.0 servers for the driver tests, on 127.0.0.1 in a uvicorn thread.

Each executor is an ordinary a2a-sdk ``AgentExecutor`` (the SDK builds the
tasks, the stream frames and the draft spelling through its own compat layer);
:class:`A2aServer` serves one with a card offering the 1.0 spelling, the 0.3
spelling or both, optionally declaring the CAP extension and guarding every
route with a bearer token.  ``drop_after`` cuts the first streaming answer's
connection after that many SSE events (an ASGI middleware raising mid-body,
so uvicorn aborts the connection without the chunked terminator): the forced
disconnect the resubscribe tests need.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

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
    AgentExtension,
    AgentInterface,
    AgentSkill,
    Part,
)
from google.protobuf import struct_pb2
from starlette.applications import Starlette
from starlette.responses import JSONResponse

CAP_EXTENSION = "cap-protocol/v1"


def data_part(value: dict[str, Any], kind: str | None = None) -> Part:
    v = struct_pb2.Value()
    v.struct_value.update(value)
    part = Part(data=v, media_type="application/json")
    if kind is not None:
        part.metadata.update({"cap.kind": kind})
    return part


class Base(AgentExecutor):
    """Records what each request looked like to the SDK (contexts, requested extensions)."""

    def __init__(self) -> None:
        self.contexts: list[RequestContext] = []
        self.extensions: list[set[str]] = []

    async def _start(self, context: RequestContext, queue: EventQueue) -> TaskUpdater:
        self.contexts.append(context)
        self.extensions.append(set(context.requested_extensions))
        if context.current_task is None:
            await queue.enqueue_event(new_task_from_user_message(context.message))
        up = TaskUpdater(queue, context.task_id, context.context_id)
        await up.start_work()
        return up

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        await TaskUpdater(queue, context.task_id, context.context_id).cancel()


class Echo(Base):
    """Task → working → artifact ``echo: X`` → completed."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        up = await self._start(context, queue)
        await up.add_artifact([Part(text=f"echo: {context.get_user_input()}")], name="echo",
                              last_chunk=True)
        await up.complete()


class EchoMessage(Base):
    """One direct Message, no task."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        from a2a.helpers import new_text_message

        self.contexts.append(context)
        await queue.enqueue_event(new_text_message(f"echo: {context.get_user_input()}",
                                                   context_id=context.context_id))


class Ask(Base):
    """Turn 1 asks a question (input-required); the follow-up completes with a greeting."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        up = await self._start(context, queue)
        if context.current_task is None:
            await up.requires_input(up.new_agent_message([Part(text="What is your name?")]))
            return
        await up.add_artifact([Part(text=f"Hello, {context.get_user_input()}!")],
                              name="greeting", last_chunk=True)
        await up.complete()


class Chunks(Base):
    """One artifact in ``n`` appended chunks; waits on ``gate`` after ``pause_at`` chunks."""

    def __init__(self, n: int = 6, *, pause_at: int | None = None) -> None:
        super().__init__()
        self.n = n
        self.pause_at = pause_at
        self.gate = threading.Event()

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        up = await self._start(context, queue)
        for i in range(self.n):
            if self.pause_at is not None and i == self.pause_at:
                for _ in range(600):  # bounded: 60 s
                    if self.gate.is_set():
                        break
                    await asyncio.sleep(0.1)
            await up.add_artifact([Part(text=f"chunk{i} ")], artifact_id="art-1",
                                  name="story", append=i > 0, last_chunk=i == self.n - 1)
        await up.complete()


class Slow(Base):
    """Streams one chunk, then works until cancelled (bounded at 60 s)."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelled = threading.Event()

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        up = await self._start(context, queue)
        await up.add_artifact([Part(text="started")], artifact_id="slow", name="slow")
        for _ in range(600):
            if self.cancelled.is_set():
                return
            await asyncio.sleep(0.1)
        await up.complete()

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        self.cancelled.set()
        await TaskUpdater(queue, context.task_id, context.context_id).cancel()


class Fail(Base):
    """Task → working → failed, with a reason."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        up = await self._start(context, queue)
        await up.failed(up.new_agent_message([Part(text="the disk is on fire")]))


class CapAsk(Base):
    """A CAP-aware agent: asks through a CAP data part, finishes with the answer and usage."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        up = await self._start(context, queue)
        if context.current_task is None:
            ask = {"kind": "cap.ask_user", "ask_id": "ask-1", "prompt": "Which colour?",
                   "form": {"type": "string"}}
            await up.requires_input(up.new_agent_message(
                [Part(text="I need to know a colour."), data_part(ask, "cap.ask_user")]))
            return
        answers = [p for p in context.message.parts if p.HasField("data")]
        value = answers[0].data.struct_value["value"] if answers else None
        await up.add_artifact([Part(text=f"colour is {value}")], name="answer",
                              last_chunk=True)
        usage = {"kind": "cap.usage", "input_tokens": 12, "output_tokens": 5,
                 "cost_usd_estimate": 0.001}
        await up.complete(up.new_agent_message([data_part(usage, "cap.usage")]))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _DropAfter:
    """ASGI middleware: abort the first ``times`` streaming answers after ``events`` SSE events."""

    def __init__(self, app: Any, events: int, times: int = 1) -> None:
        self.app = app
        self.events = events
        self.times = times
        self.dropped = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.dropped >= self.times:
            return await self.app(scope, receive, send)
        seen = 0
        cut = False

        async def counting(message: dict[str, Any]) -> None:
            nonlocal seen, cut
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", []))
                cut = b"text/event-stream" in headers.get(b"content-type", b"")
            if cut and message["type"] == "http.response.body" and b"data:" in message.get(
                    "body", b""):
                seen += 1
                if seen > self.events:
                    self.dropped += 1
                    raise ConnectionAbortedError("test: stream cut")
            await send(message)

        await self.app(scope, receive, counting)


class _Recorder:
    """ASGI middleware: the JSON-RPC method of every POST, in arrival order."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.methods: list[str] = []
        self.resubscribe_seen = threading.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            self.methods.append(str(json.loads(body).get("method")))
            if self.methods[-1] in ("tasks/resubscribe", "SubscribeToTask"):
                self.resubscribe_seen.set()
        except (ValueError, AttributeError):
            self.methods.append("?")
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


class _Bearer:
    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers", []))
            if headers.get(b"authorization", b"") != f"Bearer {self.token}".encode():
                await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive,
                                                                              send)
                return
        await self.app(scope, receive, send)


class A2aServer:
    def __init__(self, executor: AgentExecutor, *, versions: tuple[str, ...] = ("1.0",),
                 cap_extension: bool = False, token: str | None = None,
                 drop_after: int | None = None, legacy_card_only: bool = False) -> None:
        self.executor = executor
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        rpc = f"{self.base}/a2a/jsonrpc"
        extensions = [AgentExtension(uri=CAP_EXTENSION, description="CAP over A2A")] \
            if cap_extension else []
        card = AgentCard(
            name="Test Agent", description="a2a-sdk test agent", version="1.0.0",
            supported_interfaces=[AgentInterface(url=rpc, protocol_binding="JSONRPC",
                                                 protocol_version=v) for v in versions],
            capabilities=AgentCapabilities(streaming=True, extensions=extensions),
            default_input_modes=["text/plain"], default_output_modes=["text/plain"],
            skills=[AgentSkill(id="t", name="t", description="test", tags=["t"])])
        handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(),
                                        agent_card=card)
        routes = [] if legacy_card_only else list(create_agent_card_routes(card))
        routes += create_agent_card_routes(card, card_url="/.well-known/agent.json")
        routes += create_jsonrpc_routes(handler, rpc_url="/a2a/jsonrpc",
                                        enable_v0_3_compat="0.3" in versions)
        app: Any = Starlette(routes=routes)
        self.dropper = _DropAfter(app, drop_after) if drop_after is not None else None
        if self.dropper is not None:
            app = self.dropper
        self.recorder = app = _Recorder(app)
        if token is not None:
            app = _Bearer(app, token)
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="critical", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def resubscribe_seen(self) -> threading.Event:
        return self.recorder.resubscribe_seen

    @contextmanager
    def running(self) -> Iterator[A2aServer]:
        self.thread.start()
        try:
            for _ in range(400):  # bounded: 20 s
                if self.server.started:
                    break
                if not self.thread.is_alive():
                    raise RuntimeError("the a2a-sdk test server did not start")
                threading.Event().wait(0.05)
            else:
                raise RuntimeError("the a2a-sdk test server did not start within 20 s")
            yield self
        finally:
            self.server.should_exit = True
            self.thread.join(10)


def card_json(base: str, versions: tuple[str, ...] = ("1.0",), *, binding: str = "JSONRPC",
              extensions: tuple[str, ...] = ()) -> dict[str, Any]:
    """A hand-written v1 card (for servers that are not the SDK's)."""
    return {"name": "Raw Agent", "description": "hand-written", "version": "1",
            "supportedInterfaces": [{"url": f"{base}/rpc", "protocolBinding": binding,
                                     "protocolVersion": v} for v in versions],
            "capabilities": {"streaming": True,
                             "extensions": [{"uri": u} for u in extensions]},
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": []}


class RawServer:
    """A hand-made A2A server (Starlette on uvicorn): a card, and ``answer(rpc) -> Response``.

    For what the SDK never sends: broken SSE data, HTTP errors, a method it refuses
    in one spelling, an answer that never comes.
    """

    def __init__(self, answer: Any, *, card: dict[str, Any] | None = None,
                 versions: tuple[str, ...] = ("1.0",), binding: str = "JSONRPC") -> None:
        from starlette.requests import Request
        from starlette.routing import Route

        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.card: dict[str, Any] | None = card or card_json(self.base, versions,
                                                             binding=binding)
        self.requests: list[dict[str, Any]] = []

        async def card_route(request: Request) -> JSONResponse:
            if self.card is None:
                return JSONResponse({"error": "no card here"}, status_code=404)
            return JSONResponse(self.card)

        async def rpc(request: Request) -> Any:
            body = json.loads(await request.body())
            self.requests.append({"body": body, "headers": dict(request.headers)})
            return await answer(body)

        app = Starlette(routes=[Route("/.well-known/agent-card.json", card_route),
                                Route("/rpc", rpc, methods=["POST"])])
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="critical", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    running = A2aServer.running


def sse(*payloads: bytes | str) -> Any:
    from starlette.responses import Response

    body = b"".join((p.encode() if isinstance(p, str) else p).join([b"data: ", b"\r\n\r\n"])
                    for p in payloads)
    return Response(body, media_type="text/event-stream")
