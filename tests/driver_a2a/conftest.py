"""Fixtures: real a2a-sdk servers (``servers.py``) and an orchestrator to drive them with."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from trio_cap.actors.orchestrator import Orchestrator, open_orchestrator

SECONDS = 60
SPELLINGS = {"1.0": ("1.0",), "0.3": ("0.3",)}
"""Card versions per spelling under test: a card offering only that one, so the driver must
speak it (the draft one served through a2a-sdk's ``enable_v0_3_compat``)."""


@pytest.fixture(params=sorted(SPELLINGS))
def spelling(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def orch() -> AsyncIterator[Orchestrator]:
    async with open_orchestrator(grace=5.0) as orch:
        yield orch


def events_of(orch: Orchestrator, session_id: str, kind: type | None = None) -> list[Any]:
    return [env.event for env in orch.log.read(1, session_id)
            if kind is None or type(env.event) is kind]


async def one_turn(orch: Orchestrator, url: str, cwd: Any, text: str = "hi") -> tuple[Any, Any]:
    """Start a session on ``a2a:URL``, run one turn, close it: (session, turn result)."""
    session = await orch.start_session(f"a2a:{url}", cwd=cwd)
    turn = await session.run_turn(text)
    await session.close()
    return session, turn
