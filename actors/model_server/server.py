"""Running the scripted model: as an async context manager, a pytest fixture or the CLI.

``open_model_server`` returns only once the socket is listening (hypercorn
reports its binds through ``task_status``), so callers never need to poll or
sleep before the first request; leaving the block shuts hypercorn down.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from trio_cap.actors.model_server.app import ModelApp
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


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too); port 0 picks a free one."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--listen wants HOST:PORT, got {listen!r}")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def _config(host: str, port: int, quiet: bool) -> Config:
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
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
    record: Path | None = None, quiet: bool = True,
) -> AsyncIterator[ModelServer]:
    recorder = Recorder(record)
    app = ModelApp(script or default_script(), recorder)
    stop = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(
                partial(serve, app, _config(host, port, quiet), shutdown_trigger=stop.wait)
            )
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
    """The CLI's loop: print the URL, serve until SIGINT (130) or SIGTERM (0)."""
    import signal

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_model_server(script, host=host, port=port, record=record,
                                     quiet=False) as server:
            print(f"cap model serve: listening on {server.url}", flush=True)
            print(f"  OpenAI base URL: {server.openai_url}  Anthropic/Gemini base URL: "
                  f"{server.url}", file=sys.stderr, flush=True)
            async for signum in signals:
                return 130 if signum == signal.SIGINT else 0
    return 0
