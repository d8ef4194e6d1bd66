"""Fixtures of the real-agent harness: a live scripted model server and peer environments."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from trio_cap.actors.model_server import ModelServer, pytest_plugin
from trio_cap.actors.peers.env import PeerEnv, isolated_env
from trio_cap.actors.peers.install import PeerMissing, find_binary

# A server on a free loopback port, listening before each test starts.
model_server = pytest_plugin.model_server


PeerFactory = Callable[..., tuple[PeerEnv, Path]]


@pytest.fixture
def peer(tmp_path: Path, model_server: ModelServer) -> PeerFactory:
    """``peer(name)`` → (isolated env pointing at ``model_server``, an empty workdir).

    A missing peer fails the test loudly: CI installs them first
    (``cap peers install all``), so a missing one is a broken setup, not a skip.
    """

    def make(name: str, **kwargs: object) -> tuple[PeerEnv, Path]:
        try:
            find_binary(name)
        except PeerMissing as exc:
            pytest.fail(str(exc), pytrace=False)
        workdir = tmp_path / f"work-{name}"
        workdir.mkdir()
        penv = isolated_env(name, model_server.url, home=tmp_path / f"home-{name}",
                            workdir=workdir, **kwargs)  # type: ignore[arg-type]
        return penv, workdir

    return make
