"""An ACP agent on the official Python SDK that calls every client method it is told to.

Run as a program (``python exerciser_agent.py``) by the driver tests.  Each
prompt's text is a JSON list of steps; the agent runs them in order through
the SDK's ``AgentSideConnection`` (fs reads and writes, terminals,
elicitation, permission) and answers with one message chunk: a JSON list of
``{"ok": …}`` / ``{"error": {"code", "message"}}``, one per step, so a test
sees exactly what the client answered on the wire.

It also has what a client's handshake can use: session modes (``default``,
``plan``, ``yolo``; step ``session`` tells the current one), ``session/load``
of a session it keeps in ``$EXERCISER_STATE`` (its history replayed as
updates; an unknown id is refused with -32002), authentication when
``$EXERCISER_AUTH`` names a method (sessions are refused until the client
authenticates with it), and ``session/cancel``: step ``hang`` streams a chunk
and waits for the cancel, and a cancelled prompt ends ``cancelled``.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any
from uuid import uuid4

from acp import (
    Agent,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    text_block,
    update_agent_message,
)
from acp.helpers import (
    start_tool_call,
    tool_terminal_ref,
    update_tool_call,
    update_user_message_text,
)
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    AuthMethodAgent,
    ElicitationFormSessionMode,
    ElicitationSchema,
    EnvVariable,
    PermissionOption,
    SessionMode,
    SessionModeState,
    ToolCallUpdate,
)

MODES = ("default", "plan", "yolo")
AUTH = os.environ.get("EXERCISER_AUTH")
STATE = os.environ.get("EXERCISER_STATE")


def dump(value: Any) -> Any:
    if value is None:
        return None
    if hasattr(value, "model_dump"):
        return value.model_dump(by_alias=True, exclude_none=False, mode="json")
    return value


def modes(current: str) -> SessionModeState:
    return SessionModeState(current_mode_id=current, available_modes=[
        SessionMode(id=m, name=m.title()) for m in MODES])


class Exerciser(Agent):
    _conn: Client

    def __init__(self) -> None:
        self.authenticated: str | None = None
        self.mode: dict[str, str] = {}
        self.loaded: dict[str, int] = {}  # session → messages replayed when it was loaded
        self.cancelled: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        self.caps = dump(client_capabilities)
        methods = [AuthMethodAgent(id=AUTH, name="Exerciser key")] if AUTH else None
        return InitializeResponse(protocol_version=1, auth_methods=methods,
                                  agent_capabilities=AgentCapabilities(load_session=True))

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        if method_id != AUTH:
            raise RequestError.invalid_params({"methodId": method_id})
        self.authenticated = method_id

    def _check_auth(self) -> None:
        if AUTH and self.authenticated != AUTH:
            raise RequestError.auth_required()

    async def new_session(self, cwd: str, additional_directories: Any = None,
                          mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        self._check_auth()
        sid = uuid4().hex
        self.mode[sid] = "default"
        self._save(sid, [])
        return NewSessionResponse(session_id=sid, modes=modes("default"))

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           additional_directories: Any = None,
                           **kwargs: Any) -> LoadSessionResponse:
        self._check_auth()
        history = self._history(session_id)
        if history is None:
            raise RequestError.resource_not_found(session_id)
        for role, text in history:  # the conversation so far, as the client saw it
            update = (update_user_message_text(text) if role == "user"
                      else update_agent_message(text_block(text)))
            await self._conn.session_update(session_id=session_id, update=update)
        self.loaded[session_id] = len(history)
        self.mode[session_id] = "default"
        return LoadSessionResponse(modes=modes("default"))

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> None:
        if mode_id not in MODES:
            raise RequestError.invalid_params({"modeId": mode_id})
        self.mode[session_id] = mode_id

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    def _file(self, sid: str) -> Path | None:
        return Path(STATE) / f"{sid}.json" if STATE else None

    def _history(self, sid: str) -> list[list[str]] | None:
        path = self._file(sid)
        if path is None or not path.is_file():
            return None
        return json.loads(path.read_text())

    def _save(self, sid: str, history: list[list[str]]) -> None:
        path = self._file(sid)
        if path is not None:
            path.write_text(json.dumps(history))

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        cancelled = self.cancelled[session_id] = asyncio.Event()
        text = "".join(getattr(b, "text", "") for b in prompt)
        results = []
        for step in json.loads(text):
            try:
                results.append({"ok": await self.step(session_id, step)})
            except RequestError as exc:
                results.append({"error": {"code": exc.code, "message": str(exc)}})
        reply = json.dumps(results)
        await self._conn.session_update(session_id=session_id,
                                        update=update_agent_message(text_block(reply)))
        history = self._history(session_id)
        if history is not None:
            self._save(session_id, [*history, ["user", text], ["agent", reply]])
        return PromptResponse(stop_reason="cancelled" if cancelled.is_set() else "end_turn")

    async def step(self, sid: str, step: dict[str, Any]) -> Any:
        conn = self._conn
        call = step["call"]
        if call == "caps":
            return self.caps
        if call == "session":
            return {"id": sid, "mode": self.mode.get(sid), "auth": self.authenticated,
                    "loaded": self.loaded.get(sid)}
        if call == "hang":  # stream something, then wait for the client's session/cancel
            await conn.session_update(session_id=sid, update=update_agent_message(
                text_block("waiting for the cancel")))
            await asyncio.wait_for(self.cancelled[sid].wait(), step.get("seconds", 30))
            return "cancelled"
        if call == "read":
            return dump(await conn.read_text_file(session_id=sid, path=step["path"],
                                                  line=step.get("line"), limit=step.get("limit")))
        if call == "write":
            return dump(await conn.write_text_file(session_id=sid, path=step["path"],
                                                   content=step["content"]))
        if call == "together":  # sub-steps at once: several reverse requests pending
            return await asyncio.gather(*(self.step(sid, sub) for sub in step["steps"]))
        if call == "permission":
            return dump(await conn.request_permission(
                session_id=sid, tool_call=ToolCallUpdate(
                    tool_call_id=step.get("id", "call_p"), title="Edit a file", kind="edit",
                    raw_input={"path": step["path"]}),
                options=[PermissionOption(option_id="ok", name="Allow", kind="allow_once"),
                         PermissionOption(option_id="no", name="Reject", kind="reject_once")]))
        if call == "terminal":
            created = await conn.create_terminal(
                session_id=sid, command=step["command"], args=step.get("args") or [],
                env=[EnvVariable(name=k, value=v) for k, v in (step.get("env") or {}).items()],
                cwd=step.get("cwd"), output_byte_limit=step.get("limit"))
            tid = created.terminal_id
            out: dict[str, Any] = {"id": tid}
            if step.get("ready"):  # wait until the command shows it is set up
                out["ready"] = await self.shown(sid, tid, step["ready"])
            if step.get("kill"):
                out["early"] = dump(await conn.terminal_output(session_id=sid, terminal_id=tid))
                await conn.kill_terminal(session_id=sid, terminal_id=tid)
            out["exit"] = dump(await conn.wait_for_terminal_exit(session_id=sid, terminal_id=tid))
            out["output"] = dump(await conn.terminal_output(session_id=sid, terminal_id=tid))
            if step.get("embed"):  # a tool call showing the terminal, finished after release
                call = step["embed"]
                await conn.session_update(session_id=sid, update=start_tool_call(
                    call, "Run it", kind="execute", content=[tool_terminal_ref(tid)]))
            await conn.release_terminal(session_id=sid, terminal_id=tid)
            if step.get("embed"):
                await conn.session_update(session_id=sid, update=update_tool_call(
                    step["embed"], status="completed", content=[tool_terminal_ref(tid)]))
            try:
                await conn.terminal_output(session_id=sid, terminal_id=tid)
                out["after_release"] = "answered"
            except RequestError as exc:
                out["after_release"] = exc.code
            return out
        if call == "elicit":
            mode = ElicitationFormSessionMode(
                session_id=sid, requested_schema=ElicitationSchema.model_validate(step["schema"]))
            return dump(await conn.create_elicitation(message=step["message"], mode=mode))
        raise RequestError(-32602, f"unknown step {call!r}")

    async def shown(self, sid: str, tid: str, text: str, seconds: float = 10) -> str:
        """The terminal's output once it contains ``text`` (polled: ACP has no output event)."""
        async with asyncio.timeout(seconds):
            while text not in (output := (await self._conn.terminal_output(  # noqa: ASYNC110
                    session_id=sid, terminal_id=tid)).output):
                await asyncio.sleep(0.02)
        return output


if __name__ == "__main__":
    asyncio.run(run_agent(Exerciser()))
