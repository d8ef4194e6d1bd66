"""``cap replay --check``: a recorded run, run again offline through the same machines."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import msgspec
import pytest
import trio

from tests.replay.helpers import NO_AGENTS, VENV_BIN, assert_clean, cap, read_log, sessions_of
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.actors.replay.check import Divergence, check_sessions, group_sessions
from trio_cap.actors.session.machine import SessionMachine
from trio_cap.events.clock import StepClock
from trio_cap.events.kinds import FrameIn, FrameOut, PermissionDecided, SessionTurnEnded
from trio_cap.events.log import MemoryEventLog
from trio_cap.events.replay import replay

TASK = "plan: a; b\nthink: first\nwrite f.txt: hello\nask: pick [x|y]\nsome words"


async def recorded_run(cwd: Path, binding: str, record: str, log=None) -> MemoryEventLog:
    log = log or MemoryEventLog(StepClock())
    async with open_orchestrator(log, clock=StepClock(), ids=SequentialIds()) as orch:
        orch.record = record
        session = await orch.start_session(binding=binding, cwd=cwd, permissions="allow")
        await session.run_turn(TASK)
        await session.run_turn("fail: rate_limit")
        await session.run_turn("run: rm -rf /")
        await orch.caught_up()
        # the live projection while the session is open (a finished one's detail leaves it)
        live = msgspec.to_builtins(orch.state)
        await session.close()
        await orch.caught_up()
        final = msgspec.to_builtins(orch.state)
    log.live_state = live  # type: ignore[attr-defined]
    log.final_state = final  # type: ignore[attr-defined]
    return log


@pytest.fixture(autouse=True)
def cap_on_path(monkeypatch):
    """The stream-json binding of cap-agent runs ``cap agent``."""
    monkeypatch.setenv("PATH", f"{VENV_BIN}:/usr/bin:/bin")


@pytest.mark.parametrize("binding", ["inproc", "stream-json"])
@pytest.mark.parametrize("record", ["frames", "off"])
async def test_a_recorded_run_replays_identically(tmp_path, binding, record):
    log = await recorded_run(tmp_path, binding, record)
    envs = log.read()
    framed = [e for e in envs if type(e.event) in (FrameIn, FrameOut)]
    if record == "off":
        assert not framed
    else:
        assert framed and all(e.event.binding == binding for e in framed)
    result = check_sessions(group_sessions([envs]))
    assert result.sessions == 1
    assert result.events == len(envs)  # every event of the session was compared


async def test_recording_off_still_replays_its_projections_exactly(tmp_path, autojump_clock):
    log = await recorded_run(tmp_path, "inproc", "off")
    live = log.live_state  # type: ignore[attr-defined]
    assert msgspec.to_builtins(replay(log, until=live["last_seq"])) == live
    final = msgspec.to_builtins(replay(log))
    for kept in ("sessions", "usage", "last_seq"):  # what the live state keeps at the end
        assert final[kept] == log.final_state[kept]  # type: ignore[attr-defined]
    assert check_sessions(group_sessions([log.read()])).events == log.last_seq


async def test_a_changed_machine_diverges_at_the_first_event_it_changes(tmp_path):
    log = await recorded_run(tmp_path, "inproc", "frames")
    envs = log.read()
    # the third turn asks for `rm -rf /`: high risk, refused by 'allow' without the flag
    refusal = next(e for e in envs if type(e.event) is PermissionDecided
                   and e.event.decision == "deny")

    class Looser(SessionMachine):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.policy = type(self.policy)(name="allow", allow_high_risk=True,
                                            human=self.policy.human)

    with pytest.raises(Divergence) as caught:
        check_sessions(group_sessions([envs]), machine_factory=Looser)
    div = caught.value
    assert div.seq == refusal.seq
    assert div.expected.event == refusal.event
    assert div.got[1].decision == "allow_once"
    text = div.describe()
    assert f"first divergence at seq {refusal.seq}" in text
    assert '"decision":"deny"' in text and '"decision":"allow_once"' in text


async def test_a_machine_that_drops_a_turn_end_diverges_there(tmp_path):
    log = await recorded_run(tmp_path, "stream-json", "frames", MemoryEventLog(StepClock()))
    envs = log.read()
    first_end = next(e for e in envs if type(e.event) is SessionTurnEnded)

    class Forgetful(SessionMachine):
        def on_turn_ended(self, stop_reason):
            return []

    with pytest.raises(Divergence) as caught:
        check_sessions(group_sessions([envs]), machine_factory=Forgetful)
    assert caught.value.seq == first_end.seq
    assert caught.value.got is None or caught.value.got[1] != first_end.event


# ---- the command, as a real process ---------------------------------------------------


def test_cap_run_over_stream_json_then_check_with_no_agent_on_path(tmp_path):
    run = cap("run", "--binding", "stream-json", "--task", "write f.txt: hi\nsome words",
              "--next", "run: ls", "--permissions", "allow", "--headless", "--log", "a.caplog",
              cwd=tmp_path)
    assert_clean(run, 0)
    sessions = sessions_of(tmp_path / "a.caplog")
    (recorded,) = sessions.values()
    assert sum(type(e.event) is FrameIn for e in recorded) > 5
    checked = cap("replay", "a.caplog", "--check", cwd=tmp_path, env=NO_AGENTS)
    assert_clean(checked, 0, f"checked {len(recorded)} events of 1 session(s)")


PATCH = """
import sys
from trio_cap.actors.session import machine
real = machine.SessionMachine.on_turn_ended
def patched(self, stop_reason):
    return real(self, "max_tokens" if stop_reason == "end_turn" else stop_reason)
