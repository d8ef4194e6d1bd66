"""Malformed lines injected by ``cap-agent``'s own script reach the stream-json driver.

A scripted ``raw`` step makes the agent side write a line verbatim: a garbage
line and a line spliced from two half frames must each become ``cap.error``
``parse_failed`` (the raw line kept) while the turn and the session go on.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio

from trio_cap.actors.bindings.stream_json.connector import StreamJsonConnector
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.events.kinds import CapError, SessionIdle

REPO = Path(__file__).resolve().parents[2]
GARBAGE = "this is not json at all"
SPLICED = '{"type":"assistant","message":{"id":"m{"type":"system","subtype":"sta'

SCRIPT = f"""
[[turn]]
steps = [ {{ say = "before" }}, {{ raw = "{GARBAGE}" }}, {{ raw = '{SPLICED}' }},
          {{ say = "after" }} ]
"""


async def test_garbage_and_spliced_lines_become_parse_failed(tmp_path: Path) -> None:
    script = tmp_path / "script.toml"
    script.write_text(SCRIPT)
    agent = tmp_path / "cap-agent"
    agent.write_text(
        f"#!/bin/sh\nexec {sys.executable} -c "
        "'import sys; from actors.cli.cap_agent import main; sys.exit(main())' "
        f"--script {script} \"$@\"\n")
    agent.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    with trio.fail_after(60):
        async with open_orchestrator() as orch:
            orch.connectors["stream-json"] = StreamJsonConnector(env={"PYTHONPATH": str(REPO)})
            session = await orch.start_session(f"stream-json:{agent}", cwd=work)
            first = await session.run_turn("go")
            second = await session.run_turn("and again")
            view = await session.close()
            events: list[Any] = [env.event for env in orch.log.read(1, session.id)]
    assert view.status == "completed", view
    assert first.stop_reason == second.stop_reason == "end_turn"
    assert "before" in first.text and "after" in first.text
    assert 'You said: "and again"' in second.text
    failed = [e for e in events if isinstance(e, CapError) and e.code == "parse_failed"]
    raws = [e.details["raw"] for e in failed]
    assert GARBAGE in raws
    assert any(r.startswith('{"type":"assistant","message":{"id":"m') for r in raws), raws
    assert len([e for e in events if isinstance(e, SessionIdle)]) == 2
