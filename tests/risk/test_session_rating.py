"""The session machine decides risk in one place: max(agent's claim, trio-cap's rating).

Machine-level: no filesystem, no event loop; what the machine sees is what a replay sees.
"""

from trio_cap.actors.bindings.base import AGENT_RISK
from trio_cap.actors.session.machine import Emit, Send, SessionMachine
from trio_cap.actors.session.policy import PermissionPolicy
from trio_cap.actors.session.raw_budget import WARNING_CODE
from trio_cap.events.kinds import (
    AgentRaw,
    CapSessionReady,
    InputInjected,
    PermissionDecided,
    PermissionPathsResolved,
    PermissionRequest,
    PermissionResponse,
    SessionConfig,
    SessionCreated,
    SessionInputRequired,
    SessionWarning,
    TextChunk,
)

WS = "/work/ws"


def machine(policy: str = "allow", *, human: bool = False, raw_budget: int = 1 << 20):
    created = SessionCreated(session_id="s1", cwd=WS, agent="cap-agent", binding="inproc")
    m = SessionMachine(created, SessionConfig(cwd=WS), PermissionPolicy(policy, human=human),
                       raw_budget=raw_budget)
    m.create()
    m.start("inproc")
    m.on_agent([CapSessionReady(session_id="a")], 3)
    m.on_command(InputInjected(text="go"), 4)
    return m


def decided(outputs) -> PermissionDecided:
    (event,) = [e for o in outputs if isinstance(o, Emit) for e in o.events
                if isinstance(e, PermissionDecided)]
    return event


def request(command: str, risk: str = "low", meta=None, req_id: str = "p1"):
    return PermissionRequest(req_id=req_id, tool="Bash", intent={"command": command},
                             scope="execute", risk_level=risk, meta=meta)  # type: ignore[arg-type]


def test_an_agent_claiming_low_cannot_talk_a_delete_down():
    out = machine().on_agent([request("rm --recursive --force ../victim", "low")], 10)
    event = decided(out)
    assert event.decision == "deny" and event.risk == "high" and event.agent_risk == "low"
    assert "agent said low; trio-cap rates it high" in event.reason
    assert "rm --recursive" in event.reason
    (response,) = [o.frame for o in out if isinstance(o, Send)]
    assert isinstance(response, PermissionResponse) and response.decision == "deny"


def test_the_agent_can_raise_the_rating_never_lower_it():
    claimed_high = request("ls", "medium", meta={AGENT_RISK: "high"})
    event = decided(machine().on_agent([claimed_high], 10))
    assert (event.decision, event.risk, event.agent_risk) == ("deny", "high", "high")
    plain = decided(machine().on_agent([request("ls", "medium")], 10))
    assert (plain.decision, plain.risk, plain.agent_risk) == ("allow_once", "medium", "medium")
    assert "agent said" not in plain.reason


def test_a_bogus_agent_risk_meta_falls_back_to_risk_level():
    event = decided(machine().on_agent([request("ls", "low", meta={AGENT_RISK: "none"})], 10))
    assert event.agent_risk == "low" and event.risk == "low"


def test_logged_symlink_facts_make_a_lexically_inside_write_high():
    m = machine()
    facts = PermissionPathsResolved(req_id="p1", checked=1, outside=(f"{WS}/link/f",))
    event = decided(m.on_agent([facts, request("echo x > link/f", "medium")], 10))
    assert event.decision == "deny" and event.risk == "high"
    assert "symlink" in event.reason
    # facts are per request: the next request with the same text has none and is medium
    again = decided(m.on_agent([request("echo x > link/f", "medium", req_id="p2")], 20))
    assert again.decision == "allow_once"


def test_a_human_sees_trio_caps_rating():
    out = machine("allow", human=True).on_agent([request("rm -rf build", "low")], 10)
    (waiting,) = [e for o in out if isinstance(o, Emit) for e in o.events]
    assert waiting == SessionInputRequired(turn=1, reason="permission", ref="p1", risk="high")


def raw(text: str) -> AgentRaw:
    return AgentRaw(binding="x", reason="unknown", text=text)


def test_raw_output_past_the_budget_is_counted_with_one_warning():
    m = machine(raw_budget=100)
    kept = m.admit([raw("a" * 60), TextChunk(message_id="m", text="hi"), raw("b" * 60)])
    assert [type(e) for e in kept] == [AgentRaw, TextChunk, SessionWarning]
    assert kept[2].code == WARNING_CODE and "100" in kept[2].message
    # later raw output is dropped silently (no second warning), typed events pass
    later = m.admit([raw("c"), raw("d" * 1000), TextChunk(message_id="m", text="still")])
    assert [type(e) for e in later] == [TextChunk]
    assert m.raw.dropped_events == 3 and m.raw.dropped_chars == 61 + 2 + 1001
    closing = [e for o in m.close() if isinstance(o, Emit) for e in o.events]
    assert isinstance(closing[0], SessionWarning) and closing[0].code == WARNING_CODE
    assert "3 raw output events (1064 characters)" in closing[0].message


def test_no_final_warning_when_nothing_was_dropped():
    m = machine()
    assert m.admit([raw("x")]) == [raw("x")]
    closing = [e for o in m.close() if isinstance(o, Emit) for e in o.events]
    assert not any(isinstance(e, SessionWarning) for e in closing)
