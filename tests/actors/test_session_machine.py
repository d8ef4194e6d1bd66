"""The sans-io session machine, fed by hand: no Trio, no log, no agent."""

from trio_cap.actors.session.machine import (
    ACCEPTS,
    CancelAgent,
    Close,
    Emit,
    Send,
    SessionMachine,
    State,
)
from trio_cap.actors.session.policy import PermissionPolicy
from trio_cap.events.kinds import (
    AskAnswered,
    AskUser,
    AskUserAnswer,
    CancelRequested,
    CapError,
    CapSessionReady,
    ContentBlock,
    InputInjected,
    PermissionDecided,
    PermissionRequest,
    PermissionResponse,
    SessionCancelled,
    SessionCompleted,
    SessionConfig,
    SessionCreated,
    SessionFailed,
    SessionIdle,
    SessionInputRequired,
    SessionReady,
    SessionTurnEnded,
    SessionWarning,
    SessionWorking,
    TextChunk,
    Usage,
    UserInputInject,
)


def machine(policy="deny", human=False, budget=None, high=False, queued=False) -> SessionMachine:
    created = SessionCreated(session_id="s", cwd="/w", agent="a", binding="inproc")
    config = SessionConfig(cwd="/w", budget_usd=budget)
    return SessionMachine(created, config, PermissionPolicy(policy, high, human),
                          queued_input=queued)


def events(outputs):
    return [e for o in outputs if isinstance(o, Emit) for e in o.events]


def sent(outputs):
    return [o.frame for o in outputs if isinstance(o, Send)]


def ready(m: SessionMachine) -> None:
    m.create()
    m.start()
    m.on_agent([CapSessionReady()], 10)


def test_config_is_the_first_frame_and_input_waits_for_ready():
    m = machine()
    out = m.create() + m.start()
    assert sent(out) == [m.config]
    held = m.on_command(InputInjected(text="hi"), 3)
    assert held == [] and m.state is State.STARTING
    out = m.on_agent([CapSessionReady(session_id="agent-1")], 4)
    assert events(out) == [SessionReady(agent_session_id="agent-1"), SessionWorking(turn=1)]
    assert sent(out) == [UserInputInject(content=(ContentBlock(text="hi"),))]
    assert [o.cause for o in out if isinstance(o, Send)] == [3]
    assert m.state is State.WORKING


def test_input_during_a_turn_is_held_when_the_agent_cannot_queue_it():
    m = machine()
    ready(m)
    m.on_command(InputInjected(text="one"), 11)
    assert m.on_command(InputInjected(text="two"), 12) == []
    out = m.on_turn_ended("end_turn")
    assert events(out) == [SessionTurnEnded(turn=1, stop_reason="end_turn"),
                           SessionIdle(turn=1, stop_reason="end_turn"), SessionWorking(turn=2)]
    assert sent(out)[0].text == "two"


def test_input_mid_turn_is_sent_at_once_when_the_agent_queues_it():
    m = machine(queued=True)
    ready(m)
    m.on_command(InputInjected(text="one"), 11)
    out = m.on_command(InputInjected(text="two"), 12)
    assert events(out) == [SessionWorking(turn=2)]
    assert [(f.text, o.cause) for o in out if isinstance(o, Send) for f in [o.frame]] == [
        ("two", 12)]
    assert m.turn_cause == 11  # what the agent does now still belongs to turn 1
    first = m.on_turn_ended("end_turn")
    assert events(first) == [SessionTurnEnded(turn=1, stop_reason="end_turn")]
    assert [o.cause for o in first] == [11]
    assert m.state is State.WORKING and m.turn_cause == 12
    second = m.on_turn_ended("end_turn")
    assert events(second) == [SessionTurnEnded(turn=2, stop_reason="end_turn"),
                              SessionIdle(turn=2, stop_reason="end_turn")]
    assert m.state is State.READY
    assert m.on_turn_ended("end_turn") == []  # a spurious extra end changes nothing


def test_state_table_refuses_commands_the_state_does_not_accept():
    m = machine()
    ready(m)
    assert PermissionDecided not in ACCEPTS[State.READY]
    refusal = m.refusal(PermissionDecided(req_id="nope", decision="deny", by="human"))
    assert refusal.code == "cap_unknown_permission"
    m.close()
    late = m.refusal(InputInjected(text="late"))
    assert late.code == "invalid_state" and "completed" in late.message


def test_deny_policy_refuses_and_names_the_flag():
    m = machine("deny")
    ready(m)
    m.on_command(InputInjected(text="go"), 11)
    req = PermissionRequest(req_id="p1", tool="Write", intent={"path": "a"}, scope="write")
    out = m.on_agent([req], 20)
    decided = events(out)[0]
    assert decided.decision == "deny" and "--permissions" in decided.reason
    # the agent is told why, so the model can adapt
    assert sent(out) == [PermissionResponse(req_id="p1", decision="deny",
                                            meta={"cap.message": decided.reason})]
    assert m.state is State.WORKING


