"""Fixtures for the ACP driver: the official SDK peers and an orchestrator that drives them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.harness.conftest import PeerFactory, peer
from trio_cap.actors.model_server import ModelServer, pytest_plugin
from trio_cap.actors.orchestrator import Orchestrator, open_orchestrator
from trio_cap.actors.peers.catalog import PEERS
from trio_cap.actors.peers.install import PeerMissing, find_binary, peer_dir, peers_root

model_server = pytest_plugin.model_server


def peer_program(name: str, program: str | None = None) -> Path:
    """An installed SDK peer's launcher; a missing peer fails loudly (CI installs them)."""
    try:
        binary = find_binary(name)
    except PeerMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    return binary if program is None else binary.parent / program


def sdk_sdist() -> Path:
    """The unpacked sdist of the official Python SDK (examples, tests/golden)."""
    spec = PEERS["acp-python-sdk"]
    peer_program("acp-python-sdk")
    return peer_dir(spec, peers_root()) / "sdist" / f"agent_client_protocol-{spec.version}"


def sdk_python() -> Path:
    """The Python of the SDK peer's venv (the exerciser agent runs on it)."""
    return peer_program("acp-python-sdk", "python")


@pytest.fixture
async def orch() -> AsyncIterator[Orchestrator]:
    async with open_orchestrator(grace=5.0) as orchestrator:
        yield orchestrator


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


__all__ = ["ModelServer", "PeerFactory", "model_server", "peer"]
