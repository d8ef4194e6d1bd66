"""The kit's process shell, against real processes: every exit path ends the whole group.

Each agent here starts a grandchild (as a real agent's tool does), so "the
agent is gone" is only true when the grandchild is gone too.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from tests.kit.agents import alive, child_pid, gone, write_agent
from trio_cap.actors.bindings.process import (
    StderrBudget,
    kill_live_groups,
    live_groups,
    open_task_group,
    spawn_agent,
)
from trio_cap.actors.connection import ConnectError
from trio_cap.events.kinds import AgentRaw

GRACE = 0.5
BOUND = 30


async def ignore(data: bytes) -> None:
    await trio.lowlevel.checkpoint()


async def started(agent) -> None:
    """Wait for the agent's ``started`` line (its grandchild exists by then)."""
    stdout = agent.proc.stdout
    seen = b""
    while b"\n" not in seen:
        seen += await stdout.receive_some(100)


@pytest.mark.parametrize("how", ["normal", "error", "cancelled"])
async def test_leaving_the_block_any_way_ends_the_whole_group(tmp_path: Path, how: str) -> None:
    argv = write_agent(tmp_path, "stubborn")
    with trio.fail_after(BOUND):
        with trio.move_on_after(BOUND / 2) as scope:
            try:
                async with spawn_agent(argv, cwd=tmp_path, env=None, binding="t",
                                       grace=GRACE) as agent:
                    await started(agent)
                    assert agent.pid in live_groups()
                    assert alive(agent.pid) and alive(child_pid(tmp_path))
                    if how == "error":
                        raise ValueError("the caller's own bug")
                    if how == "cancelled":
                        scope.cancel()
                        await trio.sleep_forever()
            except ValueError:
                assert how == "error"
    assert scope.cancelled_caught == (how == "cancelled")
    assert not alive(agent.pid) and gone(child_pid(tmp_path))
    assert agent.pid not in live_groups()
    assert agent.returncode == -signal.SIGKILL  # it ignored SIGTERM


async def test_sigterm_is_escalated_to_sigkill_after_two_graces(tmp_path: Path) -> None:
    argv = write_agent(tmp_path, "stubborn")
    async with spawn_agent(argv, cwd=tmp_path, env=None, binding="t", grace=GRACE) as agent:
        await started(agent)
        begun = trio.current_time()
        with trio.fail_after(BOUND):
            await agent.terminate()
        took = trio.current_time() - begun
    assert 2 * GRACE <= took < 2 * GRACE + 5
    assert "killed by SIGKILL" in agent.describe_exit()


async def test_an_agent_that_exits_at_stdin_eof_is_never_signalled(tmp_path: Path) -> None:
    argv = write_agent(tmp_path, "eof")
    with trio.fail_after(BOUND):
        async with spawn_agent(argv, cwd=tmp_path, env=None, binding="t", grace=5) as agent:
            await started(agent)
    assert agent.returncode == 0
    assert agent.describe_exit() == "the agent exited with code 0"
    assert gone(child_pid(tmp_path))  # what it left behind is ended after its exit


@pytest.mark.parametrize(("make", "expected"), [
    (lambda d: ([str(d / "no-such-agent")], d), "program not found"),
    (lambda d: ([str(d / "plain.txt")], d), "permission denied"),
    (lambda d: ([sys.executable, "-V"], d / "missing-dir"), "does not exist"),
    (lambda d: ([], d), "its command is empty"),
])
async def test_a_failed_spawn_is_one_readable_connect_error(tmp_path: Path, make,
                                                            expected: str) -> None:
    (tmp_path / "plain.txt").write_text("not a program\n")
    argv, cwd = make(tmp_path)
    before = live_groups()
    with pytest.raises(ConnectError) as caught:
        async with spawn_agent(argv, cwd=cwd, env=None, binding="t"):
            pytest.fail("spawned")
    message = str(caught.value)
    assert expected in message and "\n" not in message
    assert live_groups() == before


async def test_stderr_is_kept_within_its_budget_and_its_tail_explains_the_exit(
        tmp_path: Path) -> None:
    argv = write_agent(tmp_path, "stderr")
    events: list[AgentRaw] = []

    async def emit(batch) -> None:
        events.extend(batch)

    with trio.fail_after(BOUND):
        async with spawn_agent(argv, cwd=tmp_path, env=None, binding="t", grace=GRACE,
                               stderr_budget=1000) as agent:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent.pump_stderr, emit)
                await agent.pump_stdout(ignore)
            await agent.wait_exit()
    kept = "".join(e.text for e in events if e.reason == "stderr")
    (cut,) = [e for e in events if e.reason == "stderr_truncated"]
    assert len(kept) == 1000 and all(e.source == "stderr" for e in events)
    assert cut.truncated == len("x" * 100_000 + "\nFATAL: out of cheese\n") - 1000
    assert agent.describe_exit().startswith("the agent exited with code 3; stderr: ")
    assert agent.describe_exit().endswith("FATAL: out of cheese")


