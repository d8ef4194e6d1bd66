"""``cap model …`` and ``cap peers …`` through their argparse registration."""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio

from trio_cap.actors.cli import model_cmd, peers_cmd
from trio_cap.actors.peers.catalog import PEERS

# Runs the two command groups the way ``cap`` will once they are registered there.
CAP = """
import argparse, sys
from trio_cap.actors.cli import model_cmd, peers_cmd
p = argparse.ArgumentParser(prog="cap"); sub = p.add_subparsers()
model_cmd.register(sub); peers_cmd.register(sub)
a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cap")
    sub = p.add_subparsers()
    model_cmd.register(sub)
    peers_cmd.register(sub)
    return p


def cap(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    return int(args.func(args))


@pytest.mark.parametrize("argv, needles", [
    (["model", "serve", "--help"], ["--script", "--listen", "--record", "HOST:PORT",
                                    "[[rules]]", "retry_after", "streamGenerateContent"]),
    (["peers", "install", "--help"], ["all", "--force", "--dir", "cache"]),
    (["peers", "env", "--help"], ["--model-url", "--home", "--workdir", "telemetry"]),
    (["peers", "list", "--help"], ["--json"]),
    (["peers", "--help"], ["install", "list", "env", "claude-code-acp"]),
])
def test_help_explains_commands(argv: list[str], needles: list[str],
                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        parser().parse_args(argv)
    assert info.value.code == 0
    out = capsys.readouterr().out
    for needle in needles:
        assert needle in out


def test_group_without_subcommand_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cap(["peers"]) == 2 and "install" in capsys.readouterr().out
    assert cap(["model"]) == 2 and "serve" in capsys.readouterr().out


def test_peers_list_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cap(["peers", "list", "--json", "--dir", str(tmp_path)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["name"] for r in rows] == list(PEERS)
    assert not any(r["installed"] for r in rows)
    assert {r["api"] for r in rows} == {"anthropic", "gemini", "openai-chat", "openai-responses",
                                        "none"}  # none: the ACP SDKs' example agents


def test_peers_list_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cap(["peers", "list", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "opencode-ai@1.18.33" in out and "not installed" in out


def test_peers_install_unknown_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert cap(["peers", "install", "nope"]) == 2
    assert "unknown peer 'nope'" in capsys.readouterr().err


def test_peers_env_exports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home, work = tmp_path / "h", tmp_path / "w"
    assert cap(["peers", "env", "claude-code", "--model-url", "http://127.0.0.1:1234",
                "--home", str(home), "--workdir", str(work), "--dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    exports = dict(shlex.split(line)[1].split("=", 1) for line in lines
                   if line.startswith("export "))
    assert exports["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:1234"
    assert exports["HOME"] == str(home.resolve())
    assert any("cap peers install claude-code" in line for line in lines)
    assert cap(["peers", "env", "gemini-cli", "--model-url", "http://127.0.0.1:1/",
                "--home", str(home), "--json", "--dir", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["env"]["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:1"
    assert data["installed"] is False and data["files"]


def test_model_serve_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[[turns]]\nnope = 1\n")
    assert cap(["model", "serve", "--script", str(bad)]) == 2
    assert "bad.toml" in capsys.readouterr().err
    assert cap(["model", "serve", "--listen", "no-port"]) == 2
    assert "HOST:PORT" in capsys.readouterr().err


async def test_model_serve_process(tmp_path: Path) -> None:
    """The real command: prints its URL once listening, serves, stops on SIGTERM."""
    script = tmp_path / "s.toml"
    script.write_text('[default]\ntext = "from the cli"\n')
    record = tmp_path / "r.jsonl"
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-c", CAP, "model", "serve", "--script", str(script),
         "--listen", "127.0.0.1:0", "--record", str(record)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        with trio.fail_after(30):
            out = b""
            while b"\n" not in out:
                chunk = await proc.stdout.receive_some(1000)
                assert chunk, "server exited before printing its URL"
                out += chunk
        first = out.decode().splitlines()[0]
        assert first.startswith("cap model serve: listening on http://127.0.0.1:")
        url = first.rsplit(" ", 1)[1]
        async with httpx.AsyncClient(base_url=url) as client:
            r = await client.post("/v1/chat/completions", json={
                "model": "m", "messages": [{"role": "user", "content": "hi"}]},
                headers={"authorization": "Bearer sk-x"})
        assert r.json()["choices"][0]["message"]["content"] == "from the cli"
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    (rec,) = [json.loads(line) for line in record.read_text().splitlines()]
    assert rec["path"] == "/v1/chat/completions" and rec["headers"]["authorization"] == (
        "<redacted>")
