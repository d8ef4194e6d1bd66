"""The ASGI shell: bytes in, route, parse, plan, render, bytes out.

Everything that decides anything lives in the sans-io modules; this file only
reads the body, records the request, applies the plan's timing (a slow stream
sleeps between chunks) and writes the frames.  It runs under hypercorn's Trio
worker, so ``trio.sleep`` is the right sleep.

Hostile clients are bounded here: a body is counted while it streams in and
refused with 413 as soon as it passes :data:`MAX_BODY_BYTES` (a
``content-length`` above the limit is refused before a byte is read), a
compressed body may not inflate past the same limit nor decode into more than
:data:`MAX_JSON_VALUES` values, and all bodies being received at once share
:data:`MAX_BUFFERED_BYTES` (503 beyond it).  Whatever a request
contains, the answer is an HTTP status with a JSON error, never a traceback in
the server's output.
"""

from __future__ import annotations

import contextlib
import sys
import zlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import parse_qsl

import msgspec
import trio

from trio_cap.actors.model_server import (
    render_anthropic,
    render_gemini,
    render_openai,
    render_responses,
)
from trio_cap.actors.model_server.parse import (
    ChatRequest,
    estimate_tokens,
    parse_anthropic,
    parse_gemini,
    parse_openai_chat,
    parse_openai_responses,
)
from trio_cap.actors.model_server.planner import ReplyPlan, ScriptState, plan_reply
from trio_cap.actors.model_server.record import Recorder, clean_headers, clean_query
from trio_cap.actors.model_server.routes import Route, route
from trio_cap.actors.model_server.script import Fault, Script
from trio_cap.actors.model_server.sse import dumps

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_JSON = b"application/json"

MAX_BODY_BYTES = 16 * 1024 * 1024
"""Largest request body accepted (after decompression): 16 MiB.  Real agents' requests,
long conversations with tool output included, stay far below it."""


MAX_BUFFERED_BYTES = 4 * MAX_BODY_BYTES
"""Body bytes held at once by all requests still being received: many slow clients each
sending up to the per-request limit get 503 (retry after 1 s) beyond this, not all the
memory there is."""


MAX_JSON_VALUES = 2_000_000
"""Upper bound on the values a body may decode into.  Decoded JSON can take ~25× its
wire size (``{}`` is 2 bytes on the wire, a 64-byte dict in memory), so the byte limit
alone would let one 16 MiB body of empty objects take ~600 MB; this caps it near 150 MB.
Counted cheaply before decoding, as commas and opening brackets (an over-count, never
an under-count)."""


def _value_bound(data: bytes) -> int:
    return data.count(b",") + data.count(b"{") + data.count(b"[") + 1


class BadRequest(Exception):
    pass


class TooLarge(Exception):
    pass


def _inflate(raw: bytes, wbits: int, limit: int) -> bytes:
    """Decompress every member, refusing to produce more than ``limit`` bytes (zip bombs)."""
    out: list[bytes] = []
    size = 0
    while raw:
        inflater = zlib.decompressobj(wbits)
        piece = inflater.decompress(raw, limit - size + 1)
        size += len(piece)
        if size > limit:
            raise TooLarge(f"the body inflates past {limit} bytes")
        out.append(piece)
        if not inflater.eof:
            if inflater.unconsumed_tail:
                raise TooLarge(f"the body inflates past {limit} bytes")
            raise BadRequest("truncated compressed body")
        raw = inflater.unused_data if wbits == _GZIP else b""
    return b"".join(out)


_GZIP = 16 + zlib.MAX_WBITS


def _decode_body(raw: bytes, encoding: str, limit: int = MAX_BODY_BYTES) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding == "gzip":
        return _inflate(raw, _GZIP, limit)
    if encoding == "deflate":
        return _inflate(raw, zlib.MAX_WBITS, limit)
    raise BadRequest(f"unsupported content-encoding {encoding!r}")


def _record_base(scope: Scope) -> dict[str, Any]:
    query_string = scope.get("query_string", b"").decode("latin-1")
    return {"method": scope["method"], "path": scope["path"],
            "query": dict(clean_query(query_string)),
            "headers": clean_headers(scope.get("headers", [])), "body": None,
            "route": route(scope["method"], scope["path"]).kind}


def _declared_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name.lower() == b"content-length" and value.strip().isdigit():
            return int(value)
    return None


def _error_body(api: str, fault: Fault) -> dict[str, Any]:
    if api == "anthropic":
        return render_anthropic.error_body(fault)
    if api == "gemini":
        return render_gemini.error_body(fault)
    return render_openai.error_body(fault)


