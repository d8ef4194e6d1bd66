"""Running the scripted model: as an async context manager, a pytest fixture or the CLI.

``open_model_server`` returns only once the socket is listening (hypercorn
reports its binds through ``task_status``), so callers never need to poll or
sleep before the first request; leaving the block shuts hypercorn down.

The socket is bound here, before hypercorn starts, so a port in use or an
address this machine does not have is one :class:`ListenError` line instead
of an exception group from inside the server's task tree.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio
from hypercorn.config import Config, Sockets
from hypercorn.trio.run import worker_serve
from hypercorn.utils import wrap_app

from trio_cap.actors.model_server.app import MAX_BODY_BYTES, MAX_BUFFERED_BYTES, ModelApp
from trio_cap.actors.model_server.record import Recorder
from trio_cap.actors.model_server.script import Script, default_script


@attrs.define
class ModelServer:
    """A running server: its base URL, its app (script, state) and its request log."""

    app: ModelApp
    host: str
    port: int

    @property
    def url(self) -> str:
        """Base URL without ``/v1``, as Anthropic/Gemini clients want it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    @property
    def records(self) -> list[dict[str, Any]]:
        return self.app.recorder.records

    def set_script(self, script: Script) -> None:
        self.app.set_script(script)

    async def wait_for_requests(self, count: int) -> list[dict[str, Any]]:
        return await self.app.recorder.wait_for(count)


class ListenError(Exception):
    """The address cannot be listened on; the message is one line for the user."""


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too); port 0 picks a free one."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit():
        raise ValueError(f"--listen wants HOST:PORT, got {listen!r}")
    if int(port) > 65535:
        raise ValueError(f"--listen: port {port} is out of range (0-65535)")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind_sockets(config: Config, host: str, port: int) -> Sockets:
    """Bind and listen now, turning every refusal into one readable line."""
    where = _address(host, port)
    try:
        sockets = config.create_sockets()
        for sock in sockets.insecure_sockets:
            sock.listen(config.backlog)
    except socket.gaierror as exc:
        raise ListenError(f"cannot listen on {where}: unknown host ({exc.strerror})") from None
    except OverflowError:
        raise ListenError(f"cannot listen on {where}: port out of range") from None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ListenError(f"{where} is already in use") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise ListenError(f"cannot listen on {where}: this machine has no such "
                              "address") from None
        if exc.errno == errno.EACCES:
            raise ListenError(f"cannot listen on {where}: permission denied (ports below "
                              "1024 need privileges)") from None
        raise ListenError(f"cannot listen on {where}: {exc.strerror or exc}") from None
    return sockets


def _config(host: str, port: int, quiet: bool) -> Config:
    config = Config()
    config.bind = [_address(host, port)]
    config.accesslog = None
    config.graceful_timeout = 1.0
    config.keep_alive_timeout = 30.0
    if quiet:
        config.errorlog = logging.getLogger("trio_cap.model_server")
        config.loglevel = "WARNING"
    return config


@asynccontextmanager
async def open_model_server(
    script: Script | None = None, *, host: str = "127.0.0.1", port: int = 0,
    record: Path | None = None, quiet: bool = True, keep_records: bool = True,
    max_body: int = MAX_BODY_BYTES, max_buffered: int = MAX_BUFFERED_BYTES,
) -> AsyncIterator[ModelServer]:
    """Serve ``script``; raises :class:`ListenError` or ``RecordError`` (one line) at start."""
    config = _config(host, port, quiet)
    recorder = Recorder(record, keep=keep_records)
    try:
        sockets = bind_sockets(config, host, port)
        app = ModelApp(script or default_script(), recorder, max_body=max_body,
                       max_buffered=max_buffered)
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(partial(
                worker_serve, wrap_app(app, config.wsgi_max_body_size, "asgi"), config,
                sockets=sockets, shutdown_trigger=stop.wait))
            bound_port = int(str(binds[0]).rsplit(":", 1)[1])
            try:
                yield ModelServer(app, host, bound_port)
            finally:
                stop.set()
    finally:
        recorder.close()


async def serve_until_signalled(
    script: Script, host: str, port: int, record: Path | None
) -> int:
    """The CLI's loop: print the URL, serve until SIGINT (130) or SIGTERM (0).

    A record file that stops accepting writes ends the server with 1: the user
    asked for every request to be recorded, and a record with silent gaps would
    mislead whoever reads it.
    """
    import signal

    exit_code = 0
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_model_server(script, host=host, port=port, record=record,
                                     quiet=False, keep_records=False) as server:
            print(f"cap model serve: listening on {server.url}", flush=True)
            print(f"  OpenAI base URL: {server.openai_url}  Anthropic/Gemini base URL: "
                  f"{server.url}", file=sys.stderr, flush=True)
            if host not in ("127.0.0.1", "localhost", "::1"):  # said once it is true
                print(f"cap model serve: warning: listening on {host}, not loopback: anyone "
                      "who can reach this address can use the server", file=sys.stderr,
                      flush=True)
            recorder = server.app.recorder

            async with trio.open_nursery() as nursery:
                async def on_signal() -> None:
                    nonlocal exit_code
                    async for signum in signals:
                        exit_code = 130 if signum == signal.SIGINT else 0
                        nursery.cancel_scope.cancel()
                        return

                async def on_record_failure() -> None:
                    nonlocal exit_code
                    await recorder.failed.wait()
                    print(f"cap model serve: {recorder.failure}; stopping", file=sys.stderr,
                          flush=True)
                    exit_code = 1
                    nursery.cancel_scope.cancel()

                nursery.start_soon(on_signal)
                nursery.start_soon(on_record_failure)
            _arm_exit_deadline(exit_code)
    return exit_code


SHUTDOWN_DEADLINE = 5.0
"""Seconds the CLI gives a graceful shutdown before it exits anyway."""


def _arm_exit_deadline(exit_code: int) -> None:
    """Make sure leaving really ends the process.

    hypercorn shields its socket writes from cancellation, so one client that stops
    reading its reply keeps a write (and with it the graceful shutdown) waiting
    forever.  A daemon timer thread is outside the event loop and cannot be held up
    by it: when the shutdown is done first, the process exits and the timer with it.
    """

    def force() -> None:
        message = ("cap model serve: a client did not let its connection close within "
                   f"{SHUTDOWN_DEADLINE:g} s; exiting anyway\n")
        with contextlib.suppress(OSError):
            os.write(2, message.encode())
        os._exit(exit_code)

    timer = threading.Timer(SHUTDOWN_DEADLINE, force)
    timer.daemon = True
    timer.start()
