"""Real agents' TUIs driven over the PTY binding, each on the scripted model server.

Each test gets its own server, HOME and workdir (the harness's ``peer`` fixture);
the agent is started the way ``cap run --agent NAME --binding pty`` starts it:
by its bundled manifest, on a real pseudo-terminal.  A missing agent fails loudly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.harness.conftest import PeerFactory, peer  # noqa: F401 - re-exported fixture
from trio_cap.actors.bindings.pty.connector import PtyConnector
from trio_cap.actors.model_server import ModelServer
from trio_cap.actors.orchestrator import Orchestrator, open_orchestrator

PtyAgent = Callable[[str], Any]


@pytest.fixture
async def pty_orch(
    peer: PeerFactory, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> AsyncIterator[Callable[[str], tuple[Orchestrator, Path]]]:
    """``pty_orch(name)`` → an orchestrator whose PTY connector runs ``name`` in its isolated
    environment (the agent's whole environment; its PATH is ours too, so the manifest's
    binary resolves to the pinned install), and the agent's workdir."""
    async with open_orchestrator(grace=10.0) as orch:
        def make(name: str) -> tuple[Orchestrator, Path]:
            # codex: with its default model the TUI opens on a "Meet GPT-6" migration screen
            kwargs = {"model": "fake-model"} if name == "codex" else {}
            penv, workdir = peer(name, **kwargs)
            monkeypatch.setenv("PATH", penv.env["PATH"])
            orch.connectors["pty"] = PtyConnector(env=penv.env, inherit_env=False)
            return orch, workdir

        yield make


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed real-TUI test shows its session's events and the last screen it was read from."""
    report = yield
    dump = getattr(item, "pty_dump", None)
    if report.failed and dump is not None and call.when == "call":
        orch, session, record = dump
        lines = [f"{type(e.event).__name__}: {str(e.event)[:300]}"
                 for e in orch.log.read(1, session.id)]
        report.sections.append(("session events", "\n".join(lines)))
        screen = _last_screen(record)
        import pickle
        import tempfile
        with tempfile.NamedTemporaryFile("wb", prefix="pty-record-", suffix=".pkl",
                                         delete=False) as file:
            pickle.dump(record, file)
        report.sections.append(("pty record", file.name))
        if screen:
            report.sections.append(("last screen", screen))
    return report


def _last_screen(record: list[Any]) -> str:
    from trio_cap.actors.bindings.pty.machine_screen import TuiVtScreen

    data = [args[0] for method, args in record if method == "receive_data"]
    if not data:
        return ""
    screen = TuiVtScreen(200, 50)
    for chunk in data:
        screen.feed(chunk)
    return "\n".join(row for row in screen.rows() if row.strip())