def _parse(rt: Route, body: dict[str, Any], size: int) -> ChatRequest:
    if rt.kind == "openai-chat":
        return parse_openai_chat(body, size)
    if rt.kind == "openai-responses":
        return parse_openai_responses(body, size)
    if rt.kind == "anthropic":
        return parse_anthropic(body, size)
    return parse_gemini(body, size, model=rt.model, stream=rt.stream)


def render(rt: Route, req: ChatRequest, plan: ReplyPlan, query: dict[str, str]
           ) -> tuple[bytes, list[bytes]]:
    """Content type and body frames (one frame for a non-streamed reply)."""
    if req.api == "gemini":
        sse_mode = rt.stream and query.get("alt") == "sse"
        if rt.stream:
            ctype = b"text/event-stream" if sse_mode else _JSON
            return ctype, render_gemini.frames(plan, sse_mode=sse_mode)
        return _JSON, [dumps(render_gemini.body(plan))]
    if not req.stream:
        module: Any = {"openai-chat": render_openai, "openai-responses": render_responses,
                       "anthropic": render_anthropic}[req.api]
        return _JSON, [dumps(module.body(plan))]
    if req.api == "openai-chat":
        return b"text/event-stream", render_openai.frames(plan, req)
    if req.api == "openai-responses":
        return b"text/event-stream", render_responses.frames(plan)
    return b"text/event-stream", render_anthropic.frames(plan)


