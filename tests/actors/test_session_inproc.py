"""Whole sessions through the orchestrator, the session actor and the inproc brain."""

from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from tests.actors.helpers import kinds, of_kind
from trio_cap.actors.bindings.inproc import InprocConnector
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.actors.session.actor import CommandRefused, SessionEnded
from trio_cap.events.clock import StepClock
from trio_cap.events.kinds import CapSessionReady


@asynccontextmanager
async def orchestrator(**kw):
    async with open_orchestrator(clock=StepClock(), ids=SequentialIds(), **kw) as orch:
        yield orch


class GatedConnector(InprocConnector):
    """The inproc brain, but its ready signal waits until the test opens the gate."""

    def __init__(self) -> None:
        self.gate = trio.Event()

    @asynccontextmanager
    async def open(self, spec, deliver):
        send, receive = trio.open_memory_channel(64)

        async def relay():
            async with receive:
                async for message in receive:
                    events = getattr(message, "events", ())
                    if any(isinstance(e, CapSessionReady) for e in events):
                        await self.gate.wait()
                    await deliver.send(message)

        async with trio.open_nursery() as nursery, deliver:
            nursery.start_soon(relay)
            async with super().open(spec, send) as conn:
                yield conn
            nursery.cancel_scope.cancel()


async def test_input_before_ready_is_held_and_sent_only_after_ready(tmp_path):
    async with orchestrator() as orch:
        gated = GatedConnector()
        orch.connectors["inproc"] = gated
        session = await orch.start_session(cwd=tmp_path)
        accepted = await session.inject("hello")
        await trio.testing.wait_all_tasks_blocked()
        assert "input.injected" in kinds(orch.log)
        assert "cap.user_input.inject" not in kinds(orch.log)
        assert session.view.status == "starting"
        gated.gate.set()
        await orch.wait_until(lambda s: s.sessions.sessions[session.id].ended_turn == 1)
        order = kinds(orch.log, session.id)
        assert order.index("session.ready") < order.index("cap.user_input.inject")
        assert order[:4] == ["session.created", "session.starting", "cap.session.config",
                             "input.injected"]
        assert accepted.turn == 1
        await session.close()


async def test_a_turn_streams_text_and_reports_usage(tmp_path):
    async with orchestrator() as orch:
        session = await orch.start_session(cwd=tmp_path)
        result = await session.run_turn("hello there")
        assert result.stop_reason == "end_turn"
        assert 'You said: "hello there"' in result.text
        assert orch.state.transcript.text_of(session.id) == result.text
        usage = orch.state.usage.sessions[session.id]
        assert usage.input_tokens == 2 and usage.output_tokens > 5
        view = await session.close()
        assert view.status == "completed"
        assert of_kind(orch.log, "session.completed")[0].event.turns == 1


async def test_human_allows_one_write_and_denies_another(tmp_path):
    async with orchestrator() as orch:
        session = await orch.start_session(cwd=tmp_path, permissions="ask")
        await session.inject("write yes.txt: allowed\nwrite no.txt: refused")
        await session.wait_status("input_required")
        (first,) = orch.state.pending.permissions[session.id].values()
        assert (first.tool, first.scope, first.intent["path"]) == ("Write", "write", "yes.txt")
        await session.decide(first.req_id, "allow_once")
        await orch.wait_until(
            lambda s: len(s.pending.permissions.get(session.id, {})) == 1
            and first.req_id not in s.pending.permissions[session.id]
        )
        (second,) = orch.state.pending.permissions[session.id].values()
        await session.decide(second.req_id, "deny", reason="not today")
        await session.wait_status("ready")
        assert (tmp_path / "yes.txt").read_text() == "allowed\n"
        assert not (tmp_path / "no.txt").exists()
        decided = [e.event for e in of_kind(orch.log, "permission.decided")]
        assert [(d.decision, d.by) for d in decided] == [("allow_once", "human"), ("deny", "human")]
        assert "no.txt was denied" in orch.state.transcript.text_of(session.id)
        with pytest.raises(CommandRefused, match="cap_unknown_permission"):
            await session.decide("perm_99", "allow_once")
        await session.close()


