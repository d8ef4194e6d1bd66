"""Per-tool allow and deny lists in the session's one permission policy, and the answerer the
session machine consults before an ask reaches a human: pure decisions, fed by hand."""

import pytest

from trio_cap.actors.session.machine import AUTO_ANSWER, Emit, Send, SessionMachine, State
from trio_cap.actors.session.policy import AutoAnswer, PermissionPolicy
from trio_cap.events.kinds import (
    AskAnswered,
    AskUser,
    AskUserAnswer,
    CapSessionReady,
    InputInjected,
    PermissionDecided,
    PermissionRequest,
    SessionConfig,
    SessionCreated,
    SessionInputRequired,
)


def policy(name="deny", *, allow=(), deny=(), high=False, human=False) -> PermissionPolicy:
    return PermissionPolicy(name, high, human, allow_tools=allow, deny_tools=deny)


@pytest.mark.parametrize("name", ["ask", "allow", "deny", "bypass"])
def test_a_denied_tool_is_refused_without_asking_under_every_policy(name):
    got = policy(name, deny=("Bash",), human=True).decide("low", "Bash")
    assert (got.decision, got.by) == ("deny", "policy:deny_tools")
    assert "'Bash'" in got.reason


@pytest.mark.parametrize("name", ["ask", "deny"])
def test_an_allowed_tool_is_approved_without_asking(name):
    got = policy(name, allow=("Read", "Grep"), human=True).decide("low", "Grep")
    assert (got.decision, got.by) == ("allow_once", "policy:allow_tools")


def test_globs_match_tool_names_and_deny_wins_over_allow():
    p = policy(allow=("mcp__docs__*", "*"), deny=("mcp__shell__*",))
    assert p.decide("medium", "mcp__docs__search").decision == "allow_once"
    assert p.decide("medium", "mcp__shell__exec").by == "policy:deny_tools"
    assert policy(allow=("read",)).decide("low", "Read").by == "policy:deny"  # case counts


def test_a_tool_on_no_list_gets_the_named_policy():
    p = policy("deny", allow=("Read",), deny=("Bash",))
    assert p.decide("low", "Write").by == "policy:deny"
    assert policy("ask", allow=("Read",), human=True).decide("low", "Write") is None


def test_high_risk_under_an_allow_list_still_needs_a_human_or_allow_high_risk():
    assert policy(allow=("Bash",), human=True).decide("high", "Bash") is None
    refused = policy(allow=("Bash",)).decide("high", "Bash")
    assert (refused.decision, refused.by) == ("deny", "policy:allow_tools")
    assert "--allow-high-risk" in refused.reason
    approved = policy(allow=("Bash",), high=True).decide("high", "Bash")
    assert (approved.decision, approved.by) == ("allow_once", "policy:allow_tools")


def _machine(pol: PermissionPolicy, answerer=None) -> SessionMachine:
    created = SessionCreated(session_id="s", cwd="/w", agent="a", binding="inproc")
    m = SessionMachine(created, SessionConfig(cwd="/w"), pol, answerer=answerer)
    m.create()
    m.start()
    m.on_agent([CapSessionReady()], 10)
    m.on_command(InputInjected(text="go"), 11)
    return m


def _events(outputs):
    return [e for o in outputs if isinstance(o, Emit) for e in o.events]


def test_the_session_machine_rates_then_applies_the_tool_lists():
    m = _machine(policy("allow", deny=("Write",)))
    out = m.on_agent([PermissionRequest(req_id="p1", tool="Write",
                                        intent={"path": "a.txt"})], 12)
    (decided,) = _events(out)
    assert isinstance(decided, PermissionDecided)
    assert (decided.decision, decided.by, decided.risk) == ("deny", "policy:deny_tools",
                                                           "medium")


OPTIONS = {"type": "string", "oneOf": [{"const": "a", "title": "a"},
                                       {"const": "b", "title": "b"}]}


def test_an_answer_from_the_answerer_goes_to_the_agent_with_its_meta():
    why = {"cap.provenance": [{"file": "x.md", "passage": 1, "score": 4.0}]}
    m = _machine(policy(human=True), lambda ask: AutoAnswer("b", why))
    out = m.on_agent([AskUser(ask_id="q1", prompt="which?", form=OPTIONS)], 12)
    assert _events(out) == [AskAnswered(ask_id="q1", value="b", by=AUTO_ANSWER, meta=why)]
    assert [o.frame for o in out if isinstance(o, Send)] == [
        AskUserAnswer(ask_id="q1", value="b", meta=why)]
    assert m.state is State.WORKING and not m.pending_asks


def test_an_escalated_ask_goes_on_as_before_carrying_the_reason():
    why = {"cap.auto_answer": {"escalated": True, "reason": "nothing found"}}
    human = _machine(policy(human=True), lambda ask: AutoAnswer(None, why))
    out = human.on_agent([AskUser(ask_id="q1", prompt="?")], 12)
    assert _events(out) == [SessionInputRequired(turn=1, reason="ask", ref="q1", meta=why)]
    assert human.state is State.INPUT_REQUIRED
    headless = _machine(policy(), lambda ask: AutoAnswer(None, why))
    out = headless.on_agent([AskUser(ask_id="q1", prompt="?")], 12)
    assert _events(out) == [AskAnswered(ask_id="q1", value=None, by="policy:headless",
                                        meta=why)]


def test_an_answer_that_is_not_one_of_the_options_is_never_sent():
    m = _machine(policy(), lambda ask: AutoAnswer("c", {}))
    out = m.on_agent([AskUser(ask_id="q1", prompt="which?", form=OPTIONS)], 12)
    assert _events(out) == [AskAnswered(ask_id="q1", value=None, by="policy:headless")]
