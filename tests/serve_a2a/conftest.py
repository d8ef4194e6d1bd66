"""The publisher under test, in-process (its log at hand) or as a real ``cap serve a2a`` process,
and the official a2a-sdk client (asyncio) run in a worker thread, as its users run it.

The SDK client is asyncio-only and trio-cap is Trio: each client flow runs in
``asyncio.run`` on a worker thread while the server runs in the test's Trio loop.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import attrs
import httpx
import pytest
import trio
from a2a.client import AuthInterceptor, ClientConfig, ClientFactory, CredentialService
from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse, TaskState

from trio_cap.actors.bindings.a2a.frames import CURRENT, DRAFT, Spelling
from trio_cap.actors.bindings.a2a.serve_server import A2aServer, open_a2a_server
from trio_cap.actors.bindings.a2a.serve_sessions import SessionOptions
from trio_cap.actors.orchestrator import Orchestrator, open_orchestrator, resolve

T = TypeVar("T")
BOUND = 60.0
"""Seconds any one client flow may take on a loaded 2-core machine."""
TOKEN = "tok-alice-0123456789abcdef"
OTHER_TOKEN = "tok-bob-0123456789abcdef00"

SPELLINGS: dict[str, tuple[Spelling, ...]] = {"1.0": (CURRENT, DRAFT), "0.3": (DRAFT,)}
"""What the card offers for each spelling under test: the SDK client prefers 1.0 when it is
offered and switches to its 0.3 compat transport when only 0.3 is."""


@attrs.define
class Published:
    server: A2aServer
    orch: Orchestrator
    spelling: str

    @property
    def url(self) -> str:
        return self.server.base_url

    @property
    def methods(self) -> dict[str, int]:
        return self.server.app.seen


@asynccontextmanager
async def publish(tmp_path: Path, *, spelling: str = "1.0", tokens: dict[str, str] | None = None,
                  options: SessionOptions | None = None, ping: float = 10.0,
                  max_body: int | None = None, public_url: str | None = None,
                  connectors: dict[str, Any] | None = None) -> AsyncIterator[Published]:
    agent = await resolve("cap-agent")
    options = options or SessionOptions(cwd=str(tmp_path))
    kwargs: dict[str, Any] = {"max_body": max_body} if max_body else {}
    kwargs["public_url"] = public_url
    async with open_orchestrator(connectors=connectors) as orch, open_a2a_server(
            orch, agent, tokens=tokens, options=options, spellings=SPELLINGS[spelling],
            ping=ping, **kwargs) as server:
        yield Published(server, orch, spelling)


async def in_thread(flow: Callable[[], Awaitable[T]]) -> T:
    """Run an asyncio client flow to its end on a worker thread, within :data:`BOUND`."""
    def run() -> T:
        return asyncio.run(asyncio.wait_for(flow(), BOUND))  # type: ignore[arg-type]

    with trio.fail_after(BOUND + 10):
        return await trio.to_thread.run_sync(run)


class Token(CredentialService):
    """What an SDK user writes to hand the client a bearer token."""

    def __init__(self, token: str) -> None:
        self.token = token

    async def get_credentials(self, security_scheme_name: str, context: Any) -> str | None:
        return self.token


async def sdk_client(url: str, token: str | None = None, *, streaming: bool = True):
    factory = ClientFactory(ClientConfig(streaming=streaming,
                                         httpx_client=httpx.AsyncClient(timeout=BOUND)))
    interceptors = [AuthInterceptor(Token(token))] if token else None
    return await factory.create_from_url(url, interceptors=interceptors)


def user_message(text: str, *, task_id: str = "", context_id: str = "",
                 data: dict[str, Any] | None = None) -> SendMessageRequest:
    parts = [Part(text=text)] if text else []
    if data is not None:
        part = Part()
        part.data.struct_value.update(data)
        parts.append(part)
    message = Message(message_id=f"m-{text[:8]}-{id(parts)}", role=Role.ROLE_USER, parts=parts,
                      task_id=task_id, context_id=context_id)
    return SendMessageRequest(message=message)


def state_name(state: int) -> str:
    return TaskState.Name(state)


def texts_of(events: list[StreamResponse]) -> str:
    """The streamed agent text, as an SDK user collects it: the appended text parts of the
    artifact updates."""
    out = []
    for ev in events:
        if ev.HasField("artifact_update"):
            out += [p.text for p in ev.artifact_update.artifact.parts if p.text]
    return "".join(out)


def last_state(events: list[StreamResponse]) -> str:
    for ev in reversed(events):
        if ev.HasField("status_update"):
            return state_name(ev.status_update.status.state)
        if ev.HasField("task"):
            return state_name(ev.task.status.state)
    raise AssertionError("no status in the stream")


def ids_of(events: list[StreamResponse]) -> tuple[str, str]:
    for ev in events:
        if ev.HasField("task"):
            return ev.task.id, ev.task.context_id
        if ev.HasField("status_update"):
            return ev.status_update.task_id, ev.status_update.context_id
    raise AssertionError("no task in the stream")


@pytest.fixture(params=["1.0", "0.3"])
def spelling(request: pytest.FixtureRequest) -> str:
    return request.param


CAP = [sys.executable, "-m", "trio_cap.actors.cli"]


@asynccontextmanager
async def serving(args: list[str], cwd: Path, env: dict[str, str] | None = None,
                  ) -> AsyncIterator[tuple[trio.Process, str]]:
    """A real ``cap serve a2a ARGS`` process and its base URL, from its first stdout line;
    killed on every way out that did not end it."""
    proc = await trio.lowlevel.open_process(
        [*CAP, "serve", "a2a", "--listen", "127.0.0.1:0", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    try:
        assert proc.stdout is not None
        out = b""
        with trio.fail_after(BOUND):
            while b"\n" not in out:
                chunk = await proc.stdout.receive_some(4096)
                assert chunk, "cap serve a2a exited before it listened"
                out += chunk
        line = out.decode().splitlines()[0]
        assert line.startswith("cap serve a2a: listening on http://127.0.0.1:"), line
        yield proc, line.split()[5]
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def run_cap(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CAP, *args], capture_output=True, text=True, timeout=BOUND,
                          cwd=cwd, stdin=subprocess.DEVNULL)