async def test_without_a_human_the_default_policy_denies_and_names_the_flag(tmp_path):
    async with orchestrator() as orch:
        session = await orch.start_session(cwd=tmp_path)  # permissions default: deny
        result = await session.run_turn("run: touch made.txt")
        assert not (tmp_path / "made.txt").exists()
        (decision,) = of_kind(orch.log, "permission.decided")
        assert decision.event.by == "policy:deny" and "--permissions" in decision.event.reason
        assert "was denied" in result.text
        await session.close()


async def test_allow_policy_runs_commands_but_refuses_high_risk(tmp_path):
    (tmp_path / "keep").mkdir()
    async with orchestrator() as orch:
        session = await orch.start_session(cwd=tmp_path, permissions="allow")
        result = await session.run_turn("run: echo from-the-agent")
        assert "`echo from-the-agent` exited 0:\nfrom-the-agent" in result.text
        result = await session.run_turn("run: rm -rf keep")
        assert (tmp_path / "keep").is_dir()
        assert "high-risk" in of_kind(orch.log, "permission.decided")[-1].event.reason
        await session.close()
    async with orchestrator() as orch:
        session = await orch.start_session(cwd=tmp_path, permissions="allow",
                                           allow_high_risk=True)
        await session.run_turn("run: rm -rf keep")
        assert not (tmp_path / "keep").exists()
        await session.close()


async def test_bypass_warns_and_the_agent_asks_nothing(tmp_path):
    async with orchestrator() as orch:
        session = await orch.start_session(cwd=tmp_path, permissions="bypass")
        await session.run_turn("write free.txt: no questions")
        assert (tmp_path / "free.txt").exists()
        assert of_kind(orch.log, "session.warning")[0].event.code == "permissions_bypassed"
        assert of_kind(orch.log, "cap.permission.request") == []
        await session.close()


async def test_an_ask_answered_by_a_human_and_a_bad_answer_refused(tmp_path):
    async with orchestrator() as orch:
        session = await orch.start_session(cwd=tmp_path, human=True)
        await session.inject("ask: Which DB? [pg|sqlite]")
        await session.wait_status("input_required")
        (ask,) = orch.state.pending.asks[session.id].values()
        with pytest.raises(CommandRefused, match="cap_invalid_answer"):
            await session.answer(ask.ask_id, "mysql")
        await session.answer(ask.ask_id, "sqlite")
        await session.wait_status("ready")
        assert "You answered sqlite." in orch.state.transcript.text_of(session.id)
        assert orch.state.pending.count() == 0
        await session.close()


async def test_cancel_interrupts_a_long_turn_and_the_session_goes_on(tmp_path, autojump_clock):
    async with orchestrator() as orch:
        session = await orch.start_session(cwd=tmp_path)
        await session.inject("wait 3600")
        await session.wait_status("working")
        await session.cancel()
        await session.wait_status("ready")
        assert orch.state.sessions.sessions[session.id].last_stop_reason == "cancelled"
        assert trio.current_time() < 3600
        result = await session.run_turn("still there?")
        assert result.stop_reason == "end_turn"
        await session.cancel("session", reason="done here")
        view = await session.wait_terminal()
        assert view.status == "cancelled"
        with pytest.raises(SessionEnded):
            await session.inject("too late")


async def test_a_failing_turn_fails_the_session_on_close(tmp_path):
    async with orchestrator() as orch:
        session = await orch.start_session(cwd=tmp_path)
        result = await session.run_turn("fail: rate_limit")
        assert result.stop_reason == "error"
        view = await session.close()
        assert view.status == "failed" and view.last_error.startswith("rate_limit")


