"""A flooding agent cannot grow the log without bound: raw output past the budget is counted.

The agent is a real process (``cap-agent`` over stream-json) writing thousands of lines
the driver cannot map: JSON of an unknown type (``agent.raw``) and garbage
(``cap.error`` ``parse_failed`` carrying the line).
"""

import sys
from pathlib import Path

import trio

from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.actors.session.raw_budget import DEFAULT_RAW_BUDGET, WARNING_CODE
from trio_cap.events.kinds import AgentRaw, CapError, SessionWarning, TextChunk

CAP_AGENT = Path(sys.executable).with_name("cap-agent")
LINES = 3000
WIDTH = 1000  # 3 MB of raw output, three times the default budget


async def test_a_flooding_agent_stores_one_budget_of_raw_output(tmp_path):
    pad = "x" * WIDTH
    lines = [f"{{ raw = '{{\"type\":\"flood\",\"n\":{i},\"pad\":\"{pad}\"}}' }}"
             if i % 2 else f'{{ raw = "not json {i} {pad}" }}' for i in range(LINES)]
    steps = ", ".join([*lines, '{ say = "done" }'])
    script = tmp_path / "flood.toml"
    script.write_text(f"[[turn]]\nsteps = [ {steps} ]\n")
    work = tmp_path / "work"
    work.mkdir()
    log_path = tmp_path / "log.cap"
    with trio.fail_after(120):
        async with open_orchestrator(log=log_path) as orch:
            session = await orch.start_session(f"stream-json:{CAP_AGENT} --script {script}",
                                               cwd=work, permissions="deny")
            result = await session.run_turn("go")
            await session.close()
            events = [env.event for env in orch.log.read(1, session.id)]
    assert "done" in result.text
    raws = [e for e in events if type(e) is AgentRaw and '"flood"' in e.text]
    garbage = [e for e in events if type(e) is CapError and e.code == "parse_failed"]
    assert raws and garbage
    stored = sum(len(e.text) for e in raws) + sum(len(e.details["raw"]) for e in garbage)
    assert stored <= DEFAULT_RAW_BUDGET
    assert len(raws) + len(garbage) < LINES
    warnings = [e for e in events if type(e) is SessionWarning and e.code == WARNING_CODE]
    assert len(warnings) == 2  # the moment the budget ran out, and the count at the end
    # the flood lines not stored, plus the agent's own unknown system frames (transcript diffs)
    dropped = int(warnings[1].message.split()[0])
    assert dropped >= LINES - len(raws) - len(garbage)
    assert "raw output events" in warnings[1].message
    assert any(type(e) is TextChunk and "done" in e.text for e in events)  # typed events kept
    assert log_path.stat().st_size < 2 * DEFAULT_RAW_BUDGET
