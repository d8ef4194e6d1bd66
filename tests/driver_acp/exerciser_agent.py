"""An ACP agent on the official Python SDK that calls every client method it is told to.

Run as a program (``python exerciser_agent.py``) by the driver tests.  Each
prompt's text is a JSON list of steps; the agent runs them in order through
the SDK's ``AgentSideConnection`` (fs reads and writes, terminals,
elicitation, permission) and answers with one message chunk: a JSON list of
``{"ok": …}`` / ``{"error": {"code", "message"}}``, one per step, so a test
sees exactly what the client answered on the wire.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from uuid import uuid4

from acp import (
    Agent,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    text_block,
    update_agent_message,
)
from acp.helpers import start_tool_call, tool_terminal_ref, update_tool_call
from acp.interfaces import Client
from acp.schema import (
    ElicitationFormSessionMode,
    ElicitationSchema,
    EnvVariable,
    PermissionOption,
    ToolCallUpdate,
)


def dump(value: Any) -> Any:
    if value is None:
        return None
    if hasattr(value, "model_dump"):
        return value.model_dump(by_alias=True, exclude_none=False, mode="json")
    return value


class Exerciser(Agent):
    _conn: Client

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        self.caps = dump(client_capabilities)
        return InitializeResponse(protocol_version=1)

    async def new_session(self, cwd: str, additional_directories: Any = None,
                          mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=uuid4().hex)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        text = "".join(getattr(b, "text", "") for b in prompt)
        results = []
        for step in json.loads(text):
            try:
                results.append({"ok": await self.step(session_id, step)})
            except RequestError as exc:
                results.append({"error": {"code": exc.code, "message": str(exc)}})
        await self._conn.session_update(session_id=session_id,
                                        update=update_agent_message(text_block(json.dumps(
                                            results))))
        return PromptResponse(stop_reason="end_turn")

    async def step(self, sid: str, step: dict[str, Any]) -> Any:
        conn = self._conn
        call = step["call"]
        if call == "caps":
            return self.caps
        if call == "read":
            return dump(await conn.read_text_file(session_id=sid, path=step["path"],
                                                  line=step.get("line"), limit=step.get("limit")))
        if call == "write":
            return dump(await conn.write_text_file(session_id=sid, path=step["path"],
                                                   content=step["content"]))
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


if __name__ == "__main__":
    asyncio.run(run_agent(Exerciser()))