async def test_a_crashing_brain_is_a_dead_agent_not_a_crashed_orchestrator(tmp_path, monkeypatch):
    from trio_cap.actors.agent import brain

    def explode(self, prompt):
        raise RuntimeError("brain on fire")

    monkeypatch.setattr(brain.ScriptedBrain, "steps_for", explode)
    async with orchestrator() as orch:
        session = await orch.start_session(cwd=tmp_path)
        await session.inject("anything")
        view = await session.wait_terminal()
        assert view.status == "failed"
        (failed,) = of_kind(orch.log, "session.failed")
        assert failed.event.code == "agent_died" and "brain on fire" in failed.event.message


async def test_a_script_drives_turns_rules_usage_and_the_budget(tmp_path):
    script = tmp_path / "s.toml"
    script.write_text(
        """
model = "scripted-model"
[[turn]]
steps = [
  { think = "first I think" },
  { plan = ["look", { content = "write", status = "in_progress", priority = "high" }] },
  { edit = "a.txt", old = "old", new = "new" },
  { usage = { input_tokens = 100, output_tokens = 50, cost_usd = 0.75 } },
  { say = "edited" },
]
[[rule]]
match = "^again"
steps = [ { error = "tool_timeout", message = "slow tool", retryable = true }, { say = "ok" } ]
"""
    )
    (tmp_path / "a.txt").write_text("old text")
    async with orchestrator() as orch:
        session = await orch.start_session(cwd=tmp_path, script=script, permissions="allow",
                                           budget_usd=0.5)
        result = await session.run_turn("go")
        assert (tmp_path / "a.txt").read_text() == "new text"
        assert "edited" in result.text
        plan = orch.state.plan.plans[session.id]
        assert [(p.content, p.status, p.priority) for p in plan] == [
            ("look", "pending", None), ("write", "in_progress", "high")]
        usage = orch.state.usage.sessions[session.id]
        assert usage.cost_usd == pytest.approx(0.75) and usage.over_budget
        assert of_kind(orch.log, "cap.usage")[0].event.model_id == "scripted-model"
        # over budget: the next turn is refused before anything reaches the agent
        result = await session.run_turn("again")
        assert result.turn is None
        assert of_kind(orch.log, "cap.error")[-1].event.code == "cap_budget_exceeded"
        assert len(of_kind(orch.log, "cap.user_input.inject")) == 1
        await session.close()


async def test_input_mid_turn_reaches_an_agent_that_queues_it_at_once(tmp_path, autojump_clock):
    async with orchestrator() as orch:
        session = await orch.start_session(cwd=tmp_path)  # cap-agent: queued_input = true
        await session.inject("wait 100")
        await session.wait_status("working")
        second = await session.run_turn("and then this")
        assert second.turn == 2 and second.stop_reason == "end_turn"
        assert 'You said: "and then this"' in second.text
        await session.close()
    kinds = [env.kind for env in orch.log.read(1, session.id)]
    injects = [i for i, k in enumerate(kinds) if k == "cap.user_input.inject"]
    assert injects[1] < kinds.index("session.turn_ended")  # went out while turn 1 ran
    assert kinds.count("session.turn_ended") == 2 and kinds.count("session.idle") == 1


async def test_input_held_before_ready_and_refused_there_by_the_budget_ends_its_wait(tmp_path):
    """The budget gate refuses input queued before the agent was ready when it gets
    ready: run_turn sees the refusal (an event naming its input) and returns, reading the
    log only through read_async (a synchronous read would hold the event loop)."""
    async with orchestrator() as orch:
        session = await orch.start_session(cwd=tmp_path, permissions="allow", budget_usd=0.0)

        def refuse(*args, **kw):
            raise AssertionError("a synchronous read of the log inside the event loop")

        orch.log.read = refuse  # type: ignore[method-assign]
        with trio.fail_after(10):
            result = await session.run_turn("go")
        del orch.log.read
        assert result.turn == 1 and result.stop_reason is None  # given a turn, never run
        [refusal] = of_kind(orch.log, "cap.error")
        assert refusal.event.code == "cap_budget_exceeded"
        assert refusal.event.details == {"input_seq": result.input_seq}
        assert orch.state.sessions.sessions[session.id].ended_turn == 0
        await session.close()
