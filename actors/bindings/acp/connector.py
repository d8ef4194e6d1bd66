"""The ACP binding's Trio shell: the kit's process and delivery around :class:`AcpClient`.

Everything protocol-shaped happens in the client machine; the process rules
(own process group, budgeted stderr, stdin EOF → SIGTERM → SIGKILL of the
group on every exit path, always reaped — codex-acp and claude-code-acp
ignore stdin EOF, so the group kill is what ends them) are :mod:`..process`'s,
batching into the session inbox is :mod:`..deliver`'s.  What is left here:

* the handshake (``initialize`` → [``authenticate``] → ``session/new`` or
  ``session/load`` → model/mode), each failure one :class:`ConnectError` line
  with the process group already gone:

  =============================  ==================================================
  what happens during ``open``   what the caller gets
  =============================  ==================================================
  the program cannot start       ``cannot start 'x': program not found …``
  a handshake step is refused    ``ACP handshake failed: session/new failed: …``
  the agent exits first          ``ACP agent ended during the handshake: …``
  no answer within N s           ``ACP agent did not finish the handshake within N s
                                 (initialize sent, no answer)``
  the caller is cancelled        ``Cancelled`` (the group is killed and reaped first)
  =============================  ==================================================

* serving what the machine hands over as :class:`Serve`: files through
  :class:`.fs_service.FsService` (confined), terminals through
  :class:`.terminals.Terminals`, each request in its own task (``wait_for_exit``
  blocks; a withdrawn request's task is cancelled);
* one diff artifact per turn of the files written through ``fs/write_text_file``,
  delivered just before the turn ends.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import trio

from trio_cap.actors.bindings import jsonrpc as rpc
from trio_cap.actors.bindings.acp import frames as f
from trio_cap.actors.bindings.acp.fs_service import FsRefused, FsService
from trio_cap.actors.bindings.acp.machine import (
    AcpClient,
    ClientOptions,
    ClientState,
    Serve,
    Withdraw,
)
from trio_cap.actors.bindings.acp.machine_updates import BINDING
from trio_cap.actors.bindings.acp.terminals import Terminals
from trio_cap.actors.bindings.base import AgentGone, ToAgent, TurnEnded
from trio_cap.actors.bindings.deliver import Deliverer
from trio_cap.actors.bindings.process import AgentProcess, open_task_group, spawn_agent
from trio_cap.actors.connection import AgentSpec, ConnectError
from trio_cap.actors.recording import Recorder
from trio_cap.events.kinds import CancelScope, CapError, Event, ToolCallEnd

AUTH_ENV = "TRIO_CAP_ACP_AUTH_METHOD"
"""Environment variable naming the ACP ``authenticate`` method to use (or the manifest's
``options["acp_auth_method"]``)."""


class AcpConnection:
    def __init__(self, agent: AgentProcess, machine: AcpClient,
                 deliver: trio.MemorySendChannel[Any], fs: FsService,
                 nursery: trio.Nursery, env: Mapping[str, str],
                 recorder: Recorder | None = None) -> None:
        self.agent = agent
        self.proc = agent.proc
        self.machine = machine
        self.deliver = deliver
        self.recorder = recorder
        # every ToAgent (prompts, answers, the handshake) is logged as frame.out in its place
        self.out = Deliverer(deliver, write=agent.write, kill=self._kill, recorder=recorder)
        self.fs = fs
        self.nursery = nursery
        self.terminals = Terminals(nursery, fs, env)
        self.settled = trio.Event()
        self.gone_reason: str | None = None
        self._closing = False
        self._serving: dict[Any, trio.CancelScope] = {}
        self._lock = trio.Lock()
        self._turns = 0

    # ---- Connection ----------------------------------------------------------------------
    async def send(self, frames: Sequence[Event]) -> None:
        for frame in frames:
            await self._run(self.machine.send(frame))

    async def cancel(self, scope: CancelScope) -> None:
        if scope == "session":
            await self._run(self.machine.cancel())
            await self.agent.close_stdin()
            return
        await self._run(self.machine.cancel())

    # ---- plumbing -------------------------------------------------------------------------
    async def _kill(self, reason: str) -> None:
        await self.agent.terminate(graceful=False)

    async def _run(self, outputs: list[Any], received: Event | None = None) -> None:
        """Deliver one machine step in order; Serve/Withdraw are the shell's own to do."""
        batch: list[Any] = []
        async with self._lock:
            for item in outputs:
                kind = type(item)
                if kind is Serve:
                    self._serve(item)
                elif kind is Withdraw:
                    scope = self._serving.pop((type(item.rpc_id), item.rpc_id), None)
                    if scope is not None:
                        scope.cancel()
                elif kind is ToolCallEnd and not item.output:
                    batch.append(self._with_terminal_output(item))
                elif kind is TurnEnded:
                    self._turns += 1
                    await self.fs.settled()  # a write served as the turn ended is its too
                    artifact = self.fs.turn_diff(self._turns)
                    if artifact is not None:
                        batch.append(artifact)
                    batch.append(item)
                else:
                    batch.append(item)
            if batch or received is not None:
                await self.out(batch, received)

    def _with_terminal_output(self, end: ToolCallEnd) -> ToolCallEnd:
        """A finished call that embedded terminals ends with their output (kept after
        release), which is what an editor keeps showing for it."""
        ids = ((end.meta or {}).get("acp") or {}).get("terminals") or ()
        texts = [t for t in (self.terminals.text_of(tid) for tid in ids) if t]
        return msgspec.structs.replace(end, output="\n".join(texts)) if texts else end

    def _serve(self, request: Serve) -> None:
        scope = trio.CancelScope()
        self._serving[(type(request.rpc_id), request.rpc_id)] = scope
        self.nursery.start_soon(self._serve_one, request, scope)

    async def _serve_one(self, request: Serve, scope: trio.CancelScope) -> None:
        events: list[Event] = []
        with scope:
            try:
                result = await self._perform(request.method, request.params)
            except FsRefused as exc:
                outputs = self.machine.refuse(request.rpc_id, exc.code, exc.message)
                if exc.event is not None:
                    events.append(exc.event)
            except OSError as exc:
                outputs = self.machine.refuse(request.rpc_id, rpc.INTERNAL_ERROR,
                                              f"{request.method} failed: {exc}")
            else:
                outputs = self.machine.answer(request.rpc_id, result)
            self._serving.pop((type(request.rpc_id), request.rpc_id), None)
            try:
                await self._run([*events, *outputs])
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the session stopped listening: shutdown follows

    async def _perform(self, method: str, params: Any) -> Any:
        if method == f.FS_READ:
            return await self.fs.read(params)
        if method == f.FS_WRITE:
            return await self.fs.write(params)
        terminals = self.terminals
        if method == f.TERMINAL_CREATE:
            return await terminals.create(params)
        if method == f.TERMINAL_OUTPUT:
            return terminals.output(params)
        if method == f.TERMINAL_WAIT:
            return await terminals.wait(params)
        if method == f.TERMINAL_KILL:
            return await terminals.kill(params)
        if method == f.TERMINAL_RELEASE:
            return await terminals.release(params)
        raise FsRefused(rpc.METHOD_NOT_FOUND, f"{method} is not served")

    async def _feed(self, data: bytes) -> None:
        received = self.recorder.bytes_in(data) if self.recorder is not None else None
        await self._run(self.machine.receive_data(data), received)
        if self.machine.state in (ClientState.READY, ClientState.FAILED):
            self.settled.set()

    async def read_stdout(self) -> None:
        try:
            await self.agent.pump_stdout(self._feed)
            rec = self.recorder
            await self._run(self.machine.receive_eof(), rec.eof() if rec is not None else None)
            await self.agent.wait_exit()
            self.gone_reason = self.agent.describe_exit()
            self.settled.set()
            if not self._closing:
                code = self.agent.returncode
                await self.out([AgentGone(self.gone_reason, code)],
                               rec.gone(self.gone_reason, code) if rec is not None else None)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.settled.set()

    async def read_stderr(self) -> None:
        await self.agent.pump_stderr(self.out.events)

    async def handshake(self, seconds: float) -> str | None:
        await self._run([ToAgent(self.machine.initialize())])
        await self.agent.wait_for(self.settled, seconds)
        machine = self.machine
        if machine.state is ClientState.READY:
            return None
        if machine.state is ClientState.FAILED and machine.handshake_error:
            return f"ACP handshake failed: {machine.handshake_error}"
        if self.gone_reason is None and self.agent.returncode is not None:
            self.gone_reason = self.agent.describe_exit()
        if self.gone_reason:
            return f"ACP agent ended during the handshake: {self.gone_reason}"
        step = {ClientState.INITIALIZING: "initialize sent, no answer",
                ClientState.AUTHENTICATING: "authenticate sent, no answer",
                ClientState.OPENING: "session/new sent, no answer",
                ClientState.CONFIGURING: "session configuration sent, no answer"}.get(
                    machine.state, machine.state.value)
        return f"ACP agent did not finish the handshake within {seconds:g} s ({step})"

    async def shutdown(self) -> None:
        """End the session: terminals killed, stdin closed, grace, then the group's end."""
        self._closing = True
        with trio.CancelScope(shield=True):
            for scope in self._serving.values():
                scope.cancel()
            await self.terminals.close()
            await self.agent.terminate()
        self.machine.close()


