"""Record the driver's golden traffic: real sessions with real agents, every driver call kept.

Run by hand (and again only when the agents' output or the driver's events
change on purpose)::

    .venv/bin/python -m pytest -p no:cacheprovider tests/driver_stream_json/golden/record.py

(not collected by the suite: its name does not start with ``test_``).  It
writes ``cap_agent.jsonl`` (trio-cap's own agent) and ``claude_code.jsonl``
(the pinned real Claude Code against the scripted model server).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.driver_stream_json.conftest import claude  # noqa: F401 - fixture
from tests.driver_stream_json.golden.recording import HERE, RecordingDriver
from tests.driver_stream_json.test_cap_agent import agent, wrapper  # noqa: F401 - fixtures
from trio_cap.actors.bindings.stream_json import connector
from trio_cap.actors.model_server import ModelServer, script_from_obj
from trio_cap.actors.orchestrator import Orchestrator, Session


@pytest.fixture(autouse=True)
def recording(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    RecordingDriver.made.clear()
    monkeypatch.setattr(connector, "StreamJsonDriver", RecordingDriver)
    yield


async def _decide_all(orch: Orchestrator, session: Session, deny: str) -> None:
    """Answer prompts as they come: asks with "sqlite"; permissions allowed unless ``deny``."""
    seen: set[str] = set()

    def waiting(state: Any) -> bool:
        asks = state.pending.asks.get(session.id, {}).keys()
        perms = state.pending.permissions.get(session.id, {}).keys()
        return bool((asks | perms) - seen)

    while True:
        await orch.wait_until(waiting)
        for ask_id in list(orch.state.pending.asks.get(session.id, {})):
            if ask_id not in seen:
                seen.add(ask_id)
                await session.answer(ask_id, "sqlite")
        for req_id, request in list(orch.state.pending.permissions.get(session.id, {}).items()):
            if req_id not in seen:
                seen.add(req_id)
                await session.decide(req_id, "deny" if deny in str(request.intent)
                                     else "allow_once")


async def test_record_cap_agent(agent: tuple[Orchestrator, str, Path]) -> None:  # noqa: F811
    orch, spec, workdir = agent
    with trio.fail_after(60):
        session = await orch.start_session(spec, cwd=workdir, permissions="ask")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_decide_all, orch, session, "rm -rf")
            await session.run_turn("think: quietly\nsay: hello there")
            await session.run_turn("write notes.txt: hello\nrun: rm -rf /")
            await session.run_turn("ask: Which DB? [pg|sqlite]")
            await session.run_turn("fail: rate_limit")
            nursery.cancel_scope.cancel()
        await session.close()
    (driver,) = RecordingDriver.made
    driver.save(HERE / "cap_agent.jsonl")


@pytest.mark.peers
async def test_record_claude_code(claude: tuple[Orchestrator, Path],  # noqa: F811
                                  model_server: ModelServer) -> None:
    orch, workdir = claude
    question = {"questions": [{"question": "Which database?", "header": "DB",
                               "multiSelect": False,
                               "options": [{"label": "postgres", "description": "server"},
                                           {"label": "sqlite", "description": "a file"}]}]}
    target = workdir / "hello.txt"
    model_server.set_script(script_from_obj({"turns": [
        {"thinking": "Let me think.", "text": "first answer here"},
    ], "rules": [
        {"match": "create hello", "text": "On it.",
         "tool_calls": [{"name": "Write", "arguments": {"file_path": str(target),
                                                         "content": "hi from claude\n"}}],
         "then": {"text": "Finished."}},
        {"match": "pick a database", "text": "Let me ask.",
         "tool_calls": [{"name": "AskUserQuestion", "arguments": question}],
         "then": {"text": "Going with your choice."}},
    ]}))
    with trio.fail_after(120):
        session = await orch.start_session("claude-code", "stream-json", cwd=workdir,
                                           permissions="ask", human=True)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_decide_all, orch, session, "never")
            await session.run_turn("say something")
            await session.run_turn("please create hello.txt")
            await session.run_turn("pick a database for me")
            nursery.cancel_scope.cancel()
        await session.close()
    assert RecordingDriver.made, "no stream-json driver was made"
    RecordingDriver.made[-1].save(HERE / "claude_code.jsonl")