def test_allow_policy_never_auto_approves_high_risk_without_the_flag():
    m = machine("allow")
    ready(m)
    m.on_command(InputInjected(text="go"), 11)
    low = PermissionRequest(req_id="p1", tool="Bash", intent={"command": "ls"}, scope="execute",
                            risk_level="low")
    high = PermissionRequest(req_id="p2", tool="Bash", intent={"command": "rm -rf build"},
                             scope="execute", risk_level="low")
    out = m.on_agent([low, high], 20)
    decisions = [e for e in events(out) if isinstance(e, PermissionDecided)]
    assert [d.decision for d in decisions] == ["allow_once", "deny"]
    assert "--allow-high-risk" in decisions[1].reason
    assert "agent said low; trio-cap rates it high" in decisions[1].reason
    flagged = machine("allow", high=True)
    ready(flagged)
    flagged.on_command(InputInjected(text="go"), 11)
    assert events(flagged.on_agent([high], 20))[0].decision == "allow_once"


def test_high_risk_goes_to_a_human_when_one_is_there():
    m = machine("allow", human=True)
    ready(m)
    m.on_command(InputInjected(text="go"), 11)
    high = PermissionRequest(req_id="p2", tool="Bash", intent={"command": "sudo ls"})
    out = m.on_agent([high], 20)
    assert events(out) == [SessionInputRequired(turn=1, reason="permission", ref="p2",
                                                risk="high")]
    assert m.state is State.INPUT_REQUIRED
    cmd = PermissionDecided(req_id="p2", decision="allow_always", by="human")
    assert m.refusal(cmd) is None
    out = m.on_command(cmd, 21)
    assert sent(out) == [PermissionResponse(req_id="p2", decision="allow_always")]
    assert events(out) == [SessionWorking(turn=1, resumed=True)]


def test_asks_are_declined_without_a_human_and_validated_with_one():
    form = {"type": "string", "oneOf": [{"const": "pg"}, {"const": "sqlite"}]}
    headless = machine()
    ready(headless)
    headless.on_command(InputInjected(text="go"), 11)
    out = headless.on_agent([AskUser(ask_id="a1", prompt="DB?", form=form)], 20)
    assert events(out) == [AskAnswered(ask_id="a1", value=None, by="policy:headless")]
    assert sent(out) == [AskUserAnswer(ask_id="a1", value=None)]

    m = machine("ask", human=True)
    ready(m)
    m.on_command(InputInjected(text="go"), 11)
    m.on_agent([AskUser(ask_id="a1", prompt="DB?", form=form)], 20)
    assert m.refusal(AskAnswered(ask_id="a1", value="mysql")).code == "cap_invalid_answer"
    assert m.refusal(AskAnswered(ask_id="zz", value="pg")).code == "unknown_ask"
    out = m.on_command(AskAnswered(ask_id="a1", value="pg"), 21)
    assert sent(out) == [AskUserAnswer(ask_id="a1", value="pg")]


def test_budget_gate_refuses_turns_and_cancels_an_overspending_one():
    m = machine(budget=0.10)
    ready(m)
    m.on_command(InputInjected(text="one"), 11)
    out = m.on_agent([Usage(cost_usd_estimate=0.25)], 20)
    assert events(out)[0].code == "cap_budget_exceeded"
    assert [o for o in out if isinstance(o, CancelAgent)] == [
        CancelAgent("current_turn", "budget exceeded", 20)
    ]
    m.on_turn_ended("cancelled")
    out = m.on_command(InputInjected(text="two"), 30)
    refused = events(out)
    assert len(refused) == 1 and isinstance(refused[0], CapError)
    assert refused[0].code == "cap_budget_exceeded" and m.turn == 1


def test_close_outcomes():
    m = machine()
    ready(m)
    out = m.close()
    assert events(out) == [SessionCompleted(turns=0)] and Close() in out

    failing = machine()
    ready(failing)
    failing.on_command(InputInjected(text="x"), 11)
    failing.on_agent([TextChunk(message_id="m", text="t"), CapError(code="rate_limit",
                                                                     message="slow")], 12)
    failing.on_turn_ended("error")
    assert events(failing.close()) == [SessionFailed(code="rate_limit", message="slow")]

    busy = machine()
    ready(busy)
    busy.on_command(InputInjected(text="x"), 11)
    out = busy.close()
    assert isinstance(out[0], CancelAgent) and out[0].scope == "session"
    assert isinstance(events(out)[0], SessionCancelled)


def test_cancel_current_turn_only_when_a_turn_runs_and_session_cancel_is_terminal():
    m = machine()
    ready(m)
    assert m.on_command(CancelRequested(), 11) == []
    m.on_command(InputInjected(text="x"), 12)
    assert m.on_command(CancelRequested(), 13) == [CancelAgent("current_turn", "user", 13)]
    out = m.on_command(CancelRequested(scope="session", reason="bored"), 14)
    assert events(out) == [SessionCancelled(reason="bored")] and m.terminal


def test_agent_death_fails_the_session_once():
    m = machine()
    ready(m)
    out = m.on_agent_gone("exit 137")
    assert events(out) == [SessionFailed(code="agent_died", message="exit 137")]
    assert m.on_agent_gone("again") == [] and m.shutdown() == []


def test_bypass_is_warned_and_tells_the_agent_not_to_prompt():
    m = machine("bypass")
    out = m.create() + m.start()
    assert any(isinstance(e, SessionWarning) for e in events(out))
    assert m.policy.permission_mode == "none"
