"""``cap replay LOG --agent SESSION_ID --serve a2a --listen HOST:PORT``: a recorded A2A agent.

The Trio shell of :class:`~trio_cap.actors.replay.playback_a2a.A2aPlayback`: a
small HTTP/1.1 server on h11 (not an ASGI server: a recorded stream that was cut
must be cut again, the connection closed mid-answer, which ASGI cannot say):
the card at the well-known paths, and every POST handed to the walk, which
answers it with the recorded pieces in the recorded order.  One task walks; each request's handler
only waits for its pieces (bounded channels: a driver that stops reading holds
the walk, never memory).  A request past the end of the recording gets a
JSON-RPC error naming that, so a driver never hangs on it.  Prints
``cap replay: serving … at URL`` once listening; stops on Ctrl-C (130) or SIGTERM.
``cap run --agent replay:LOG#SESSION`` of an A2A session serves it the same way, on
127.0.0.1 for the run's length (:func:`playback_agent`).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import h11
import msgspec
import trio

from trio_cap.actors.cli.common import EXIT_INTERRUPTED, EXIT_OK, UsageError
from trio_cap.actors.manifest.adhoc import A2A_PLAYBACK
from trio_cap.actors.manifest.resolve import Resolved
from trio_cap.actors.replay.playback_a2a import A2aPlayback, Answer, AwaitRequest

CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
PIECES = 64
"""Answer pieces buffered per request before the walk waits for its reader."""


class _Exchange:
    def __init__(self, rpc_id: Any) -> None:
        self.rpc_id = rpc_id
        self.pieces, self.receive = trio.open_memory_channel[Answer | None](PIECES)


class PlaybackServer:
    """Requests in (HTTP/1.1 on h11), the walk's answer pieces out."""

    def __init__(self, playback: A2aPlayback, base: str) -> None:
        self.playback = playback
        self.card = playback.card_for(base)
        self.arrivals, self._arrived = trio.open_memory_channel[_Exchange](PIECES)
        self.ended = False

    async def walk(self) -> None:
        """Answer the live requests as the recorded ones were answered, in recorded order."""
        live: dict[int, _Exchange] = {}
        try:
            async with self._arrived:
                for step in self.playback.steps():
                    if type(step) is AwaitRequest:
                        live[step.rid] = await self._arrived.receive()
                        continue
                    exchange = live.get(step.rid)  # type: ignore[union-attr]
                    if exchange is not None:
                        await _give(exchange, step)  # type: ignore[arg-type]
                self.ended = True
                for exchange in live.values():
                    await exchange.pieces.aclose()
                async for late in self._arrived:  # requests past the recording
                    await late.pieces.aclose()
        except trio.EndOfChannel:
            return  # the server is stopping

    async def connection(self, stream: trio.SocketStream) -> None:
        """One HTTP/1.1 connection (h11): requests answered in turn, kept alive."""
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                got = await _request(conn, stream)
                if got is None:
                    return
                request, body = got
                if not await self._respond(conn, stream, request, body):
                    return  # the recorded exchange was cut here: so is this one
                if conn.our_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (h11.ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
            return
        finally:
            await stream.aclose()

    async def _respond(self, conn: h11.Connection, stream: trio.SocketStream,
                       request: h11.Request, body: bytes) -> bool:
        path = request.target.decode("latin-1").split("?", 1)[0]
        if request.method == b"GET" and path in CARD_PATHS:
            await _whole(conn, stream, 200, "application/json", self.card)
            return True
        if request.method != b"POST":
            await _whole(conn, stream, 404, "text/plain", b"not found")
            return True
        try:
            message = msgspec.json.decode(body)
            rpc_id = message.get("id") if isinstance(message, dict) else None
        except msgspec.DecodeError:
            rpc_id = None
        exchange = _Exchange(rpc_id)
        if self.ended:
            await exchange.pieces.aclose()
        else:
            try:
                await self.arrivals.send(exchange)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                await exchange.pieces.aclose()
        return await _answer(conn, stream, exchange)


async def _send(conn: h11.Connection, stream: trio.SocketStream, event: Any) -> None:
    data = conn.send(event)
    if data:
        await stream.send_all(data)


async def _request(conn: h11.Connection,
                   stream: trio.SocketStream) -> tuple[h11.Request, bytes] | None:
    """The next request and its body; None when the client closed the connection."""
    request: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some(65536))
        elif type(event) is h11.Request:
            request = event
        elif type(event) is h11.Data:
            body += event.data
        elif type(event) is h11.EndOfMessage and request is not None:
            return request, bytes(body)
        elif type(event) is h11.ConnectionClosed or event is h11.PAUSED:
            return None


