"""The ``model_server`` pytest fixture, for any test suite that drives agents.

Enable it with ``pytest_plugins = ["trio_cap.actors.model_server.pytest_plugin"]`` in a
top-level conftest (or import the fixture).  Needs pytest-trio: the server runs
in the test's own Trio loop, listening on a free loopback port before the test
body starts and shut down after it; requests are also logged to
``<tmp_path>/requests.jsonl``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from trio_cap.actors.model_server.server import ModelServer, open_model_server


@pytest.fixture
async def model_server(tmp_path: Path) -> AsyncIterator[ModelServer]:
    async with open_model_server(record=tmp_path / "requests.jsonl") as server:
        yield server
