"""Fixtures for driving agents over stream-json through the whole orchestrator path."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.harness.conftest import PeerFactory, peer  # noqa: F401 - re-exported fixture
from trio_cap.actors.bindings.stream_json.connector import StreamJsonConnector
from trio_cap.actors.model_server import ModelServer
from trio_cap.actors.orchestrator import Orchestrator, open_orchestrator

ClaudeOrch = Callable[[], Any]


@pytest.fixture
async def claude(
    peer: PeerFactory, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> AsyncIterator[tuple[Orchestrator, Path]]:
    """An orchestrator whose ``stream-json`` connector starts the pinned Claude Code.

    The peer's isolated environment (own HOME, the scripted model server) is the
    agent's whole environment; its PATH is also ours, so manifest resolution
    finds the pinned ``claude`` the same way a user's shell would.
    """
    penv, workdir = peer("claude-code")
    monkeypatch.setenv("PATH", penv.env["PATH"])
    async with open_orchestrator(grace=10.0) as orch:
        orch.connectors["stream-json"] = StreamJsonConnector(env=penv.env, inherit_env=False)
        yield orch, workdir
