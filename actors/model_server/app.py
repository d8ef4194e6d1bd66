"""The ASGI shell: bytes in, route, parse, plan, render, bytes out.

Everything that decides anything lives in the sans-io modules; this file only
reads the body, records the request, applies the plan's timing (a slow stream
sleeps between chunks) and writes the frames.  It runs under hypercorn's Trio
worker, so ``trio.sleep`` is the right sleep.
"""

from __future__ import annotations

import gzip
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


class BadRequest(Exception):
    pass


def _decode_body(raw: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding == "gzip":
        return gzip.decompress(raw)
    if encoding == "deflate":
        return zlib.decompress(raw)
    raise BadRequest(f"unsupported content-encoding {encoding!r}")


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

    def __init__(self, script: Script, recorder: Recorder | None = None) -> None:
        self.script = script
        self.state = ScriptState()
        self.recorder = recorder if recorder is not None else Recorder()

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
        chunks = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        await self._handle(scope, b"".join(chunks), send)

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

    async def _handle(self, scope: Scope, raw: bytes, send: Send) -> None:
        method, path = scope["method"], scope["path"]
        query_string = scope.get("query_string", b"").decode("latin-1")
        query = dict(clean_query(query_string))
        raw_query = dict(parse_qsl(query_string, keep_blank_values=True))
        headers = clean_headers(scope.get("headers", []))
        record: dict[str, Any] = {"method": method, "path": path, "query": query,
                                  "headers": headers, "body": None}
        rt = route(method, path)
        record["route"] = rt.kind
        try:
            body_bytes = _decode_body(raw, headers.get("content-encoding", ""))
            body = msgspec.json.decode(body_bytes) if body_bytes else None
        except (BadRequest, OSError, zlib.error, msgspec.DecodeError) as exc:
            record["body"] = raw.decode("utf-8", "replace")
            record["reply"] = {"status": 400, "error": str(exc)}
            self.recorder.add(record)
            await self._respond(send, 400, _JSON, [dumps({"error": {"message": str(exc)}})])
            return
        record["body"] = body
        status, ctype, frames, extra, delay = self._dispatch(rt, body, len(raw), raw_query,
                                                             record)
        self.recorder.add(record)
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