async def _whole(conn: h11.Connection, stream: trio.SocketStream, status: int, kind: str,
                 body: bytes) -> None:
    await _send(conn, stream, h11.Response(status_code=status, headers=[
        ("content-type", kind), ("content-length", str(len(body)))]))
    await _send(conn, stream, h11.Data(data=body))
    await _send(conn, stream, h11.EndOfMessage())


async def _answer(conn: h11.Connection, stream: trio.SocketStream,
                  exchange: _Exchange) -> bool:
    """The recorded pieces of one answer, as they come from the walk; False: cut."""
    started = False
    async with exchange.receive:
        async for piece in exchange.receive:
            if piece is None:
                continue
            if piece.kind == "dropped":
                return False  # the connection closes with the answer unfinished
            if piece.kind == "ended":
                break
            if not started:
                kind = {"sse": "text/event-stream", "status": "text/plain"}.get(
                    piece.kind, "application/json")
                await _send(conn, stream, h11.Response(status_code=piece.status,
                                                       headers=[("content-type", kind)]))
                started = True
            if piece.data:
                await _send(conn, stream, h11.Data(data=piece.data))
    if not started:  # past the recording: a readable JSON-RPC error, not a hang
        error = {"jsonrpc": "2.0", "id": exchange.rpc_id, "error": {
            "code": -32603, "message": "cap replay: the recording ends before this request"}}
        await _whole(conn, stream, 200, "application/json", msgspec.json.encode(error))
        return True
    await _send(conn, stream, h11.EndOfMessage())
    return True


async def _give(exchange: _Exchange, piece: Answer) -> None:
    """One piece to its request's handler (gone: the driver hung up; the walk goes on)."""
    try:
        await exchange.pieces.send(piece)
        if piece.kind != "sse":  # a body or status was read whole: the answer is complete
            await exchange.pieces.aclose()
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


def serve_a2a_playback(args: argparse.Namespace, recorded: list) -> int:
    from trio_cap.actors.model_server.server import parse_listen

    if not getattr(args, "listen", None):
        raise UsageError("--serve a2a needs --listen HOST:PORT (port 0: a free one, printed)")
    try:
        host, port = parse_listen(args.listen)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        playback = A2aPlayback(recorded)
    except ValueError as exc:
        raise UsageError(f"--agent {args.agent}: {exc}") from None
    return trio.run(_serve, playback, host, port, args.agent)


@asynccontextmanager
async def serving(playback: A2aPlayback, host: str, port: int) -> AsyncIterator[str]:
    """The playback served on ``host:port`` (0: a free one) while the block runs; its base
    URL.  Leaving the block closes the listener and every connection."""
    try:
        listeners = await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound = listeners[0].socket.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    base = f"http://{shown}:{bound}"
    server = PlaybackServer(playback, base)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(trio.serve_listeners, server.connection, listeners))
        nursery.start_soon(server.walk)
        try:
            yield base
        finally:
            nursery.cancel_scope.cancel()


async def _serve(playback: A2aPlayback, host: str, port: int, session: str) -> int:
    code = EXIT_OK
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with serving(playback, host, port) as base:
            print(f"cap replay: serving session {session}'s recorded agent at {base} "
                  f"(agent card {base}{CARD_PATHS[0]})", flush=True)
            async for signum in signals:
                code = EXIT_INTERRUPTED if signum == signal.SIGINT else EXIT_OK
                break
    print("cap replay: stopped", file=sys.stderr, flush=True)
    return code


@asynccontextmanager
async def playback_agent(agent: Resolved) -> AsyncIterator[Resolved]:
    """``cap run --agent replay:LOG#SESSION`` of a session recorded over a2a: its recording
    served on 127.0.0.1 (a free port) for as long as the run lasts, and the agent's manifest
    pointed at it.  Any other agent is given back as it is."""
    wanted = agent.manifest.extensions.get(A2A_PLAYBACK)
    if not isinstance(wanted, dict):
        yield agent
        return
    from trio_cap.actors.cli.serve_replay import _recorded

    recorded = _recorded(str(wanted["log"]), str(wanted["session"]))
    try:
        playback = A2aPlayback(recorded)
    except ValueError as exc:
        raise UsageError(f"--agent {agent.location}: {exc}") from None
    async with serving(playback, "127.0.0.1", 0) as base:
        manifest = agent.manifest
        fast_path = attrs.evolve(manifest.fast_path, a2a_serve_at=base + "/")
        yield attrs.evolve(agent, manifest=attrs.evolve(manifest, fast_path=fast_path))