class AcpConnector:
    """Drives any agent that speaks ACP v1 over stdio (``binding = "acp"``).

    ``env`` is added to the inherited environment (an isolated peer's HOME and
    model URL, for instance); ``grace`` is the time the agent gets to exit after
    stdin closes, and again after SIGTERM; ``init_timeout`` overrides the
    manifest's ``startup.init_timeout_seconds`` (default 60 s).
    """

    binding = BINDING

    def __init__(self, *, env: Mapping[str, str] | None = None, inherit_env: bool = True,
                 grace: float = 3.0, init_timeout: float | None = None) -> None:
        self.env = dict(env or {})
        self.inherit_env = inherit_env
        self.grace = grace
        self.init_timeout = init_timeout

    def _env(self, spec: AgentSpec) -> dict[str, str]:
        env = dict(os.environ) if self.inherit_env else {}
        env.update(self.env)
        review = acp_tuning(spec).get("review-env")
        if isinstance(review, dict) and spec.config.permission_mode != "none":
            # settings that make the agent ask before it acts, so trio-cap's policy decides
            env.update({str(k): str(v) for k, v in review.items()})
        env.update(spec.options.get("env") or {})
        env.pop("CLAUDECODE", None)
        env["PWD"] = spec.config.cwd
        return env

    def _timeout(self, spec: AgentSpec) -> float:
        if self.init_timeout is not None:
            return self.init_timeout
        startup = getattr(spec.options.get("manifest"), "startup", None)
        return float(getattr(startup, "init_timeout_seconds", 60.0))

    def options_for(self, spec: AgentSpec, env: Mapping[str, str]) -> ClientOptions:
        config = spec.config
        opts = spec.options
        tuning = acp_tuning(spec)
        mode = opts.get("acp_mode")
        if mode is None and config.permission_mode == "none":
            mode = tuning.get("bypass-mode")  # the agent's own no-prompt mode, for bypass
        model = None if tuning.get("model-arg") else config.model  # else it went in the argv
        return ClientOptions(
            cwd=os.path.abspath(config.cwd), model=model,
            resume_id=config.session_resume_id, context=config.system_prompt,
            mcp_servers=tuple(opts.get("mcp_servers") or ()),
            auth_method=(opts.get("acp_auth_method") or env.get(AUTH_ENV)
                         or tuning.get("auth-method") or None),
            mode=mode if isinstance(mode, str) else None,
            permission_mode=config.permission_mode,
            fs_read=tuning.get("serve-fs-read", True) is not False,
            fs_write=tuning.get("serve-fs-write", True) is not False,
            terminal=tuning.get("serve-terminal", True) is not False,
            elicitation=tuning.get("serve-elicitation", True) is not False,
            client_version=_version())

    @asynccontextmanager
    async def open(self, spec: AgentSpec,
                   deliver: trio.MemorySendChannel[Any]) -> AsyncIterator[AcpConnection]:
        argv = list(spec.argv)
        if argv and spec.config.permission_mode != "none":
            argv += [str(a) for a in acp_tuning(spec).get("review-args") or ()]
        model_arg = acp_tuning(spec).get("model-arg")
        if argv and spec.config.model and isinstance(model_arg, str):
            argv += [model_arg, spec.config.model]  # an agent whose model is no config option
        argv += [str(a) for a in spec.options.get("acp_args") or ()]
        if not argv:
            deliver.close()
            raise ConnectError("acp: the manifest gives no command for the ACP binding")
        env = self._env(spec)
        options = self.options_for(spec, env)
        timeout = self._timeout(spec)
        fs = FsService(options.cwd, _fs_scope(spec))
        recorder: Recorder | None = spec.options.get("recorder")
        if recorder is not None:  # what the machine is built from: a replay builds it again
            as_logged = msgspec.json.decode(msgspec.json.encode(options))
            recorder.frame_out({"acp_options": as_logged})
        failure: str | None = None
        try:
            async with spawn_agent(argv, cwd=options.cwd, env=env, binding=BINDING,
                                   grace=self.grace) as agent:
                machine = AcpClient(options)
                async with open_task_group() as tasks:
                    conn = AcpConnection(agent, machine, deliver, fs, tasks, env, recorder)
                    tasks.start_soon(conn.read_stderr)
                    tasks.start_soon(conn.read_stdout)
                    failure = await conn.handshake(timeout)
                    if failure is None:
                        try:
                            yield conn
                        finally:
                            await conn.shutdown()
                    else:
                        await agent.terminate(graceful=False)
        finally:
            deliver.close()
        if failure is not None:
            raise ConnectError(failure)


def acp_tuning(spec: AgentSpec) -> dict[str, Any]:
    """The manifest's ``[x-acp]`` table (see docs/cap.md, "ACP driver"), or ``{}``."""
    manifest = spec.options.get("manifest")
    extensions = getattr(manifest, "extensions", None) or {}
    table = extensions.get("x-acp")
    return table if isinstance(table, dict) else {}


def _fs_scope(spec: AgentSpec) -> str:
    manifest = spec.options.get("manifest")
    coding = getattr(getattr(manifest, "capabilities", None), "coding", None)
    scope = getattr(getattr(coding, "fs", None), "scope", None)
    return scope if isinstance(scope, str) else "workspace_only"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("trio-cap")
    except Exception:
        return "0"


__all__ = ["AcpConnection", "AcpConnector", "CapError"]
