"""``open_a2a_server``: publish an agent over A2A on hypercorn's Trio worker.

The socket is bound before hypercorn starts (``model_server.server.bind_sockets``),
so an address in use is one :class:`ListenError` line; the block is entered
once the server listens, with the card's URL known (port 0 picks one).
Leaving it ends every stream, then hypercorn, then (the caller's
orchestrator) the sessions.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import partial

import attrs
import trio
from hypercorn.config import Config, Sockets
from hypercorn.trio.run import worker_serve
from hypercorn.utils import wrap_app

from trio_cap.actors.bindings.a2a import publisher_wire as wire
from trio_cap.actors.bindings.a2a.frames import CURRENT, DRAFT, Spelling
from trio_cap.actors.bindings.a2a.serve_app import (
    MAX_BODY_BYTES,
    PING_SECONDS,
    RPC_PATH,
    A2aApp,
)
from trio_cap.actors.bindings.a2a.serve_sessions import Publisher, SessionOptions
from trio_cap.actors.manifest import Resolved
from trio_cap.actors.model_server.server import ListenError, bind_sockets
from trio_cap.actors.orchestrator import Orchestrator

__all__ = ["A2aServer", "Bound", "ListenError", "bind", "is_loopback", "open_a2a_server"]


def is_loopback(host: str) -> bool:
    """Only a loopback address (or ``localhost``) may serve without a token."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@attrs.define
class A2aServer:
    app: A2aApp
    publisher: Publisher
    host: str
    port: int
    base_url: str

    @property
    def rpc_url(self) -> str:
        return self.base_url + RPC_PATH

    @property
    def card_url(self) -> str:
        return self.base_url + "/.well-known/agent-card.json"


def _hypercorn_config(host: str, port: int) -> Config:
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("trio_cap.a2a_server")
    config.loglevel = "WARNING"
    config.graceful_timeout = 2.0
    config.keep_alive_timeout = 75.0
    return config


@attrs.frozen
class Bound:
    """A listening socket and hypercorn's config for it, made before anything else exists."""

    host: str
    config: Config
    sockets: Sockets


def bind(host: str, port: int) -> Bound:
    """Listen on ``host:port`` now; ListenError (one line) when that cannot be done."""
    config = _hypercorn_config(host, port)
    return Bound(host, config, bind_sockets(config, host, port))


@asynccontextmanager
async def open_a2a_server(
    orch: Orchestrator, agent: Resolved, *, host: str = "127.0.0.1", port: int = 0,
    tokens: Mapping[str, str] | None = None, options: SessionOptions | None = None,
    spellings: tuple[Spelling, ...] = (CURRENT, DRAFT), public_url: str | None = None,
    max_body: int = MAX_BODY_BYTES, ping: float = PING_SECONDS, bound: Bound | None = None,
) -> AsyncIterator[A2aServer]:
    """Serve ``agent`` (each A2A context a session of ``orch``) on ``bound`` (else
    ``host:port``, raising ListenError at start)."""
    bound = bound or bind(host, port)
    host, config, sockets = bound.host, bound.config, bound.sockets
    options = options or SessionOptions()
    async with trio.open_nursery() as server, trio.open_nursery() as pumps:
        publisher = Publisher(orch, agent, options, pumps)
        bound_port = sockets.insecure_sockets[0].getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        base = (public_url or f"http://{shown}:{bound_port}").rstrip("/")
        manifest = agent.manifest
        card = wire.agent_card(name=manifest.agent.name, url=base + RPC_PATH,
                               spellings=spellings, bearer=tokens is not None,
                               profiles=tuple(manifest.agent.profiles),
                               binding=options.binding)
        app = A2aApp(publisher, card, spellings=spellings, tokens=tokens, max_body=max_body,
                     ping=ping)
        stop = trio.Event()
        await server.start(partial(worker_serve, wrap_app(app, config.wsgi_max_body_size,
                                                          "asgi"), config, sockets=sockets,
                                   shutdown_trigger=stop.wait))
        try:
            yield A2aServer(app, publisher, host, bound_port, base)
        finally:
            publisher.closing.set()  # every stream ends, so hypercorn's graceful stop is quick
            stop.set()
            pumps.cancel_scope.cancel()
            server.cancel_scope.deadline = trio.current_time() + config.graceful_timeout + 3
