"""The publisher's ASGI app, run by hypercorn's Trio worker: routes, auth, limits, SSE.

Everything an A2A call means is decided by the sans-io machine
(:mod:`.publisher`) and spelled by :mod:`.publisher_wire`; this file reads
bodies, checks the bearer token, writes JSON or SSE and watches for the
client going away.

* The agent card is public (``GET`` either well-known path): a client learns
  from it that a token is wanted.  Everything else needs ``Authorization:
  Bearer TOKEN`` when tokens are configured: a missing or wrong token is HTTP
  401 with ``WWW-Authenticate: Bearer`` before a byte of the body is read.
  The token's identity owns what its calls create (P2).
* A body over :data:`MAX_BODY_BYTES` (``content-length`` or counted while it
  streams) is HTTP 413 with a JSON-RPC error; bodies being read at once share
  :data:`MAX_BUFFERED_BYTES` (503 beyond it).
* Whatever a body holds, the answer is a JSON-RPC error or result, never a
  500 with a traceback: an unexpected exception is one line on stderr and a
  ``-32603`` answer.
* A streaming call answers ``text/event-stream``: each update one ``data:``
  line, several updates that are ready together written in one send, a ``:
  ping`` comment after :data:`PING_SECONDS` of silence; the stream ends after
  the task's final update, when the client disconnects, or at shutdown.
"""

from __future__ import annotations

import contextlib
import hmac
import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

import trio

from trio_cap.actors.bindings import jsonrpc
from trio_cap.actors.bindings.a2a import publisher_wire as wire
from trio_cap.actors.bindings.a2a.frames import (
    CAP_EXTENSION,
    CARD_PATHS,
    EXTENSIONS_HEADER,
    VERSION_HEADER,
    Spelling,
)
from trio_cap.actors.bindings.a2a.publisher import RpcFault, Task
from trio_cap.actors.bindings.a2a.serve_sessions import Publisher
from trio_cap.actors.model_server.app import Receive, Scope, Send

RPC_PATH = "/a2a/jsonrpc"
MAX_BODY_BYTES = 4 * 1024 * 1024
"""Largest JSON-RPC body: 4 MiB (a prompt with a large paste fits; a flood does not)."""
MAX_BUFFERED_BYTES = 8 * MAX_BODY_BYTES
PING_SECONDS = 10.0
_JSON = b"application/json"
_SSE = b"text/event-stream"
ANONYMOUS = "anonymous"


class TooLarge(Exception):
    pass


