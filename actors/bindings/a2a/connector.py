"""The A2A driver's Trio shell: an httpx client (under Trio, through anyio) around the machine.

Everything protocol-shaped is :class:`~.machine.A2aDriver`'s and
:func:`~.machine_card.choose`'s; this module fetches the card, carries out the
machine's :class:`~.machine.Post` / :class:`~.machine.CloseExchange` outputs
as HTTP exchanges (one task each, in the connection's task group), splits SSE
with the sans-io :class:`~.machine_sse.SseReader` (every event of one read is
one machine step and one delivered batch, DESIGN §3.6; ``httpx-sse`` hands
events over one at a time and is the reader's test oracle instead), and feeds
what came of each exchange back in.
Machine calls and their delivery run under one lock, so the log sees events
in the order the machine made them whatever the interleaving of exchanges.

What can go wrong while opening, each a one-line :class:`ConnectError`:

=================================  ==================================================
what happens during ``open``       what the caller gets
=================================  ==================================================
no URL (manifest has none)         ``a2a: no URL …``
the agent cannot be reached        ``cannot reach the A2A agent at URL: …``
no card at either well-known path  ``no A2A agent card at URL/.well-known/agent-card.json
                                   or …/agent.json (HTTP 404)``
HTTP 401/403 on the card           ``… refused the agent card request (HTTP 401) …``
the card is not a card             ``the agent card at URL is not valid: …``
no spelling we speak, strict mode  ``machine_card.CardRefused``'s line
without the CAP extension, a card
sending a token to another origin
a token file that cannot be read   ``a2a: cannot read the token file F: …``
=================================  ==================================================

Settings (connector argument, else ``AgentSpec.options``, else the manifest's
``[fast_path]`` ``x-`` keys, else the default): the bearer token
(``token`` / ``token_file``; options ``a2a_token`` / ``a2a_token_file``;
``x-a2a-token-file``, ``x-a2a-token-env``, ``x-a2a-token``; finally the
``CAP_A2A_TOKEN`` environment variable) — never logged, sent only to the
card's own origin; the CAP extension check (``cap_extension`` /
``a2a_cap_extension`` / ``x-a2a-cap-extension``: ``warn``, the default, or
``strict``); extra message metadata (``x-a2a-metadata``, a table; ``${cwd}``
in its strings becomes the session's working directory).

With a :class:`~trio_cap.actors.recording.Recorder` (``--record frames|raw``) each
machine step is logged as the ``frame.in`` leading its batch (:mod:`.recording`
at the end of this module: the card and how it was chosen, each SSE read's events, a body, a status,
an exchange's end or failure, a send or cancel taken) and each request the
machine makes as a ``frame.out`` in its place; ``cap replay --check`` re-runs
them through a fresh :class:`A2aDriver`.
"""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import msgspec
import trio

from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.actors.bindings.a2a.machine import (
    A2aDriver,
    Body,
    CloseExchange,
    Dropped,
    Ended,
    HttpStatus,
    Post,
    SseBatch,
)
from trio_cap.actors.bindings.a2a.machine_card import EXTENSION_MODES, CardRefused, choose
from trio_cap.actors.bindings.a2a.machine_parts import BINDING
from trio_cap.actors.bindings.a2a.machine_sse import SseReader
from trio_cap.actors.bindings.deliver import Deliverer
from trio_cap.actors.bindings.process import open_task_group
from trio_cap.actors.connection import AgentSpec, ConnectError
from trio_cap.actors.ids import IdSource, RandomIds
from trio_cap.actors.recording import Recorder, frame_bytes
from trio_cap.events.kinds import Cancel, CancelScope, Event, FrameIn, FrameOut, SessionWarning

TOKEN_ENV = "CAP_A2A_TOKEN"
CANCEL_BOUND = 5.0
"""Seconds a cancel may take at the agent while the session is being left."""
_CANCEL_METHODS = frozenset(m.cancel for m in f.METHODS.values())
SEND, CANCEL = "send", "cancel"
"""A step's input when it is the session's (a send, a cancel), not a frame fed in."""
MAX_CARD = 1 << 20
MAX_BODY = 16 << 20


