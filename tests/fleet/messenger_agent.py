"""An ACP agent on the official Python SDK that addresses a fleet member through ``_meta``.

Run as a program (``python messenger_agent.py TARGET``).  A prompt that is not
itself a fleet message (``Message from …``) is answered with a plain chunk and
then a chunk whose ``_meta`` ``cap.message_to`` names TARGET — the update's
``_meta`` for the first half of the message and the text block's for the
second, so both places an ACP agent may put it are read.  A fleet message is
answered with plain text.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from acp import Agent, InitializeResponse, NewSessionResponse, PromptResponse, run_agent
from acp.interfaces import Client
from acp.schema import AgentMessageChunk, TextContentBlock

TARGET = sys.argv[1] if len(sys.argv) > 1 else "b"


class Messenger(Agent):
    _conn: Client

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=1)

    async def new_session(self, cwd: str, additional_directories: Any = None,
                          mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id="messenger-1")

    async def _say(self, sid: str, text: str, *, update_meta: Any = None,
                   block_meta: Any = None) -> None:
        block = TextContentBlock(type="text", text=text, field_meta=block_meta)
        await self._conn.session_update(session_id=sid, update=AgentMessageChunk(
            session_update="agent_message_chunk", content=block, message_id="m-2"
            if update_meta or block_meta else "m-1", field_meta=update_meta))

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        said = " ".join(getattr(b, "text", "") for b in prompt)
        if "Message from" in said:
            await self._say(session_id, "noted, thanks")
            return PromptResponse(stop_reason="end_turn")
        to = {"cap.message_to": TARGET, "vendor.other": 1}
        await self._say(session_id, "Working on it. ")
        await self._say(session_id, "please review ", update_meta=to)
        await self._say(session_id, "the plan", block_meta=to)
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    asyncio.run(run_agent(Messenger()))
