"""``cap agent --cap-speak acp`` as a real process, spoken to in raw JSON-RPC lines: the
edges an SDK client never produces (missing ``mcpServers``, garbage lines, unknown
methods), and every way out (stdin EOF, SIGTERM, bad usage) with its exit code."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import trio

from tests.agent_acp.sdk_client import CAP

LIMIT = 30.0


class Raw:
    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self.buf = b""

    async def send(self, *messages: dict[str, Any] | bytes) -> None:
        assert self.proc.stdin is not None
        data = b"".join(m if isinstance(m, bytes) else json.dumps(m).encode() + b"\n"
                        for m in messages)
        await self.proc.stdin.send_all(data)

    async def line(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        with trio.fail_after(LIMIT):
            while b"\n" not in self.buf:
                chunk = await self.proc.stdout.receive_some(65536)
                assert chunk, f"stdout ended; buffered {self.buf!r}"
                self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    async def until(self, request_id: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Lines up to the response to ``request_id``: (what came before, the response)."""
        before = []
        while True:
            message = await self.line()
            if message.get("id") == request_id and "method" not in message:
                return before, message
            before.append(message)


async def spawn(tmp_path: Path, *args: str) -> Raw:
    proc = await trio.lowlevel.open_process(
        [CAP, "agent", "--cap-speak", "acp", *args], cwd=str(tmp_path),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return Raw(proc)


async def finish(raw: Raw) -> tuple[int, str]:
    assert raw.proc.stdin is not None and raw.proc.stderr is not None
    await raw.proc.stdin.aclose()
    err = b""
    with trio.fail_after(LIMIT):
        while chunk := await raw.proc.stderr.receive_some(65536):
            err += chunk
        code = await raw.proc.wait()
    return code, err.decode()


def req(rid: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return message


INIT = req(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})


async def test_session_new_needs_mcp_servers_and_an_absolute_cwd(tmp_path: Path) -> None:
    raw = await spawn(tmp_path)
    await raw.send(INIT, req(1, "session/new", {"cwd": str(tmp_path)}),
                   req(2, "session/new", {"cwd": "relative", "mcpServers": []}),
                   req("three", "session/new", {"cwd": str(tmp_path), "mcpServers": []}))
    _, init = await raw.until(0)
    assert init["result"]["protocolVersion"] == 1
    assert init["result"]["agentCapabilities"]["loadSession"] is True
    _, missing = await raw.until(1)
    assert missing["error"]["code"] == -32602 and "mcpServers" in str(missing["error"])
    _, relative = await raw.until(2)
    assert relative["error"]["code"] == -32602
    _, ok = await raw.until("three")  # a string id echoed as given
    assert ok["result"]["sessionId"]
    code, err = await finish(raw)
    assert code == 0 and "Traceback" not in err


async def test_garbage_and_unknown_methods_never_stop_the_agent(tmp_path: Path) -> None:
    log = tmp_path / "agent.caplog"
    raw = await spawn(tmp_path, "--log", str(log))
    await raw.send(b"this is not json\n", b"\xff\xfe{\n", b"[]\n", INIT,
                   req(1, "no/such_method", {}), req(2, "_vendor/ext", {}),
                   {"jsonrpc": "2.0", "method": "unknown/notification", "params": {}},
                   req(3, "session/prompt", {"sessionId": "nope", "prompt": []}),
                   req(4, "session/new", {"cwd": str(tmp_path), "mcpServers": []}))
    parse_errors, _ = await raw.until(0)
    assert [m["error"]["code"] for m in parse_errors] == [-32700, -32700, -32600]
    assert all(m["id"] is None for m in parse_errors)
    _, unknown = await raw.until(1)
    assert unknown["error"]["code"] == -32601
    _, ext = await raw.until(2)
    assert ext["error"]["code"] == -32601
    _, no_session = await raw.until(3)  # the notification got nothing
    assert no_session["error"]["code"] == -32602
    _, ok = await raw.until(4)
    assert "sessionId" in ok["result"]
    code, err = await finish(raw)
    assert code == 0 and "Traceback" not in err
    assert "bad ACP input" in err  # noted on stderr, and logged:
    shown = await trio.run_process([CAP, "log", "show", "--json", str(log)],
                                   capture_stdout=True, stdin=subprocess.DEVNULL)
    records = [json.loads(line) for line in shown.stdout.decode().splitlines()]
    bad = [r for r in records if r["kind"] == "cap.error" and r["stream"] == "cap-agent.acp"]
    assert [r["code"] for r in bad] == ["parse_failed"] * 3
    assert bad[0]["details"]["line"] == "this is not json"


async def test_a_second_prompt_while_one_runs_is_refused(tmp_path: Path) -> None:
    raw = await spawn(tmp_path)
    await raw.send(INIT, req(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []}))
    _, new = await raw.until(1)
    sid = new["result"]["sessionId"]
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "wait 60"}]}
    await raw.send(req(2, "session/prompt", prompt), req(3, "session/prompt", prompt))
    _, refused = await raw.until(3)
    assert refused["error"]["code"] == -32602 and "already running" in refused["error"]["message"]
    await raw.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    _, cancelled = await raw.until(2)
    assert cancelled["result"]["stopReason"] == "cancelled"
    code, _ = await finish(raw)
    assert code == 0


async def test_stdin_eof_mid_turn_answers_cancelled_and_exits_0(tmp_path: Path) -> None:
    raw = await spawn(tmp_path)
    await raw.send(INIT, req(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []}))
    _, new = await raw.until(1)
    sid = new["result"]["sessionId"]
    await raw.send(req(2, "session/prompt", {"sessionId": sid, "prompt": [
        {"type": "text", "text": "think: long\nwait 60"}]}))
    first = await raw.line()
    assert first["method"] == "session/update"
    assert raw.proc.stdin is not None
    await raw.proc.stdin.aclose()
    _, response = await raw.until(2)
    assert response["result"]["stopReason"] == "cancelled"
    code, err = await finish(raw)
    assert code == 0 and "Traceback" not in err


async def test_sigterm_is_a_clean_exit(tmp_path: Path) -> None:
    raw = await spawn(tmp_path)
    await raw.send(INIT, req(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []}))
    _, new = await raw.until(1)
    await raw.send(req(2, "session/prompt", {"sessionId": new["result"]["sessionId"],
                                             "prompt": [{"type": "text", "text": "wait 60"}]}))
    raw.proc.send_signal(signal.SIGTERM)
    code, err = await finish(raw)
    assert code == 128 + signal.SIGTERM
    assert "Traceback" not in err and "SIGTERM" in err


async def test_bad_usage_is_exit_2_with_one_line(tmp_path: Path) -> None:
    for argv in (["--permission-mode", "dontAsk"], ["--binding", "pty"],
                 ["--input-format", "text"], ["--log", str(tmp_path)],
                 ["--resume", "x"], ["--transcript-file", str(tmp_path / "t.json")]):
        result = await trio.run_process([CAP, "agent", "--cap-speak", "acp", *argv],
                                        capture_stdout=True, capture_stderr=True, check=False,
                                        stdin=subprocess.DEVNULL)
        err = result.stderr.decode()
        assert result.returncode == 2, (argv, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (argv, err)
