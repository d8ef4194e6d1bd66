"""Claude Code, Gemini CLI, opencode, Codex and aider in their own TUIs, over ``--binding pty``.

For each: the session becomes ready from the screen alone (no prompt typed
before), a turn's reply is the scripted model's text exactly — no echoed
prompt, glyph, spinner, box, footer or timing line — a second turn works,
a running turn is cancelled with the agent's own cancel keys, and the session
goes on afterwards.  The patterns come from the bundled manifests
(docs/research/cap-protocol/real-agent-tuis-pty.md says where each was seen).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from trio_cap.actors.model_server import ModelServer, script_from_obj
from trio_cap.actors.orchestrator import Orchestrator, Session
from trio_cap.events.kinds import CapError, CapSessionReady, SessionTurnEnded, UserInputInject

pytestmark = pytest.mark.peers

AGENTS = ["claude-code", "gemini-cli", "opencode", "codex", "aider"]
SECONDS = 240

FIRST = "the first scripted reply"
SECOND = "a second scripted reply"
THIRD = "after the cancel all is well"
SLOW = "this slow reply is cancelled long before its last word " * 3

SCRIPT = {"rules": [
    {"match": "zzfirst", "text": FIRST},
    {"match": "zzsecond", "text": SECOND},
    {"match": "zzthird", "text": THIRD},
    {"match": "zzslow", "text": SLOW, "delay_ms": 500},
]}

CHROME = ("●", "✦", "•", "\u276f", "\u203a", "┃", "│", "╭", "╰", "─", "▣", "esc to",
          "esc interrupt", "for shortcuts", "Worked for", "Tokens:", "zz", "sandbox", "ctrl+p")
"""What the five TUIs draw around a reply (glyphs, boxes, footers, the echoed prompt)."""


def clean(text: str) -> str:
    leaked = [piece for piece in CHROME if piece in text]
    assert not leaked, f"chrome in the turn text: {leaked} in {text!r}"
    return text.strip()


def log_of(orch: Orchestrator, session: Session) -> list[object]:
    return [env.event for env in orch.log.read(1, session.id)]


async def until_shown(record: list[object], text: bytes) -> None:
    """Wait until the agent wrote ``text`` to its terminal after the last prompt was sent
    (the connector's record of machine inputs; bounded by the caller's fail_after)."""
    start = max(i for i, (method, _) in enumerate(record) if method == "send")  # type: ignore[misc]

    def shown() -> bool:
        return any(method == "receive_data" and text in args[0]  # type: ignore[misc]
                   for method, args in record[start:])

    while not shown():  # noqa: ASYNC110 - bounded poll: the record has no event to wait on
        await trio.sleep(0.05)


async def until_requested(server: ModelServer, word: str) -> None:
    """Wait until a request whose body mentions ``word`` reached the model server."""
    seen = 0
    while not any(word in json.dumps(r.get("body")) for r in server.records[seen:]):
        seen = len(server.records)
        await server.wait_for_requests(seen + 1)


@pytest.mark.parametrize("name", AGENTS)
async def test_ready_turns_and_cancel(
    name: str, pty_orch: Callable[[str], tuple[Orchestrator, Path]], model_server: ModelServer,
    request: pytest.FixtureRequest,
) -> None:
    model_server.set_script(script_from_obj(SCRIPT))
    orch, workdir = pty_orch(name)
    record: list[object] = []
    with trio.fail_after(SECONDS):
        session = await orch.start_session(name, "pty", cwd=workdir, permissions="allow",
                                           options={"pty.record": record})
        request.node.pty_dump = (orch, session, record)  # shown if the test fails
        first = await session.run_turn("please answer zzfirst")
        second = await session.run_turn("now zzsecond")
        await session.inject("start zzslow")
        await until_requested(model_server, "zzslow")
        # as a user does: cancel once the reply shows (a Ctrl-C in the moment between Enter
        # and the first words makes Claude Code put the prompt back into its input box)
        await until_shown(record, b"reply")
        await session.cancel()
        await orch.wait_until(lambda s: s.sessions.sessions[session.id].ended_turn >= 3)
        third = await session.run_turn("and zzthird")
        view = await session.close()
    events = log_of(orch, session)
    kinds = [type(e) for e in events]
    # ready from the screen, before anything was typed
    assert kinds.index(CapSessionReady) < kinds.index(UserInputInject)
    assert clean(first.text) == FIRST, first
    assert clean(second.text) == SECOND, second
    assert clean(third.text) == THIRD, third
    stops = [e.stop_reason for e in events if isinstance(e, SessionTurnEnded)]
    assert stops == ["end_turn", "end_turn", "cancelled", "end_turn"], stops
    # the cancelled reply stopped early: its last words never reached the screen
    assert not [e for e in events if isinstance(e, CapError)], [
        e for e in events if isinstance(e, CapError)]
    assert view.status == "completed", view