class ModelApp:
    """One scripted model; its state advances with every planned request."""

    def __init__(self, script: Script, recorder: Recorder | None = None, *,
                 max_body: int = MAX_BODY_BYTES,
                 max_buffered: int = MAX_BUFFERED_BYTES) -> None:
        self.script = script
        self.state = ScriptState()
        self.recorder = recorder if recorder is not None else Recorder()
        self.max_body = max_body
        self.max_buffered = max_buffered
        self._buffered = 0  # body bytes held by requests still being received

    def set_script(self, script: Script) -> None:
        """Swap the script and start its turns from the beginning."""
        self.script = script
        self.state = ScriptState()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        try:
            await self._handle(scope, receive, send)
        except Exception as exc:  # the last resort: one line and a 500, the server goes on
            where = f"{scope.get('method')} {scope.get('path')}"
            print(f"cap model serve: internal error on {where}: {type(exc).__name__}: "
                  f"{' '.join(str(exc).split())[:200]}", file=sys.stderr, flush=True)
            with contextlib.suppress(Exception):  # fails if the response had already begun
                await self._respond(send, 500, _JSON, [dumps(
                    {"error": {"message": "internal error", "code": 500}})])

    async def _read_body(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """The whole body, or None when the request was refused (413, 503) or abandoned."""
        limit = self.max_body
        declared = _declared_length(scope.get("headers", []))
        if declared is not None and declared > limit:
            await self._refuse(scope, send, 413, f"content-length {declared} is over the "
                               f"{limit}-byte limit")
            return None
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                body = message.get("body", b"")
                size += len(body)
                self._buffered += len(body)
                refusal = None
                if size > limit:
                    refusal = 413, f"the body is over the {limit}-byte limit"
                elif self._buffered > self.max_buffered:
                    refusal = 503, ("busy: too many request bodies are being received at "
                                    "once; retry")
                if refusal is not None:
                    # Give the bytes back before answering: a client slow to read the
                    # refusal must not keep holding the budget meanwhile.
                    chunks.clear()
                    self._buffered -= size
                    size = 0
                    await self._refuse(scope, send, *refusal)
                    return None
                chunks.append(body)
                if not message.get("more_body"):
                    return b"".join(chunks)
        finally:
            self._buffered -= size

    async def _refuse(self, scope: Scope, send: Send, status: int, detail: str) -> None:
        """A refusal before the body was read: recorded, in the API's own error shape."""
        record = _record_base(scope)
        record["reply"] = {"status": status, "error": detail}
        await self.recorder.add(record)
        rt_kind = record["route"]
        api = "gemini" if rt_kind.startswith("gemini") else rt_kind
        message = f"request too large: {detail}" if status == 413 else detail
        retry = 1.0 if status == 503 else None
        body = _error_body(api, Fault(status=status, message=message, retry_after=retry))
        # connection: close, since the unread rest of the body cannot be skipped cheaply
        headers = [(b"connection", b"close")]
        if retry is not None:
            headers.append((b"retry-after", b"1"))
        await self._respond(send, status, _JSON, [dumps(body)], headers)

    async def _respond(self, send: Send, status: int, ctype: bytes, frames: list[bytes],
                       headers: Sequence[tuple[bytes, bytes]] = (), delay_ms: int = 0) -> None:
        streaming = ctype == b"text/event-stream"
        head = [(b"content-type", ctype), (b"x-request-id", b"req_fake"), *headers]
        if streaming:
            head.append((b"cache-control", b"no-cache"))
        else:
            head.append((b"content-length", str(sum(map(len, frames))).encode()))
        await send({"type": "http.response.start", "status": status, "headers": head})
        for i, frame in enumerate(frames):
            if delay_ms and i:
                await trio.sleep(delay_ms / 1000)
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = await self._read_body(scope, receive, send)
        if raw is None:
            return
        query_string = scope.get("query_string", b"").decode("latin-1")
        raw_query = dict(parse_qsl(query_string, keep_blank_values=True))
        record = _record_base(scope)
        rt = route(scope["method"], scope["path"])
        headers = record["headers"]
        try:
            body_bytes = _decode_body(raw, headers.get("content-encoding", ""), self.max_body)
            values = _value_bound(body_bytes)
            if values > MAX_JSON_VALUES:
                raise TooLarge(f"about {values} JSON values, over the limit of "
                               f"{MAX_JSON_VALUES}")
            body = msgspec.json.decode(body_bytes) if body_bytes else None
        except TooLarge as exc:
            await self._refuse(scope, send, 413, str(exc))
            return
        except (BadRequest, OSError, zlib.error, msgspec.DecodeError, RecursionError) as exc:
            detail = "JSON nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            record["body"] = raw.decode("utf-8", "replace")
            record["reply"] = {"status": 400, "error": detail}
            await self.recorder.add(record)
            api = "gemini" if rt.kind.startswith("gemini") else rt.kind
            error = _error_body(api, Fault(status=400, message=detail))
            await self._respond(send, 400, _JSON, [dumps(error)])
            return
        record["body"] = body
        status, ctype, frames, extra, delay = self._dispatch(rt, body, len(raw), raw_query,
                                                             record)
        line = self.recorder.prepare(record)
        # Everything up to here ran without a checkpoint, so only one decoded body exists
        # at a time; drop it before the (possibly slow) record write and send.
        del body, body_bytes, raw, record
        await self.recorder.commit(line)
        await self._respond(send, status, ctype, frames, extra, delay)

    def _dispatch(self, rt: Route, body: Any, size: int, query: dict[str, str],
                  record: dict[str, Any]
                  ) -> tuple[int, bytes, list[bytes], list[tuple[bytes, bytes]], int]:
        models = self.script.models
        simple: dict[str, Any] | None = None
        if rt.kind == "head":
            record["reply"] = {"status": 200}
            return 200, b"text/plain", [], [], 0
        if rt.kind == "health":
            simple = {"status": "ok", "service": "cap model serve"}
        elif rt.kind == "models":
            simple = render_openai.models_body(models)
        elif rt.kind == "model":
            simple = render_openai.model_entry(rt.model)
        elif rt.kind == "gemini-models":
            simple = render_gemini.models_body(models)
        elif rt.kind == "gemini-model":
            simple = render_gemini.model_entry(rt.model)
        elif rt.kind == "anthropic-count":
            simple = {"input_tokens": estimate_tokens(size)}
        elif rt.kind == "gemini-count":
            simple = {"totalTokens": estimate_tokens(size)}
        elif rt.kind == "not-found":
            record["reply"] = {"status": 404}
            return 404, _JSON, [dumps({"error": {"message": "no such endpoint", "code": 404}})
                                ], [], 0
        if simple is not None:
            record["reply"] = {"status": 200}
            return 200, _JSON, [dumps(simple)], [], 0
        if not isinstance(body, dict):
            record["reply"] = {"status": 400, "error": "body is not a JSON object"}
            err = Fault(status=400, message="request body must be a JSON object")
            api = "gemini" if rt.kind == "gemini" else rt.kind
            return 400, _JSON, [dumps(_error_body(api, err))], [], 0
        req = _parse(rt, body, size)
        plan, self.state = plan_reply(self.script, self.state, req)
        record["api"] = req.api
        if plan.error is not None:
            fault = plan.error
            record["reply"] = {"status": fault.status, "source": plan.source}
            extra: list[tuple[bytes, bytes]] = []
            if fault.retry_after is not None:
                extra = [(b"retry-after", f"{fault.retry_after:g}".encode()),
                         (b"retry-after-ms", str(int(fault.retry_after * 1000)).encode())]
            return fault.status, _JSON, [dumps(_error_body(req.api, fault))], extra, 0
        record["reply"] = {"status": 200, "source": plan.source, "stream": req.stream,
                           "tool_calls": [c.name for c in plan.tool_calls]}
        ctype, frames = render(rt, req, plan, query)
        return 200, ctype, frames, [], plan.delay_ms
