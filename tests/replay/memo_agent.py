"""An ACP agent on the official Python SDK that remembers its sessions, for ``cap run --resume``.

Run as a program (``python memo_agent.py``).  Each session's conversation is
kept in ``$MEMO_STATE/<session id>.json``, so a second process can
``session/load`` it: the history is replayed as ``session/update``
notifications (``user_message_chunk`` / ``agent_message_chunk``) before the
load is answered, as the ACP spec asks; an unknown id is refused with -32002.
``$MEMO_NO_LOAD=1`` makes it an agent that does not declare ``loadSession``.

Each prompt is answered with one message chunk naming what the agent knows:
``<text> (session S, prompt N, K context block(s))`` — N counts the prompts of
the session, loaded ones included, so a test sees whether the agent
continued its conversation; K counts the blocks before the last one (a
restarted session's transcript arrives as such a block).
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
from acp.helpers import update_user_message_text
from acp.interfaces import Client
from acp.schema import AgentCapabilities

STATE = Path(os.environ.get("MEMO_STATE", "."))
LOADS = os.environ.get("MEMO_NO_LOAD") != "1"


class Memo(Agent):
    _conn: Client

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=1,
                                  agent_capabilities=AgentCapabilities(load_session=LOADS))

    async def new_session(self, cwd: str, additional_directories: Any = None,
                          mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        sid = uuid4().hex
        self._save(sid, [])
        return NewSessionResponse(session_id=sid)

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           additional_directories: Any = None,
                           **kwargs: Any) -> LoadSessionResponse:
        history = self._history(session_id)
        if history is None or not LOADS:
            raise RequestError.resource_not_found(session_id)
        for role, text in history:
            update = (update_user_message_text(text) if role == "user"
                      else update_agent_message(text_block(text)))
            await self._conn.session_update(session_id=session_id, update=update)
        return LoadSessionResponse()

    def _history(self, sid: str) -> list[list[str]] | None:
        path = STATE / f"{sid}.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def _save(self, sid: str, history: list[list[str]]) -> None:
        (STATE / f"{sid}.json").write_text(json.dumps(history))

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        texts = [getattr(b, "text", "") for b in prompt]
        history = self._history(session_id) or []
        number = 1 + sum(1 for role, _ in history if role == "user")
        reply = (f"{texts[-1]} (session {session_id}, prompt {number}, "
                 f"{len(texts) - 1} context block(s))")
        await self._conn.session_update(session_id=session_id,
                                        update=update_agent_message(text_block(reply)))
        self._save(session_id, [*history, ["user", texts[-1]], ["agent", reply]])
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    asyncio.run(run_agent(Memo()))
