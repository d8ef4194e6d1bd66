"""Real sessions under ``--permissions allow``: high-risk commands are refused and do not run.

The agent is trio-cap's own (inproc brain, real tools: ``run:`` really runs ``/bin/sh``),
so a wrong rating would really delete the directory outside the workspace.
"""

from contextlib import asynccontextmanager

import trio

from tests.actors.helpers import of_kind
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.events.clock import StepClock

SECONDS = 30


@asynccontextmanager
async def orchestrator():
    async with open_orchestrator(clock=StepClock(), ids=SequentialIds()) as orch:
        yield orch


def layout(tmp_path):
    ws = tmp_path / "ws"
    victim = tmp_path / "victim"
    ws.mkdir()
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    return ws, victim


async def test_spellings_of_a_delete_outside_are_refused_and_nothing_is_deleted(tmp_path):
    ws, victim = layout(tmp_path)
    commands = [
        "rm --recursive --force ../victim",
        "find ../victim -delete",
        "python3 -c 'import shutil; shutil.rmtree(\"../victim\")'",
        "'rm' -rf ../victim",
        r"r\m -rf ../victim",
        "X=-rf; rm $X ../victim",
        "cd .. && rm -r victim",
        "echo x > ../victim/precious.txt",
        f"echo x > {victim}/precious.txt",
    ]
    with trio.fail_after(SECONDS):
        async with orchestrator() as orch:
            session = await orch.start_session(cwd=ws, permissions="allow")
            for command in commands:
                await session.run_turn(f"run: {command}")
            await session.close()
    decisions = [env.event for env in of_kind(orch.log, "permission.decided")]
    assert len(decisions) == len(commands)
    assert all(d.decision == "deny" and d.risk == "high" for d in decisions), decisions
    assert (victim / "precious.txt").read_text() == "keep me"


async def test_a_contained_command_still_runs_under_allow(tmp_path):
    ws, _ = layout(tmp_path)
    with trio.fail_after(SECONDS):
        async with orchestrator() as orch:
            session = await orch.start_session(cwd=ws, permissions="allow")
            await session.run_turn("run: mkdir -p build && echo hi > build/notes.txt")
            await session.close()
    (decision,) = [env.event for env in of_kind(orch.log, "permission.decided")]
    assert decision.decision == "allow_once" and decision.risk == "medium"
    assert (ws / "build" / "notes.txt").read_text() == "hi\n"


async def test_a_write_through_a_symlink_out_of_the_workspace_is_refused(tmp_path):
    ws, victim = layout(tmp_path)
    (ws / "link").symlink_to(victim)
    with trio.fail_after(SECONDS):
        async with orchestrator() as orch:
            session = await orch.start_session(cwd=ws, permissions="allow")
            await session.run_turn("run: echo owned > link/precious.txt")
            await session.run_turn("run: echo fine > inside.txt")
            await session.close()
    resolved = [env.event for env in of_kind(orch.log, "permission.paths_resolved")]
    assert resolved[0].outside == (f"{ws}/link/precious.txt",)
    assert resolved[1].outside == () and resolved[1].checked == 1
    first, second = [env.event for env in of_kind(orch.log, "permission.decided")]
    # the agent itself rated the first lexically (medium); the session saw the symlink
    assert (first.decision, first.risk, first.agent_risk) == ("deny", "high", "medium")
    assert "agent said medium; trio-cap rates it high" in first.reason
    assert second.decision == "allow_once"
    assert (victim / "precious.txt").read_text() == "keep me"
    assert (ws / "inside.txt").read_text() == "fine\n"
    # the facts are logged just before the request they are about
    envs = list(orch.log.read(1))
    at = next(i for i, e in enumerate(envs) if e.kind == "permission.paths_resolved")
    assert envs[at + 1].kind == "cap.permission.request"


async def test_an_agent_claiming_low_is_overruled(tmp_path):
    ws, _ = layout(tmp_path)
    script = tmp_path / "s.toml"
    script.write_text(
        """
[[turn]]
steps = [
  { tool = "Bash", input = { command = "rm -rf ../victim" }, scope = "execute", risk = "low" },
  { say = "done" },
]
"""
    )
    with trio.fail_after(SECONDS):
        async with orchestrator() as orch:
            session = await orch.start_session(cwd=ws, script=script, permissions="allow")
            await session.run_turn("go")
            await session.close()
    (decision,) = [env.event for env in of_kind(orch.log, "permission.decided")]
    assert (decision.decision, decision.risk, decision.agent_risk) == ("deny", "high", "low")
    assert "agent said low; trio-cap rates it high" in decision.reason


async def test_a_human_is_shown_trio_caps_rating_not_the_agents(tmp_path):
    ws, victim = layout(tmp_path)
    script = tmp_path / "s.toml"
    script.write_text(
        """
[[turn]]
steps = [
  { tool = "Bash", input = { command = "rm -rf ../victim" }, scope = "execute", risk = "low" },
]
"""
    )
    with trio.fail_after(SECONDS):
        async with orchestrator() as orch:
            session = await orch.start_session(cwd=ws, script=script, permissions="allow",
                                               human=True)
            await session.inject("go")
            await session.wait_status("input_required")
            (pending,) = orch.state.pending.permissions[session.id].values()
            assert pending.risk_level == "high"  # the agent claimed low
            (waiting,) = [env.event for env in of_kind(orch.log, "session.input_required")]
            assert waiting.risk == "high"
            await session.decide(pending.req_id, "deny")
            await session.wait_status("ready")
            await session.close()
    (decision,) = [env.event for env in of_kind(orch.log, "permission.decided")]
    assert decision.by == "human" and decision.decision == "deny"
    assert victim.exists()
