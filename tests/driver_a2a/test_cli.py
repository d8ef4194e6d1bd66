"""``cap run --agent a2a:URL`` as a real process against a real a2a-sdk server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.driver_a2a.servers import A2aServer, Ask, Echo

CAP = [sys.executable, "-m", "trio_cap.actors.cli"]
ROOT = Path(__file__).resolve().parents[2]
TOKEN = "cli-token-9f8e7d"


def cap(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "CAP_A2A_TOKEN"}
    full.update(PYTHONPATH=str(ROOT), **env)
    return subprocess.run([*CAP, *args], cwd=cwd, capture_output=True, text=True, env=full,
                          stdin=subprocess.DEVNULL, timeout=120)


def test_run_drives_an_a2a_agent_in_either_spelling(tmp_path: Path) -> None:
    for versions in (("1.0",), ("0.3",)):
        with A2aServer(Echo(), versions=versions).running() as srv:
            result = cap("run", "--agent", f"a2a:{srv.base}", "--task", "hello there",
                         "--log", str(tmp_path / f"{versions[0]}.caplog"), cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "echo: hello there" in result.stdout
        assert "a2a_no_cap_extension" in result.stdout + result.stderr


def test_a_question_ends_the_run_with_the_question_shown(tmp_path: Path) -> None:
    with A2aServer(Ask()).running() as srv:
        result = cap("run", "--agent", f"a2a:{srv.base}", "--task", "hi", "--headless",
                     "--log", str(tmp_path / "r.caplog"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "What is your name?" in result.stdout


def test_token_file_is_used_and_never_shown_or_logged(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    log = tmp_path / "t.caplog"
    with A2aServer(Echo(), token=TOKEN).running() as srv:
        result = cap("run", "--agent", f"a2a:{srv.base}", "--task", "hi", "--token-file",
                     str(token), "--log", str(log), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "echo: hi" in result.stdout
    assert TOKEN not in result.stdout + result.stderr
    assert TOKEN.encode() not in log.read_bytes()


def test_the_environment_token(tmp_path: Path) -> None:
    with A2aServer(Echo(), token=TOKEN).running() as srv:
        result = cap("run", "--agent", f"a2a:{srv.base}", "--task", "hi", "--log",
                     str(tmp_path / "e.caplog"), cwd=tmp_path, CAP_A2A_TOKEN=TOKEN)
    assert result.returncode == 0, result.stderr


def test_an_unreadable_token_file_is_a_usage_error(tmp_path: Path) -> None:
    result = cap("run", "--agent", "a2a:http://127.0.0.1:9", "--task", "hi", "--token-file",
                 str(tmp_path / "nope"), cwd=tmp_path)
    assert result.returncode == 2
    assert "--token-file: cannot read the token file" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / ".cap").exists(), "a usage error leaves no log behind"


def test_a_refused_token_fails_the_run_with_what_to_do(tmp_path: Path) -> None:
    with A2aServer(Echo(), token=TOKEN).running() as srv:
        result = cap("run", "--agent", f"a2a:{srv.base}", "--task", "hi", "--log",
                     str(tmp_path / "f.caplog"), cwd=tmp_path)
    assert result.returncode == 1
    assert "HTTP 401" in result.stderr and "--token-file" in result.stderr
    assert "Traceback" not in result.stderr
