"""Real agents, installed by ``cap peers install``, completing turns against the server.

Each test gets its own server, HOME and workdir.  A missing agent fails (never
skips): CI runs ``cap peers install all`` before the suite.  Run only these with
``pytest -m peers``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trio_cap.actors.model_server import ModelServer, script_from_obj
from trio_cap.actors.peers.process import PeerRun, run_peer

from .conftest import PeerFactory

pytestmark = pytest.mark.peers

RUN_SECONDS = 120


async def run(penv: Any, workdir: Path, *args: str) -> PeerRun:
    result = await run_peer([penv.binary, *args], env=penv.env, cwd=workdir,
                            seconds=RUN_SECONDS)
    assert not result.timed_out, result.describe()
    assert result.returncode == 0, result.describe()
    return result


def jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def turn_requests(server: ModelServer, route: str) -> list[dict[str, Any]]:
    return [r for r in server.records if r["route"] == route]


def write_script(match: str, tool: str, arguments: dict[str, Any], done: str,
                 then: dict[str, Any] | None = None) -> Any:
    follow = then or {"text": done}
    return script_from_obj({"rules": [{
        "match": match, "text": "On it.",
        "tool_calls": [{"name": tool, "arguments": arguments}], "then": follow,
    }]})


# --- Claude Code -------------------------------------------------------------


async def test_claude_code_stream_json_turn(peer: PeerFactory, model_server: ModelServer) -> None:
    penv, workdir = peer("claude-code")
    result = await run(penv, workdir, "-p", "say hi", "--output-format", "stream-json",
                       "--verbose")
    frames = jsonl(result.stdout)
    init = next(f for f in frames if f.get("type") == "system" and f.get("subtype") == "init")
    assert init["apiKeySource"] == "ANTHROPIC_API_KEY"
    final = frames[-1]
    assert final["type"] == "result" and final["subtype"] == "success", result.describe()
    assert final["result"] == "hello from fake model"
    calls = turn_requests(model_server, "anthropic")
    assert calls and all(r["query"].get("beta") == "true" for r in calls)
    assert calls[0]["body"]["stream"] is True
    assert calls[0]["headers"]["x-api-key"] == "<redacted>"


async def test_claude_code_writes_file_and_runs_command(
    peer: PeerFactory, model_server: ModelServer
) -> None:
    penv, workdir = peer("claude-code")
    target = workdir / "hello.txt"
    model_server.set_script(write_script(
        "create hello.txt", "Write", {"file_path": str(target), "content": "hi from claude\n"},
        "", then={"text": "Now the command.", "tool_calls": [{"name": "Bash", "arguments": {
            "command": "echo ran-by-claude > ran.txt", "description": "write ran.txt"}}],
            "then": {"text": "All done."}}))
    result = await run(penv, workdir, "-p", "please create hello.txt", "--output-format",
                       "stream-json", "--verbose", "--permission-mode", "bypassPermissions")
    final = jsonl(result.stdout)[-1]
    assert final["result"] == "All done.", result.describe()
    assert target.read_text() == "hi from claude\n"
    assert (workdir / "ran.txt").read_text() == "ran-by-claude\n"
    # The second request carried the Write tool's result back to the model.
    second = turn_requests(model_server, "anthropic")[1]["body"]["messages"][-1]
    assert any(b.get("type") == "tool_result" for b in second["content"])


# --- Gemini CLI --------------------------------------------------------------


async def test_gemini_cli_turn(peer: PeerFactory, model_server: ModelServer) -> None:
    penv, workdir = peer("gemini-cli")
    result = await run(penv, workdir, "-m", "fake-model", "-p", "say hi")
    assert result.stdout.strip() == "hello from fake model", result.describe()
    (call,) = model_server.records
    assert call["path"] == "/v1beta/models/fake-model:streamGenerateContent"
    assert call["query"] == {"alt": "sse"}


async def test_gemini_cli_writes_file(peer: PeerFactory, model_server: ModelServer) -> None:
    penv, workdir = peer("gemini-cli")
    target = workdir / "hello.txt"
    model_server.set_script(write_script(
        "create hello.txt", "write_file", {"file_path": str(target), "content": "hi from gemini\n"},
        "Created hello.txt."))
    result = await run(penv, workdir, "--approval-mode", "yolo", "-p", "please create hello.txt")
    assert "Created hello.txt." in result.stdout, result.describe()
    assert target.read_text() == "hi from gemini\n"
    # GEMINI_MODEL from the environment alone skips the "auto" router call.
    assert {r["path"] for r in model_server.records} == {
        "/v1beta/models/fake-model:streamGenerateContent"}


# --- opencode ----------------------------------------------------------------


async def test_opencode_turn(peer: PeerFactory, model_server: ModelServer) -> None:
    penv, workdir = peer("opencode")
    result = await run(penv, workdir, "run", "say hi")
    assert result.stdout.strip() == "hello from fake model", result.describe()
    sources = sorted(r["reply"]["source"] for r in turn_requests(model_server, "openai-chat"))
    # The title generator is answered on the side; the turn itself got the default reply.
    assert sources == ["default", "side"]


async def test_opencode_writes_file(peer: PeerFactory, model_server: ModelServer) -> None:
    penv, workdir = peer("opencode")
    target = workdir / "hello.txt"
    model_server.set_script(write_script(
        "create hello.txt", "write", {"filePath": str(target), "content": "hi from opencode\n"},
        "Created hello.txt."))
    result = await run(penv, workdir, "run", "please create hello.txt")
    assert "Created hello.txt." in result.stdout, result.describe()
    assert target.read_text() == "hi from opencode\n"


# --- aider -------------------------------------------------------------------


async def test_aider_turn(peer: PeerFactory, model_server: ModelServer) -> None:
    penv, workdir = peer("aider")
    result = await run(penv, workdir, "--no-pretty", "--message", "say hi")
    assert "hello from fake model" in result.stdout, result.describe()
    assert "HTTPSConnectionPool" not in result.stdout + result.stderr
    (call,) = turn_requests(model_server, "openai-chat")
    assert call["body"]["model"] == "fake-model" and call["body"]["stream"] is True


async def test_aider_writes_file_with_its_edit_format(
    peer: PeerFactory, model_server: ModelServer
) -> None:
    """aider has no tool calls: its "whole" edit format is a file name and a fenced block."""
    penv, workdir = peer("aider")
    model_server.set_script(script_from_obj({"rules": [{
        "match": "create hello.txt",
        "text": "Here it is.\n\nhello.txt\n```\nhi from aider\n```\n",
    }]}))
    result = await run(penv, workdir, "--no-pretty", "--message", "please create hello.txt",
                       "hello.txt")
    assert (workdir / "hello.txt").read_text() == "hi from aider\n", result.describe()


# --- Codex -------------------------------------------------------------------


async def test_codex_exec_turn_runs_command(peer: PeerFactory, model_server: ModelServer) -> None:
    penv, workdir = peer("codex")
    model_server.set_script(write_script(
        "create hello.txt", "exec_command", {"cmd": "echo hi from codex > hello.txt"},
        "Created hello.txt."))
    result = await run(penv, workdir, "exec", "--json", "--skip-git-repo-check",
                       "please create hello.txt")
    events = jsonl(result.stdout)
    messages = [e["item"]["text"] for e in events if e.get("type") == "item.completed"
                and e["item"].get("type") == "agent_message"]
    assert messages[-1] == "Created hello.txt.", result.describe()
    assert events[-1]["type"] == "turn.completed"
    assert (workdir / "hello.txt").read_text() == "hi from codex\n"
    assert {r["path"] for r in model_server.records} == {"/v1/responses"}


# --- ACP adapters (codex-acp, claude-code-acp) -------------------------------


class AcpClient:
    """Just enough ACP (JSON-RPC over stdio) to run one prompt; allows every permission."""

    def __init__(self, proc: Any) -> None:
        self.proc = proc
        self.buffer = b""
        self.next_id = 0
        self.chunks: list[str] = []

    async def send(self, obj: dict[str, Any]) -> None:
        await self.proc.stdin.send_all(json.dumps(obj).encode() + b"\n")

    async def line(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            data = await self.proc.stdout.receive_some(65536)
            assert data, "agent closed stdout: " + self.buffer.decode(errors="replace")
            self.buffer += data
        raw, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(raw) if raw.strip().startswith(b"{") else await self.line()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        my_id = self.next_id
        self.next_id += 1
        await self.send({"jsonrpc": "2.0", "id": my_id, "method": method, "params": params})
        while True:
            msg = await self.line()
            if "method" not in msg:
                if msg.get("id") == my_id:
                    assert "error" not in msg, msg
                    return msg.get("result") or {}
                continue
            if "id" in msg:  # a request from the agent
                await self.answer(msg)
            elif msg["method"] == "session/update":
                update = msg["params"]["update"]
                if update.get("sessionUpdate") == "agent_message_chunk":
                    self.chunks.append(update["content"].get("text", ""))

    async def answer(self, msg: dict[str, Any]) -> None:
        if msg["method"] == "session/request_permission":
            options = msg["params"]["options"]
            allow = next(o for o in options if o["kind"].startswith("allow"))
            result: dict[str, Any] = {"outcome": {"outcome": "selected",
                                                  "optionId": allow["optionId"]}}
            await self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        else:
            await self.send({"jsonrpc": "2.0", "id": msg["id"],
                             "error": {"code": -32601, "message": "not supported"}})


@pytest.mark.parametrize("name", ["codex-acp", "claude-code-acp"])
async def test_acp_adapter_turn(peer: PeerFactory, model_server: ModelServer, name: str) -> None:
    import trio

    from trio_cap.actors.peers.process import spawn_peer

    penv, workdir = peer(name)
    async with spawn_peer([penv.binary], env=penv.env, cwd=workdir) as proc:
        client = AcpClient(proc)
        with trio.fail_after(RUN_SECONDS):
            init = await client.request("initialize", {
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False},
                                       "terminal": False}})
            assert init["protocolVersion"] == 1
            session = await client.request("session/new", {"cwd": str(workdir),
                                                            "mcpServers": []})
            result = await client.request("session/prompt", {
                "sessionId": session["sessionId"],
                "prompt": [{"type": "text", "text": "say hi"}]})
    assert result["stopReason"] == "end_turn"
    assert "".join(client.chunks) == "hello from fake model"
    # Both adapters ignore stdin EOF; spawn_peer killed the whole group on exit.
    assert proc.returncode is not None
    routes = {r["route"] for r in model_server.records}
    assert routes & {"anthropic", "openai-responses"}