async def test_a_dead_agent_whose_orphan_holds_stdout_still_reaches_eof(tmp_path: Path) -> None:
    """The leader exits; the grandchild keeps the pipe: EOF comes within grace, not never."""
    argv = write_agent(tmp_path, "dies")
    with trio.fail_after(BOUND):
        async with spawn_agent(argv, cwd=tmp_path, env=None, binding="t", grace=GRACE) as agent:
            await agent.pump_stdout(ignore)
            await agent.wait_exit()
            assert agent.returncode == 3
            assert gone(child_pid(tmp_path))


async def test_writing_to_a_dead_agent_says_so_instead_of_raising(tmp_path: Path) -> None:
    with trio.fail_after(BOUND):
        async with spawn_agent([sys.executable, "-c", "pass"], cwd=tmp_path, env=None,
                               binding="t", grace=GRACE) as agent:
            await agent.proc.wait()
            results = [await agent.write(b"x" * 65536) for _ in range(4)]
            assert results[-1] is False
            await agent.close_stdin()
            assert await agent.write(b"more") is False


def test_stderr_budget_keeps_a_character_cut_between_two_reads() -> None:
    budget = StderrBudget("t", budget=100)
    snow = "☃".encode()
    first = budget.feed(b"a" + snow[:1])
    second = budget.feed(snow[1:] + b"b")
    assert "".join(e.text for e in first + second + budget.finish()) == "a☃b"
    assert budget.tail == "a☃b"


async def test_the_callers_error_comes_out_of_a_task_group_as_itself() -> None:
    with pytest.raises(KeyError):
        async with open_task_group() as tasks:
            tasks.start_soon(trio.sleep_forever)
            raise KeyError("mine")


def test_kill_live_groups_from_a_signal_handler_ends_every_agent(tmp_path: Path) -> None:
    """What the CLI does on SIGTERM/SIGHUP: no finally may run, the groups still die."""
    argv = write_agent(tmp_path / "agent", "stubborn")
    program = textwrap.dedent(f"""
        import os, signal, sys, trio
        from trio_cap.actors.bindings.process import kill_live_groups, spawn_agent

        def on_term(signum, frame):
            kill_live_groups()
            os._exit(143)

        async def main():
            signal.signal(signal.SIGTERM, on_term)
            async with spawn_agent({argv!r}, cwd=None, env=None, binding="t") as agent:
                line = await agent.proc.stdout.receive_some(100)
                print(agent.pid, flush=True)
                await trio.sleep_forever()

        trio.run(main)
    """)
    proc = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True)
    try:
        leader = int(proc.stdout.readline())
        grandchild = child_pid(tmp_path / "agent")
        assert alive(leader) and alive(grandchild)
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=BOUND) == 143
    finally:
        proc.kill()
    assert gone(leader) and gone(grandchild)


def test_kill_live_groups_is_harmless_with_nothing_alive() -> None:
    assert kill_live_groups(0) == len(live_groups())


@given(data=st.binary(max_size=600), cuts=st.lists(st.integers(0, 600), max_size=8),
       budget=st.integers(0, 400))
def test_stderr_budget_keeps_exactly_the_first_budget_bytes_however_they_are_read(
        data: bytes, cuts: list[int], budget: int) -> None:
    keeper = StderrBudget("t", budget=budget)
    events = []
    for start, end in itertools.pairwise([0, *sorted(c for c in cuts if c < len(data)),
                                          len(data)]):
        events += keeper.feed(data[start:end])
    events += keeper.finish()
    kept = "".join(e.text for e in events if e.reason == "stderr")
    assert kept == data[:budget].decode("utf-8", errors="replace")
    dropped = [e.truncated for e in events if e.reason == "stderr_truncated"]
    assert dropped == ([len(data) - budget] if len(data) > budget else [])


@pytest.mark.parametrize(("mode", "exited"), [("dies", True), ("stubborn", False)])
async def test_waiting_for_an_answer_ends_early_only_when_the_agent_exits(
        tmp_path: Path, mode: str, exited: bool) -> None:
    argv = write_agent(tmp_path, mode)
    never = trio.Event()
    with trio.fail_after(BOUND):
        async with spawn_agent(argv, cwd=tmp_path, env=None, binding="t", grace=GRACE) as agent:
            begun = trio.current_time()
            await agent.wait_for(never, 5)
            took = trio.current_time() - begun
            assert (agent.returncode is not None) == exited
    assert took < 4.5 if exited else took >= 5  # an orphan still holds the dead one's stdout
