"""Record ``sdk_session.jsonl``: a real Python SDK session against a real ``cap-agent``.

Run once (and again only when the agent side's output changes on purpose):
``.venv/bin/python -m tests.agent_stream_json.golden.record``.  The SDK execs
a wrapper that installs :func:`record_into` and then runs ``cap-agent``'s own
``main``, so the recording is every call the real shell made on the machine.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultAllow,
    PermissionResultDeny,
    StreamEvent,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
GOLDEN = HERE / "sdk_session.jsonl"
SESSION_ID = "0c0ffee0-0000-4000-8000-00000000cafe"

WRAPPER = """#!{python}
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from tests.agent_stream_json.golden.recording import record_into
record_into(Path({out!r}))
from trio_cap.actors.cli.cap_agent import main
sys.exit(main())
"""


async def can_use_tool(tool: str, tool_input: dict, _context: Any) -> Any:
    if tool == "Write":
        return PermissionResultAllow(updated_input={**tool_input, "content": "rewritten\n"})
    if tool == "AskUserQuestion":
        (question,) = tool_input["questions"]
        return PermissionResultAllow(updated_input={
            **tool_input, "answers": {question["question"]: "sqlite"}})
    return PermissionResultDeny(message=f"no {tool} in the golden session")


async def session(cli: str, cwd: Path) -> None:
    opts = ClaudeAgentOptions(
        cli_path=cli, cwd=str(cwd), can_use_tool=can_use_tool, include_partial_messages=True,
        extra_args={"session-id": SESSION_ID, "transcript-diff-interval": "0",
                    "transcript-diff-every": "8"})
    async with ClaudeSDKClient(options=opts) as client:
        await client.query("write notes.txt: hello\nrun: rm -rf /\nthink: careful")
        _ = [m async for m in client.receive_response()]
        await client.set_permission_mode("acceptEdits")
        await client.query("plan: read; write\nask: Which DB? [pg|sqlite]")
        _ = [m async for m in client.receive_response()]
        await client.query("fail: rate_limit")
        _ = [m async for m in client.receive_response()]
        await client.query("think: long\nwait 30")
        async for m in client.receive_messages():
            if isinstance(m, StreamEvent) and \
                    m.event.get("delta", {}).get("type") == "thinking_delta":
                break
        await client.interrupt()
        _ = [m async for m in client.receive_response()]
        await client.query("bye")
        _ = [m async for m in client.receive_response()]


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        wrapper = Path(tmp) / "claude"
        wrapper.write_text(WRAPPER.format(python=sys.executable, root=str(ROOT),
                                          out=str(GOLDEN)))
        wrapper.chmod(0o755)
        asyncio.run(asyncio.wait_for(session(str(wrapper), work), 120))
    print(f"recorded {sum(1 for _ in GOLDEN.open())} lines into {GOLDEN}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
