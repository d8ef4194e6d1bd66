"""An ACP client built on the official Python SDK (``agent-client-protocol``), for driving
``cap agent --cap-speak acp`` the way an editor does.

The SDK gives the connection, the routing and the models; what a client must
do itself — answer permissions, read and write files, run terminals — is
here, as a small real implementation (files are really written by this
client, commands really run in its terminals).  Every message on the wire is
recorded in order (the SDK's stream observers), so tests can check what came
after what.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from acp import RequestError, spawn_agent_process
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    DeniedOutcome,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

CAP = str(Path(sys.executable).parent / "cap")
LIMIT = 60.0

Answer = Callable[[Any, list[Any]], Any]
"""``answer(tool_call, options)`` → an option id, or None for ``cancelled``; may be async."""


def allow(_call: Any, _options: list[Any]) -> str:
    return "allow_once"


class _Terminal:
    def __init__(self, proc: asyncio.subprocess.Process, limit: int | None) -> None:
        self.proc = proc
        self.limit = limit
        self.output = b""
        self.truncated = False
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while chunk := await self.proc.stdout.read(65536):
            self.output += chunk
            if self.limit is not None and len(self.output) > self.limit:
                self.output = self.output[-self.limit:]
                self.truncated = True

    def status(self) -> TerminalExitStatus | None:
        code = self.proc.returncode
        if code is None:
            return None
        if code < 0:
            return TerminalExitStatus(exit_code=None, signal=signal.Signals(-code).name)
        return TerminalExitStatus(exit_code=code, signal=None)


class RecordingClient:
    """The client side: records updates and reverse calls, answers them for real."""

    def __init__(self, root: Path, *, fs: bool = False, terminal: bool = False,
                 answer: Answer = allow, elicit: Any = None) -> None:
        self.root = root.resolve()
        self.fs = fs
        self.terminal = terminal
        self.answer = answer
        self.elicit = elicit  # the form answer, when the client advertises form elicitation
        self.elicitations: list[tuple[str, Any]] = []
        self.wire: list[tuple[str, dict[str, Any]]] = []
        self.updates: list[tuple[str, Any]] = []
        self.permissions: list[Any] = []
        self.writes: list[tuple[str, str]] = []
        self.reads: list[str] = []
        self.terminals: dict[str, _Terminal] = {}
        self.commands: list[tuple[str, list[str]]] = []
        self.conn: Any = None
        self.updated = asyncio.Event()  # set by the first session/update
        self.terminal_made = asyncio.Event()  # set by the first terminal/create
        self.killed: list[str] = []

    def capabilities(self) -> ClientCapabilities:
        return ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=self.fs, write_text_file=self.fs),
            terminal=self.terminal,
            elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities())
            if self.elicit is not None else None)

    def observe(self, event: StreamEvent) -> None:
        way = "in" if event.direction == StreamDirection.INCOMING else "out"
        self.wire.append((way, event.message))

    # ---- the SDK's Client interface ------------------------------------------------
    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append((session_id, update))
        self.updated.set()

    async def create_elicitation(self, message: str, mode: Any, **_: Any) -> dict[str, Any]:
        self.elicitations.append((message, mode))
        return {"action": "accept", "content": {"answer": self.elicit}}

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **_: Any) -> RequestPermissionResponse:
        self.permissions.append(tool_call)
        choice = self.answer(tool_call, options)
        if asyncio.iscoroutine(choice):
            choice = await choice
        if choice is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected",
                                                                option_id=choice))

    def _inside(self, path: str) -> Path:
        full = Path(path).resolve()
        if not path.startswith("/") or (full != self.root and self.root not in full.parents):
            raise RequestError(-32602, f"{path} is outside the client's workspace")
        return full

    async def read_text_file(self, session_id: str, path: str, line: int | None = None,
                             limit: int | None = None, **_: Any) -> ReadTextFileResponse:
        self.reads.append(path)
        full = self._inside(path)
        if not full.is_file():
            raise RequestError(-32002, f"no file {path}")
        lines = full.read_text().splitlines(keepends=True)
        start = (line or 1) - 1
        chosen = lines[start:start + limit] if limit else lines[start:]
        return ReadTextFileResponse(content="".join(chosen))

    async def write_text_file(self, session_id: str, path: str, content: str,
                              **_: Any) -> WriteTextFileResponse:
        full = self._inside(path)
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(content)
        self.writes.append((path, content))
        return WriteTextFileResponse()

    async def create_terminal(self, session_id: str, command: str,
                              args: list[str] | None = None, env: list[Any] | None = None,
                              cwd: str | None = None, output_byte_limit: int | None = None,
                              **_: Any) -> CreateTerminalResponse:
        self.commands.append((command, list(args or [])))
        proc = await asyncio.create_subprocess_exec(
            command, *(args or []), cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, **{e.name: e.value for e in env or []}})
        terminal_id = f"term_{len(self.terminals) + 1}"
        self.terminals[terminal_id] = _Terminal(proc, output_byte_limit)
        self.terminal_made.set()
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str,
                                     **_: Any) -> WaitForTerminalExitResponse:
        term = self.terminals[terminal_id]
        await term.proc.wait()
        await term.reader
        status = term.status()
        assert status is not None
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def terminal_output(self, session_id: str, terminal_id: str,
                              **_: Any) -> TerminalOutputResponse:
        term = self.terminals[terminal_id]
        return TerminalOutputResponse(output=term.output.decode(errors="replace"),
                                      truncated=term.truncated, exit_status=term.status())

    async def kill_terminal(self, session_id: str, terminal_id: str, **_: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.terminals[terminal_id].proc.kill()

    async def release_terminal(self, session_id: str, terminal_id: str, **_: Any) -> None:
        term = self.terminals.pop(terminal_id, None)
        if term is not None and term.proc.returncode is None:
            self.killed.append(terminal_id)
            with contextlib.suppress(ProcessLookupError):
                term.proc.kill()
            await term.proc.wait()

    # ---- what the tests read ----------------------------------------------------------
    def kinds(self) -> list[str]:
        return [u.session_update for _, u in self.updates]

    def reply_text(self) -> str:
        return "".join(u.content.text for _, u in self.updates
                       if u.session_update == "agent_message_chunk")

    def of_kind(self, kind: str) -> list[Any]:
        return [u for _, u in self.updates if u.session_update == kind]


@contextlib.asynccontextmanager
async def open_agent(client: RecordingClient, *args: str,
                     env: dict[str, str] | None = None) -> AsyncIterator[Any]:
    """``cap agent --cap-speak acp ARGS`` spawned by the SDK, initialized with the client's
    capabilities; yields the SDK's ClientSideConnection."""
    async with spawn_agent_process(
        client, CAP, "agent", "--cap-speak", "acp", *args, env=env, cwd=str(client.root),
        transport_kwargs={"stderr": None}, observers=[client.observe],
        use_unstable_protocol=client.elicit is not None,  # 0.12.1 calls elicitation unstable
    ) as (conn, _proc):
        client.conn = conn
        await conn.initialize(protocol_version=1, client_capabilities=client.capabilities())
        yield conn


def run(coro: Any, limit: float = LIMIT) -> Any:
    return asyncio.run(asyncio.wait_for(coro, limit))


def nothing_after_response(wire: list[tuple[str, dict[str, Any]]], prompt_id: int) -> bool:
    """No ``session/update`` arrived after the response to our request ``prompt_id`` and
    before our next request (the next turn's, or the connection's end)."""
    index = next(i for i, (way, m) in enumerate(wire)
                 if way == "in" and m.get("id") == prompt_id and "method" not in m)
    for way, message in wire[index + 1:]:
        if way == "out" and "method" in message and "id" in message:
            return True
        if way == "in" and message.get("method") == "session/update":
            return False
    return True


def prompt_ids(wire: list[tuple[str, dict[str, Any]]]) -> list[int]:
    return [m["id"] for way, m in wire if way == "out" and m.get("method") == "session/prompt"]
