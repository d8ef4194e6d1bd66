"""Fixtures for driving ``cap agent --cap-speak pty`` through the PTY connector.

The agent is a real subprocess on a real pseudo-terminal, found the way a user's
run finds it: by its manifest.  Tests that need other flags (a script, dropped
Enters) get a copy of the bundled manifest whose ``[startup].command`` carries them.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_cap.actors.bindings.pty.connector import PtyConnector
from trio_cap.actors.manifest.resolve import bundled_dir
from trio_cap.actors.orchestrator import Orchestrator, Session, open_orchestrator
from trio_cap.events.kinds import AskUser, SessionTurnEnded

SECONDS = 60
CAP = Path(sys.executable).parent / "cap"
BUNDLED_COMMAND = 'command = ["cap", "agent", "--cap-speak", "pty"]'


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # the bundled manifest names `cap`; probe answers are cached per user, so keep ours apart
    monkeypatch.setenv("PATH", f"{CAP.parent}:{__import__('os').environ.get('PATH', '')}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    return work


@pytest.fixture
def manifest_with(tmp_path: Path) -> Callable[..., Path]:
    """``manifest_with(*flags)``: the bundled cap-agent manifest, its TUI started with flags."""

    def make(*flags: str) -> Path:
        text = (bundled_dir() / "cap-agent.toml").read_text(encoding="utf-8")
        assert text.count(BUNDLED_COMMAND) == 1
        command = [str(CAP), "agent", "--cap-speak", "pty", *flags]
        text = text.replace(BUNDLED_COMMAND, f"command = {json.dumps(command)}")
        path = tmp_path / "cap-agent-pty.toml"
        path.write_text(text, encoding="utf-8")
        return path

    return make


@pytest.fixture
async def orch(workdir: Path) -> AsyncIterator[Orchestrator]:
    async with open_orchestrator(grace=5.0) as orch:
        orch.connectors["pty"] = PtyConnector()
        yield orch


def events(orch: Orchestrator, session: Session, kind: type | None = None) -> list[Any]:
    return [env.event for env in orch.log.read(1, session.id)
            if kind is None or type(env.event) is kind]


async def turn_answering(orch: Orchestrator, session: Session, text: str,
                         answers: Sequence[Any]) -> list[AskUser]:
    """Send ``text`` and answer each ``cap.ask_user`` it raises, in order; the asks."""
    accepted = await session.inject(text)
    asks: list[AskUser] = []
    pending = list(answers)
    def moved(_state: Any, seen: int) -> bool:
        evs = [e.event for e in orch.log.read(accepted.seq, session.id)]
        ended = any(type(e) is SessionTurnEnded for e in evs)
        return ended or sum(type(e) is AskUser for e in evs) > seen

    while True:
        await orch.wait_until(functools.partial(moved, seen=len(asks)))

        evs = [e.event for e in orch.log.read(accepted.seq, session.id)]
        new = [e for e in evs if type(e) is AskUser][len(asks):]
        if not new:
            return asks
        asks += new
        for ask in new:
            assert pending, f"an ask nobody expected: {ask.prompt!r}"
            await session.answer(ask.ask_id, pending.pop(0))


async def start(orch: Orchestrator, agent: str | Path, workdir: Path, **kwargs: Any) -> Session:
    with trio.fail_after(SECONDS):
        return await orch.start_session(str(agent), "pty", cwd=workdir, **kwargs)