class A2aApp:
    """The ASGI callable: ``tokens`` maps each accepted token to its identity (None: no auth)."""

    def __init__(self, publisher: Publisher, card: bytes, *, spellings: tuple[Spelling, ...],
                 tokens: Mapping[str, str] | None = None, max_body: int = MAX_BODY_BYTES,
                 max_buffered: int = MAX_BUFFERED_BYTES, ping: float = PING_SECONDS) -> None:
        self.publisher = publisher
        self.card = card
        self.spellings = spellings
        self.tokens = dict(tokens) if tokens else None
        self.max_body = max_body
        self.max_buffered = max_buffered
        self.ping = ping
        self._buffered = 0
        self.seen: dict[str, int] = {}
        """Calls served, by JSON-RPC method (which spelling clients really speak)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # nothing to set up: acknowledge both phases
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        started = [False]

        async def tracked(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                started[0] = True
            await send(message)

        try:
            await self._handle(scope, receive, tracked)
        except Exception as exc:  # the last resort: one line, a JSON-RPC error, the server goes on
            print(f"cap serve a2a: internal error on {scope.get('method')} {scope.get('path')}: "
                  f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}",
                  file=sys.stderr, flush=True)
            if not started[0]:
                with contextlib.suppress(Exception):
                    await _respond(send, 200, _JSON, jsonrpc.error_reply(
                        None, jsonrpc.INTERNAL_ERROR, "internal error"))

    # ---- routing, auth, body ----------------------------------------------------------------

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        method, path = scope["method"], scope["path"].rstrip("/") or "/"
        if path in CARD_PATHS:
            if method not in ("GET", "HEAD"):
                await _respond(send, 405, _JSON, b'{"error":"use GET"}', [(b"allow", b"GET")])
                return
            await _respond(send, 200, _JSON, b"" if method == "HEAD" else self.card,
                           [(b"cache-control", b"public, max-age=60")])
            return
        if path not in (RPC_PATH, "/"):
            await _respond(send, 404, _JSON, b'{"error":"not found: the JSON-RPC endpoint is '
                           + RPC_PATH.encode() + b', the agent card /.well-known/agent-card.json"}')
            return
        if method != "POST":
            await _respond(send, 405, _JSON, b'{"error":"JSON-RPC wants POST"}',
                           [(b"allow", b"POST")])
            return
        headers = _headers(scope)
        owner = self._authenticate(headers.get("authorization", ""))
        if owner is None:
            await _respond(send, 401, _JSON, b'{"error":"a bearer token is required: '
                           b'Authorization: Bearer TOKEN"}',
                           [(b"www-authenticate", b'Bearer realm="cap serve a2a"')])
            return
        version = headers.get(VERSION_HEADER.lower())
        try:
            body = await self._read_body(headers, receive)
        except TooLarge as exc:
            fault = RpcFault(jsonrpc.INVALID_REQUEST, f"request too large: {exc}")
            await _respond(send, 413, _JSON, wire.error_body(wire.header_spelling(version),
                                                             None, fault),
                           [(b"connection", b"close")])
            return
        if body is None:
            await _respond(send, 503, _JSON, jsonrpc.error_reply(
                None, jsonrpc.INTERNAL_ERROR, "busy: too many request bodies at once; retry"),
                [(b"retry-after", b"1")])
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        await self._rpc(body, owner, version, query, headers, receive, send)

    def _authenticate(self, authorization: str) -> str | None:
        if self.tokens is None:
            return ANONYMOUS
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        given = token.strip().encode()
        found = None
        for known, identity in self.tokens.items():  # compare with every token: constant time
            if hmac.compare_digest(given, known.encode()):
                found = identity
        return found

    async def _read_body(self, headers: dict[str, str], receive: Receive) -> bytes | None:
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            raise TooLarge(f"content-length {declared} is over the {self.max_body}-byte limit")
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return b""
                piece = message.get("body", b"")
                size += len(piece)
                self._buffered += len(piece)
                if size > self.max_body:
                    raise TooLarge(f"the body is over the {self.max_body}-byte limit")
                if self._buffered > self.max_buffered:
                    return None
                chunks.append(piece)
                if not message.get("more_body"):
                    return b"".join(chunks)
        finally:
            self._buffered -= size

    # ---- JSON-RPC ----------------------------------------------------------------------------

    async def _rpc(self, body: bytes, owner: str, version: str | None, query: dict[str, str],
                   headers: dict[str, str], receive: Receive, send: Send) -> None:
        incoming = jsonrpc.JsonRpc().receive(body)
        fallback = wire.header_spelling(version)
        if isinstance(incoming, jsonrpc.Invalid):
            reply = incoming.reply or jsonrpc.invalid_request_reply(
                incoming.id, "a server takes requests, not responses")
            await _respond(send, 200, _JSON, reply)
            return
        if isinstance(incoming, jsonrpc.Notification):
            await _respond(send, 204, _JSON, b"")  # JSON-RPC: a notification gets no answer
            return
        if not isinstance(incoming, jsonrpc.Request):  # a response: nothing of ours is pending
            await _respond(send, 200, _JSON, jsonrpc.invalid_request_reply(
                getattr(incoming, "id", None), "a server takes requests, not responses"))
            return
        request = incoming
        found = wire.classify(request.method, version, self.spellings)
        if isinstance(found, RpcFault):
            await _respond(send, 200, _JSON, wire.error_body(fallback, request.id, found))
            return
        op, spelling = found
        self.seen[request.method] = self.seen.get(request.method, 0) + 1
        call = _Call(self, request, spelling, owner, query, headers, receive, send)
        handler = {"send": call.send, "stream": call.send, "get": call.get,
                   "cancel": call.cancel, "subscribe": call.subscribe,
                   "list": call.list}.get(op)
        if handler is None:
            code, what = {"push": (wire.PUSH_NOT_SUPPORTED, "push notifications are not "
                                   "supported: stream, or poll with tasks/get"),
                          "extended_card": (wire.EXTENDED_CARD_NOT_CONFIGURED,
                                            "there is no authenticated extended card")}[op]
            await call.error(RpcFault(code, what))
            return
        await handler(op == "stream")


class _Call:
    """One JSON-RPC request in one spelling."""

    def __init__(self, app: A2aApp, request: jsonrpc.Request, spelling: Spelling, owner: str,
                 query: dict[str, str], headers: dict[str, str], receive: Receive,
                 send: Send) -> None:
        self.app = app
        self.publisher = app.publisher
        self.request = request
        self.spelling = spelling
        self.owner = owner
        self.query = query
        self.headers = headers
        self.receive = receive
        self._send = send
        self.id_json = wire.encode_id(request.id)
        self.echo = _activated(headers, spelling)

    async def error(self, fault: RpcFault) -> None:
        await _respond(self._send, 200, _JSON,
                       wire.error_body(self.spelling, self.request.id, fault), self.echo)

    async def result(self, result: bytes) -> None:
        await _respond(self._send, 200, _JSON, wire.envelope(self.id_json, result), self.echo)

    def _raw_wanted(self) -> bool:
        return self.query.get("include_raw", "").lower() in ("1", "true", "yes")

    async def send(self, streaming: bool) -> None:
        options = wire.send_options(self.spelling, self.request)
        if isinstance(options, RpcFault):
            await self.error(options)
            return
        plan = await self.publisher.send(self.owner, options.message)
        if isinstance(plan, RpcFault):
            await self.error(plan)
            return
        task = self.publisher.machine.tasks[plan.task_id]
        if streaming:
            first = None
            if plan.start == 0:  # a new task: its snapshot first, as a2a-sdk sends it
                first = wire.task_result(_submitted(task), self.spelling, wrapped=True)
            await self.stream(task, plan.start, first, options.include_raw or self._raw_wanted())
            return
        if options.blocking:
            await self.publisher.wait_settled(task, plan.start)
        await self.result(wire.task_result(task, self.spelling, options.history_length,
                                           wrapped=True))

    async def _query(self) -> wire.TaskQuery | None:
        query = wire.task_query(self.spelling, self.request)
        if isinstance(query, RpcFault):
            await self.error(query)
            return None
        return query

    async def get(self, _streaming: bool) -> None:
        query = await self._query()
        task = self.publisher.machine.task_for(self.owner, query.id) if query else None
        if isinstance(task, RpcFault):
            await self.error(task)
        elif task is not None and query is not None:
            await self.result(wire.task_result(task, self.spelling, query.history_length))

    async def cancel(self, _streaming: bool) -> None:
        query = await self._query()
        task = await self.publisher.cancel(self.owner, query.id) if query else None
        if isinstance(task, RpcFault):
            await self.error(task)
        elif task is not None:
            await self.result(wire.task_result(task, self.spelling))

    async def subscribe(self, _streaming: bool) -> None:
        query = await self._query()
        task = self.publisher.machine.subscribe(self.owner, query.id) if query else None
        if isinstance(task, RpcFault):
            await self.error(task)
            return
        if task is None:
            return
        last = self.headers.get("last-event-id", "")
        if last.isdigit() and int(last) < len(task.updates):
            await self.stream(task, int(last) + 1, None, self._raw_wanted())
            return
        # an interrupted task's snapshot is its last word until someone answers (P8)
        start = len(task.updates) if not task.interrupted else None
        await self.stream(task, start, wire.task_result(task, self.spelling, wrapped=True),
                          self._raw_wanted())

    async def list(self, _streaming: bool) -> None:
        tasks = [t for t in self.publisher.machine.tasks.values() if t.owner == self.owner]
        body = b",".join(wire.task_result(t, self.spelling, 0) for t in tasks)
        await self.result(b'{"tasks":[' + body + b'],"nextPageToken":"","pageSize":%d,'
                          b'"totalSize":%d}' % (len(tasks), len(tasks)))

    async def stream(self, task: Task, start: int | None, first: bytes | None,
                     include_raw: bool) -> None:
        """SSE from update ``start`` on (after ``first``, a snapshot), until the final one;
        ``start`` None: the snapshot alone."""
        await self._send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", _SSE), (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"), *self.echo]})
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_disconnect, scope)
                if first is not None:
                    await self._body(wire.sse(wire.envelope(self.id_json, first)))
                if start is not None:
                    await self._follow(task, start, include_raw)
                nursery.cancel_scope.cancel()
        if not scope.cancelled_caught:
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _follow(self, task: Task, start: int, include_raw: bool) -> None:
        async for batch in self.publisher.follow(task, start, include_raw=include_raw,
                                                 ping=self.app.ping):
            if not batch:
                await self._body(b": ping\n\n")
                continue
            await self._body(b"".join(
                wire.sse(wire.envelope(self.id_json, wire.update_result(u, self.spelling)),
                         u.index) for u in batch))

    async def _body(self, data: bytes) -> None:
        await self._send({"type": "http.response.body", "body": data, "more_body": True})

    async def _watch_disconnect(self, scope: trio.CancelScope) -> None:
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                scope.cancel()
                return


def _activated(headers: dict[str, str], spelling: Spelling) -> list[tuple[bytes, bytes]]:
    """The CAP extension echoed when the caller asked for it (either header name), in the
    header of the request's spelling, as A2A says a server confirms an activation."""
    asked = f"{headers.get('a2a-extensions', '')},{headers.get('x-a2a-extensions', '')}"
    if CAP_EXTENSION not in (uri.strip() for uri in asked.split(",")):
        return []
    return [(EXTENSIONS_HEADER[spelling].lower().encode(), CAP_EXTENSION.encode())]


def _submitted(task: Task) -> Task:
    """The new task as its first stream event shows it: submitted, with the caller's message."""
    return Task(id=task.id, context_id=task.context_id, owner=task.owner,
                history=task.history[:1])


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1")
            for k, v in scope.get("headers", [])}


async def _respond(send: Send, status: int, ctype: bytes, body: bytes,
                   headers: list[tuple[bytes, bytes]] | None = None) -> None:
    head = [(b"content-type", ctype), (b"content-length", str(len(body)).encode()),
            *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body, "more_body": False})