class A2aConnection:
    def __init__(self, client: httpx.AsyncClient, machine: A2aDriver, out: Deliverer,
                 nursery: trio.Nursery, *, token: str | None, extensions: bool,
                 stream_timeout: float | None, recorder: Recorder | None = None,
                 drawn: list[str] | None = None) -> None:
        self.client = client
        self.machine = machine
        self.out = out
        self.nursery = nursery
        self.token = token
        self.extensions = extensions
        self.stream_timeout = stream_timeout
        self.lock = trio.StrictFIFOLock()
        self.scopes: dict[int, trio.CancelScope] = {}
        self.recorder = recorder
        self.drawn = drawn if drawn is not None else []
        """The ids the machine drew in the step under way (recording only)."""

    # ---- Connection ---------------------------------------------------------------------
    async def send(self, frames: Sequence[Event]) -> None:
        await self._step(lambda: self.machine.send(frames), SEND)

    async def cancel(self, scope: CancelScope) -> None:
        await self._step(lambda: self.machine.send([Cancel(scope=scope)]), CANCEL, scope)

    # ---- plumbing -------------------------------------------------------------------------
    async def _step(self, step: Callable[[], list[Any]], what: object,
                    detail: str | None = None) -> None:
        """One machine step; ``what`` is its input (a frame fed, or SEND / CANCEL)."""
        async with self.lock:
            rec = self.recorder
            if rec is not None:
                self.drawn.clear()
            outputs = step()
            rest = []
            closing = []
            for item in outputs:
                kind = type(item)
                if kind is Post:
                    self.nursery.start_soon(self._exchange, item)
                elif kind is CloseExchange:
                    scope = self.scopes.pop(item.request_id, None)
                    if scope is not None:
                        closing.append(scope)
                else:
                    rest.append(item)
                    continue
                if rec is not None:
                    rest.append(out_event(rec, item))
            received: FrameIn | None = None
            if rec is not None:
                received = in_event(rec, what, detail, self.drawn)
            # Delivered first: the exchange being closed may be the very task running this
            # step, and a cancelled scope would drop the turn's end on the floor.
            try:
                await self.out(rest, received)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the session stopped listening: it is being left, nothing is waited on
            for scope in closing:
                scope.cancel()

    async def _feed(self, frame: object) -> None:
        await self._step(lambda: self.machine.receive_frame(frame), frame)

    def headers(self, spelling: f.Spelling, streaming: bool,
                last_event_id: str | None = None) -> dict[str, str]:
        headers = {"Content-Type": "application/json",
                   "Accept": "text/event-stream, application/json" if streaming
                   else "application/json",
                   f.VERSION_HEADER: spelling}
        if self.extensions:
            headers[f.EXTENSIONS_HEADER[spelling]] = f.CAP_EXTENSION
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        return headers

    async def _exchange(self, post: Post) -> None:
        rid = post.request_id
        # A cancel must reach the agent even when the session is being torn down around it
        # (cap.cancel scope session, a shutdown): shielded, and bounded instead.
        cancel = post.method in _CANCEL_METHODS
        with trio.CancelScope(shield=cancel) as scope:
            if cancel:
                scope.deadline = trio.current_time() + CANCEL_BOUND
            self.scopes[rid] = scope
            if post.delay:
                await trio.sleep(post.delay)
            responded = False
            timeout = httpx.Timeout(30.0, read=self.stream_timeout if post.streaming else 60.0)
            try:
                async with self.client.stream(
                        "POST", post.url, content=post.body, timeout=timeout,
                        headers=self.headers(post.spelling, post.streaming,
                                             post.last_event_id)) as resp:
                    responded = True
                    if not resp.is_success:
                        await self._feed(HttpStatus(rid, resp.status_code,
                                                    await _read(resp, 4096, cut=True)))
                    elif "text/event-stream" in resp.headers.get("content-type", ""):
                        reader = SseReader()
                        async for chunk in resp.aiter_bytes():
                            datas = reader.feed(chunk)
                            if datas:  # every event of one read: one machine step, one batch
                                await self._feed(SseBatch(rid, datas, reader.last_id))
                        datas = reader.feed_eof()
                        if datas:
                            await self._feed(SseBatch(rid, datas, reader.last_id))
                        await self._feed(Ended(rid))
                    else:
                        await self._feed(Body(rid, await _read(resp, MAX_BODY)))
                        await self._feed(Ended(rid))
            except httpx.TimeoutException as exc:
                await self._feed(Dropped(rid, _describe(exc), timeout=True,
                                         responded=responded))
            except (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL, _TooLarge) as exc:
                await self._feed(Dropped(rid, _describe(exc), responded=responded))
        self.scopes.pop(rid, None)

    async def shutdown(self) -> None:
        """Leaving the session: cancel a running task at the agent (bounded), end every exchange."""
        with trio.move_on_after(CANCEL_BOUND) as bound:
            bound.shield = True
            if self.machine.turn_open and self.machine.task_id is not None \
                    and not self.machine.closed:
                async with self.lock:
                    posts = [p for p in self.machine.send([Cancel(scope="current_turn")])
                             if type(p) is Post]
                for post in posts:  # awaited here, not in the task group being torn down
                    await self._exchange(post)
        async with self.lock:
            outputs = self.machine.close()
        for item in outputs:
            scope = self.scopes.pop(getattr(item, "request_id", -1), None)
            if scope is not None:
                scope.cancel()