machine.SessionMachine.on_turn_ended = patched
from trio_cap.actors.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_check_with_a_patched_machine_fails_at_the_right_seq_readably(tmp_path):
    assert_clean(cap("run", "--task", "hello", "--headless", "--log", "a.caplog",
                     cwd=tmp_path), 0)
    envs = read_log(tmp_path / "a.caplog")
    ended = next(e for e in envs if type(e.event) is SessionTurnEnded)
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-c", PATCH, "replay", "a.caplog", "--check"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env=NO_AGENTS)
    assert_clean(result, 1, f"first divergence at seq {ended.seq}")
    assert '"stop_reason":"max_tokens"' in result.stdout
    assert "expected: cause" in result.stdout and "got:      cause" in result.stdout
    assert result.stderr.strip().splitlines() == [
        f"cap: replay check failed: session {ended.stream} diverges at seq {ended.seq}"]


def test_check_failure_paths(tmp_path):
    assert_clean(cap("replay", "nope.caplog", "--check", cwd=tmp_path), 2,
                 "nope.caplog: no such log file")
    assert_clean(cap("run", "--task", "hello", "--headless", "--log", "a.caplog",
                     cwd=tmp_path), 0)
    assert_clean(cap("replay", "a.caplog", "--check", "--session", "sess-x", cwd=tmp_path),
                 2, "no session 'sess-x' in a.caplog")


async def test_check_a_log_written_to_a_file(tmp_path):
    from trio_cap.events.log import FileEventLog
    path = tmp_path / "f.caplog"
    async with FileEventLog(path) as log:
        await recorded_run(tmp_path, "inproc", "frames", log)
    assert check_sessions(sessions_of(path)).sessions == 1
    # silence unused-import lints for trio in this module
    assert trio


async def test_concurrent_sessions_in_one_log_each_replay_in_their_arrival_order(tmp_path):
    """Three sessions at once over both bindings: their batches interleave in the log."""
    log = MemoryEventLog()
    async with open_orchestrator(log) as orch:
        orch.record = "frames"

        async def one(binding: str, n: int) -> None:
            cwd = tmp_path / f"s{n}"
            cwd.mkdir()
            session = await orch.start_session(binding=binding, cwd=cwd, permissions="allow")
            await session.run_turn(f"write f{n}.txt: {n}\nsome words")
            await session.run_turn("run: ls")
            await session.close()

        async with trio.open_nursery() as nursery:
            for n, binding in enumerate(["inproc", "stream-json", "inproc"]):
                nursery.start_soon(one, binding, n)
    envs = log.read()
    streams = [e.stream for e in envs if e.stream]
    switches = sum(a != b for a, b in pairwise(streams))
    assert switches > 3  # the sessions' events really are interleaved
    result = check_sessions(group_sessions([envs]))
    assert result.sessions == 3 and result.events == len(streams)
    only = sorted(set(streams))[1]
    assert check_sessions(group_sessions([envs], only), only).sessions == 1


def test_cap_agents_acp_binding_replays_through_the_acp_machine(tmp_path):
    """cap-agent over ACP: its served write and the turn's diff come back from the log."""
    run = cap("run", "--binding", "acp", "--task", "write z.txt: hi\nsome words",
              "--permissions", "allow", "--headless", "--log", "acp.caplog", cwd=tmp_path)
    assert_clean(run, 0)
    assert any(type(e.event) is FrameIn and e.event.binding == "acp"
               for e in read_log(tmp_path / "acp.caplog"))
    checked = cap("replay", "acp.caplog", "--check", cwd=tmp_path, env=NO_AGENTS)
    assert_clean(checked, 0, "the replay produced every recorded event, identically")
    assert "no replay machine" not in checked.stdout + checked.stderr
