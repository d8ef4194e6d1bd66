"""With the deterministic clock and id source, the same run logs the same bytes."""

import msgspec

from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.events.clock import StepClock
from trio_cap.events.log import MemoryEventLog

TASK = "plan: a; b\nthink: first\nwrite f.txt: hello\nask: pick [x|y]\nwait 5\nsome words"


async def one_run(cwd) -> bytes:
    (cwd / "f.txt").unlink(missing_ok=True)
    log = MemoryEventLog(StepClock())
    async with open_orchestrator(log, clock=StepClock(), ids=SequentialIds()) as orch:
        session = await orch.start_session(cwd=cwd, permissions="allow")
        await session.run_turn(TASK)
        await session.run_turn("fail: rate_limit")
        await session.close()
    return msgspec.msgpack.encode(log.read())


async def test_two_runs_produce_identical_logs(tmp_path, autojump_clock):
    first = await one_run(tmp_path)
    second = await one_run(tmp_path)
    assert first == second
    assert len(first) > 1000