class _TooLarge(Exception):
    pass


async def _read(resp: httpx.Response, limit: int, *, cut: bool = False) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            if cut:
                break
            raise _TooLarge(f"the answer is larger than {limit} bytes")
    return b"".join(chunks)[:limit] if cut else b"".join(chunks)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


# ---- settings ---------------------------------------------------------------------------------


def _manifest_x(spec: AgentSpec, key: str) -> Any:
    manifest = spec.options.get("manifest")
    extensions = getattr(manifest, "extensions", None) or {}
    return extensions.get(f"fast_path.{key}")


def read_token_file(path: str) -> str:
    """The one token in ``path`` (one line); a :class:`ConnectError` naming the file, never
    its content."""
    try:
        with open(path, encoding="utf-8") as fh:
            token = fh.read(65536).strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConnectError(f"cannot read the token file {path}: {reason}") from None
    if not token or any(c.isspace() for c in token):
        raise ConnectError(f"the token file {path} must hold one token on one line")
    return token


def resolve_token(spec: AgentSpec, token: str | None = None,
                  token_file: str | None = None) -> str | None:
    """The bearer token, by the precedence in the module docstring; never put in a message."""
    if token:
        return token
    if token_file:
        return read_token_file(token_file)
    opts = spec.options
    if opts.get("a2a_token"):
        return str(opts["a2a_token"])
    if opts.get("a2a_token_file"):
        return read_token_file(str(opts["a2a_token_file"]))
    path = _manifest_x(spec, "x-a2a-token-file")
    if isinstance(path, str) and path:
        return read_token_file(os.path.expanduser(path))
    env = _manifest_x(spec, "x-a2a-token-env")
    if isinstance(env, str) and env and os.environ.get(env):
        return os.environ[env].strip()
    literal = _manifest_x(spec, "x-a2a-token")
    if isinstance(literal, str) and literal:
        return literal
    return os.environ.get(TOKEN_ENV, "").strip() or None


def _mode(spec: AgentSpec, given: str | None) -> str:
    mode = given or spec.options.get("a2a_cap_extension") or _manifest_x(
        spec, "x-a2a-cap-extension") or "warn"
    if mode not in EXTENSION_MODES:
        raise ConnectError(f"a2a: x-a2a-cap-extension must be one of {', '.join(EXTENSION_MODES)}"
                           f", not {mode!r}")
    return str(mode)


