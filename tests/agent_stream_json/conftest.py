"""Fixtures: the installed ``cap-agent`` program and the official TypeScript SDK from npm."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

NODE_SDK = "@anthropic-ai/claude-agent-sdk"
NODE_SDK_VERSION = "0.3.332"
NODE_SDK_PEERS = ("@anthropic-ai/sdk", "@modelcontextprotocol/sdk", "zod")


@pytest.fixture(scope="session")
def cap_agent() -> str:
    """The ``cap-agent`` console script next to this interpreter (``CAP_AGENT_BIN`` overrides)."""
    override = os.environ.get("CAP_AGENT_BIN")
    path = Path(override) if override else Path(sys.executable).with_name("cap-agent")
    if not path.is_file():
        pytest.fail(f"{path} is missing: pyproject.toml must declare the console script "
                    "cap-agent = \"trio_cap.actors.cli.cap_agent:main\" and the package be "
                    "reinstalled "
                    "(pip install -e '.[test]')")
    return str(path)


@pytest.fixture
def recording_agent(cap_agent: str, tmp_path: Path) -> tuple[str, Path]:
    """A wrapper that appends its argv (one per line, then ``--end--``) to a file and execs
    ``cap-agent``; :func:`command_lines` reads them back."""
    argv_file = tmp_path / "argv.txt"
    wrapper = tmp_path / "bin" / "claude"
    wrapper.parent.mkdir()
    wrapper.write_text(f"#!/bin/sh\n{{ printf '%s\\n' \"$@\"; echo --end--; }} >> '{argv_file}'\n"
                       f"exec '{cap_agent}' \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper), argv_file


def command_lines(argv_file: Path) -> list[list[str]]:
    """Each command line the recording wrapper was started with, in order."""
    runs, current = [], []
    for line in argv_file.read_text().split("\n")[:-1]:
        if line == "--end--":
            runs.append(current)
            current = []
        else:
            current.append(line)
    return runs


def node_sdk_root() -> Path:
    return Path(os.environ.get("TRIO_CAP_NODE_SDK_DIR")
                or Path.home() / ".cache" / "trio-cap" / "node-sdk")


def ensure_node_sdk() -> Path:
    """The TS SDK's entry module, installed with npm into a cache outside the repo if missing.

    Fails (never skips) when node or npm is absent or the install is incomplete:
    these tests are the proof that the official client can drive us.
    """
    root = node_sdk_root()
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".install.lock").open("w") as lock:
        # test workers (pytest -n) share the cache: one installs, the others wait for it
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure_node_sdk(root)


def _ensure_node_sdk(root: Path) -> Path:
    package = root / "node_modules" / NODE_SDK / "package.json"
    installed = package.is_file() and json.loads(package.read_text())["version"] == NODE_SDK_VERSION
    if not installed:
        npm = shutil.which("npm")
        if npm is None or shutil.which("node") is None:
            pytest.fail("node and npm are required to test against the TypeScript Claude Agent SDK")
        root.mkdir(parents=True, exist_ok=True)
        (root / "package.json").write_text('{"private": true}\n')
        # --omit=optional: the SDK's platform packages only carry Claude Code's own binary,
        # which these tests replace with cap-agent.
        result = subprocess.run(
            [npm, "install", "--omit=optional", "--no-audit", "--no-fund",
             f"{NODE_SDK}@{NODE_SDK_VERSION}"],
            cwd=root, capture_output=True, text=True, timeout=600, check=False)
        if result.returncode != 0:
            pytest.fail(f"npm install {NODE_SDK}@{NODE_SDK_VERSION} failed:\n{result.stderr}")
    missing = [p for p in (NODE_SDK, *NODE_SDK_PEERS)
               if not (root / "node_modules" / p / "package.json").is_file()]
    if missing:
        pytest.fail(f"{root}: the TypeScript SDK or its peers are missing: {missing}")
    return root / "node_modules" / NODE_SDK / "sdk.mjs"


@pytest.fixture(scope="session")
def node_sdk() -> Path:
    return ensure_node_sdk()