def _metadata(spec: AgentSpec) -> dict[str, Any]:
    table = _manifest_x(spec, "x-a2a-metadata")
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise ConnectError("a2a: fast_path.x-a2a-metadata must be a table")
    cwd = spec.config.cwd

    def sub(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("${cwd}", cwd)
        if isinstance(value, dict):
            return {k: sub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [sub(v) for v in value]
        return value

    return sub(table)


def card_urls(url: str) -> list[str]:
    """Where to look for the card: under the URL's path, then at its origin's root."""
    parts = urlsplit(url)
    if parts.path.endswith(".json"):
        return [url]
    base = url.rstrip("/")
    urls = [base + path for path in f.CARD_PATHS]
    root = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    if parts.path.strip("/"):
        urls += [root + path for path in f.CARD_PATHS]
    return urls


async def fetch_card(client: httpx.AsyncClient, url: str,
                     token: str | None) -> tuple[f.AgentCard, str]:
    headers = {"Accept": "application/json", f.VERSION_HEADER: f.CURRENT}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    statuses: list[str] = []
    tried = card_urls(url)
    for where in tried:
        try:
            async with client.stream("GET", where, headers=headers) as resp:
                if resp.status_code in (401, 403):
                    raise ConnectError(f"the A2A agent at {where} refused the agent card request "
                                       f"(HTTP {resp.status_code}): give a bearer token with "
                                       f"--token-file, {TOKEN_ENV} or fast_path.x-a2a-token-file")
                if not resp.is_success:
                    statuses.append(str(resp.status_code))
                    continue
                body = await _read(resp, MAX_CARD)
        except httpx.TimeoutException as exc:
            raise ConnectError(f"the A2A agent at {where} did not answer in time: "
                               f"{_describe(exc)}") from None
        except (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL, _TooLarge) as exc:
            raise ConnectError(f"cannot reach the A2A agent at {where}: {_describe(exc)}") from None
        try:
            return f.decode_card(body), where
        except f.FrameError as exc:
            raise ConnectError(f"the agent card at {where} is not valid: {exc}") from None
    raise ConnectError(f"no A2A agent card at {' or '.join(tried)} "
                       f"(HTTP {', '.join(dict.fromkeys(statuses))})")


class A2aConnector:
    """Drives a remote agent over A2A, either spelling (``binding = "a2a"``).

    ``token`` / ``token_file`` give the bearer token (``cap run --token-file``);
    ``cap_extension`` is ``warn`` or ``strict``; ``stream_timeout`` bounds the
    silence on an SSE stream (a2a-sdk pings every 15 s); ``transport`` replaces
    httpx's (tests).
    """

    binding = BINDING

    def __init__(self, *, token: str | None = None, token_file: str | None = None,
                 cap_extension: str | None = None, connect_timeout: float = 10.0,
                 stream_timeout: float | None = 300.0, max_resubscribes: int = 3,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.token = token
        self.token_file = token_file
        self.cap_extension = cap_extension
        self.connect_timeout = connect_timeout
        self.stream_timeout = stream_timeout
        self.max_resubscribes = max_resubscribes
        self.transport = transport

    @asynccontextmanager
    async def open(self, spec: AgentSpec,
                   deliver: trio.MemorySendChannel[Any]) -> AsyncIterator[A2aConnection]:
        try:
            if not spec.url:
                raise ConnectError("a2a: no URL (set fast_path.a2a_serve_at, or use a2a:URL)")
            token = resolve_token(spec, self.token, self.token_file)
            mode = _mode(spec, self.cap_extension)
            metadata = _metadata(spec)
        except ConnectError:
            deliver.close()
            raise
        ids: IdSource = spec.ids or RandomIds()
        timeout = httpx.Timeout(self.connect_timeout)
        failure: str | None = None
        try:
            async with httpx.AsyncClient(timeout=timeout, transport=self.transport,
                                         follow_redirects=False, trust_env=False) as client:
                try:
                    card, card_url = await fetch_card(client, spec.url, token)
                    choice = choose(card, card_url, mode=mode, token=token is not None)  # type: ignore[arg-type]
                except (ConnectError, CardRefused) as exc:
                    failure = str(exc)
                if failure is None:
                    recorder: Recorder | None = spec.options.get("recorder")
                    drawn: list[str] = []

                    def new_id() -> str:
                        value = ids.new("a2a-msg")
                        if recorder is not None:
                            drawn.append(value)
                        return value

                    machine = A2aDriver(choice, new_id=new_id, metadata=metadata,
                                        max_resubscribes=self.max_resubscribes)
                    out = Deliverer(deliver)
                    warnings = open_warnings(card.name, choice, token is not None)
                    if recorder is None:
                        await out.events(warnings)
                    else:  # the card, as chosen: what a replay builds its machine from
                        await out(warnings, card_event(
                            recorder, card=card, card_url=card_url, mode=mode,
                            token=token is not None, metadata=metadata,
                            max_resubscribes=self.max_resubscribes))
                    async with open_task_group() as nursery:
                        conn = A2aConnection(client, machine, out, nursery, token=token,
                                             extensions=choice.cap_extension,
                                             stream_timeout=self.stream_timeout,
                                             recorder=recorder, drawn=drawn)
                        try:
                            yield conn
                        finally:
                            await conn.shutdown()
        finally:
            deliver.close()
        if failure is not None:
            raise ConnectError(failure)


def open_warnings(name: str, choice: Any, token: bool) -> list[SessionWarning]:
    """What a session is told about the card it drives (logged before the first step)."""
    warnings = []
    if not choice.cap_extension:
        warnings.append(SessionWarning(
            code="a2a_no_cap_extension",
            message=f"the A2A agent {name!r} does not declare the CAP "
            f"extension {f.CAP_EXTENSION!r}; driving it as a plain A2A agent "
            "(text, artifacts and task states only)"))
    if choice.bearer_declared and not token:
        warnings.append(SessionWarning(
            code="a2a_no_token",
            message=f"the agent card of {name!r} declares bearer "
            f"authentication but no token is set (--token-file, {TOKEN_ENV} "
            "or fast_path.x-a2a-token-file); requests go without one"))
    return warnings


# ---- recording (--record): each step's input and each request, as the log holds them -----------


def card_event(rec: Recorder, *, card: f.AgentCard, card_url: str, mode: str, token: bool,
               metadata: dict[str, Any], max_resubscribes: int) -> FrameIn:
    """The card read at open and what chose among its interfaces (never the token)."""
    return rec.step_in(None, signal="card", frame={
        "card": msgspec.json.decode(msgspec.json.encode(card)), "card_url": card_url,
        "mode": mode, "token": token, "metadata": metadata,
        "max_resubscribes": max_resubscribes})


def _texts(datas: Sequence[bytes]) -> dict[str, Any]:
    try:
        return {"datas": [d.decode("utf-8") for d in datas]}
    except UnicodeDecodeError:
        return {"datas_b64": [base64.b64encode(d).decode("ascii") for d in datas]}


def in_event(rec: Recorder, what: object, detail: str | None, drawn: list[str]) -> FrameIn:
    """The frame.in of one step: the frame fed in, or the session's send / cancel."""
    ids = tuple(drawn)
    if isinstance(what, str):
        return rec.step_in(None, signal=what, text=detail, ids=ids)
    if isinstance(what, SseBatch):
        return rec.step_in(None, frame={"in": "sse", "rid": what.request_id,
                                        **_texts(what.datas),
                                        "last_event_id": what.last_event_id}, ids=ids)
    if isinstance(what, Body):
        return rec.step_in(None, what.data, frame={"in": "body", "rid": what.request_id},
                           ids=ids)
    if isinstance(what, HttpStatus):
        return rec.step_in(None, what.body, frame={"in": "status", "rid": what.request_id,
                                                   "status": what.status}, ids=ids)
    if isinstance(what, Dropped):
        return rec.step_in(None, frame={"in": "dropped", "rid": what.request_id,
                                        "detail": what.detail, "timeout": what.timeout,
                                        "responded": what.responded}, ids=ids)
    return rec.step_in(None, frame={"in": "ended", "rid": getattr(what, "request_id", None)},
                       ids=ids)


def incoming(ev: FrameIn) -> object | None:
    """:func:`in_event` undone: the frame the machine was fed (None for a signal)."""
    given = ev.frame if isinstance(ev.frame, dict) else {}
    kind, rid = given.get("in"), given.get("rid")
    data = frame_bytes(ev)
    if kind == "sse":
        datas = ([d.encode("utf-8") for d in given.get("datas") or ()]
                 or [base64.b64decode(d) for d in given.get("datas_b64") or ()])
        return SseBatch(rid, datas, given.get("last_event_id"))
    if kind == "body":
        return Body(rid, data or b"")
    if kind == "status":
        return HttpStatus(rid, int(given.get("status") or 0), data or b"")
    if kind == "dropped":
        return Dropped(rid, str(given.get("detail") or ""), bool(given.get("timeout")),
                       bool(given.get("responded")))
    if kind == "ended":
        return Ended(rid)
    return None


def out_event(rec: Recorder, item: Post | CloseExchange) -> FrameOut:
    """A request the machine makes (its JSON-RPC body as the text), or an exchange closed."""
    if isinstance(item, CloseExchange):
        return rec.out_event(frame={"close": item.request_id})
    post = item
    return rec.out_event(post.body, frame={
        "post": post.request_id, "method": post.method, "url": post.url,
        "spelling": post.spelling, "streaming": post.streaming, "delay": post.delay,
        "last_event_id": post.last_event_id})
