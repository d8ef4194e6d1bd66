"""The fleet machine alone: events in, decisions out — no Trio, no sessions."""

from __future__ import annotations

from trio_cap.actors.fleet.machine import CancelTurn, Deliver, Emit, Finished, FleetMachine
from trio_cap.actors.fleet.model import Fleet, Member, Pipeline
from trio_cap.events.kinds import SessionTurnEnded, TextChunk, Usage


def _machine(routes=(), budget=None, members=("a", "b"), **kw) -> FleetMachine:
    fleet = Fleet(name="f", task="go", sessions=tuple(Member(id=m, **kw) for m in members),
                  routes=routes, budget_usd=budget)
    return FleetMachine(fleet, {m: f"f.{m}" for m in members})


def _end(machine, member, seq, text="ok", stop="end_turn"):
    out = machine.observe(f"f.{member}", seq, TextChunk(message_id="x", text=text))
    return out + machine.observe(f"f.{member}", seq + 1, SessionTurnEnded(turn=1,
                                                                          stop_reason=stop))


def _kinds(out):
    return [type(o.event).__name__ if isinstance(o, Emit) else type(o).__name__ for o in out]


def test_a_bounded_cycle_ends_after_its_rounds():
    m = _machine((Pipeline(("a", "b"), rounds=2), Pipeline(("b", "a"))),
                 members=("a", "b"))
    m.fleet = Fleet(name="f", task="go", sessions=(Member("a", start=True), Member("b")),
                    routes=m.fleet.routes)
    out = m.start()
    assert [o.member for o in out if isinstance(o, Deliver)] == ["a"]
    order, seq = [], 10
    member = "a"
    while True:
        out = _end(m, member, seq)
        seq += 10
        delivered = [o.member for o in out if isinstance(o, Deliver)]
        if any(isinstance(o, Finished) for o in out):
            assert out[-1] == Finished(True)
            break
        (member,) = delivered
        order.append(member)
    assert order == ["b", "a", "b", "a"]  # a→b twice, b→a each time b finishes


def test_a_spent_fleet_budget_refuses_the_next_turn_and_crossing_it_cancels():
    m = _machine((Pipeline(("a", "b")),), budget=1.0, members=("a", "b", "c"))
    out = m.start()
    assert sorted(o.member for o in out if isinstance(o, Deliver)) == ["a", "c"]
    out = m.observe("f.a", 5, Usage(cost_usd_estimate=1.25))
    assert CancelTurn("a") in out and CancelTurn("c") in out
    out = _end(m, "a", 6)
    assert "FleetBudgetRefused" in _kinds(out)
    assert not [o for o in out if isinstance(o, Deliver)]


def test_directives_past_the_hop_limit_and_to_strangers_are_refused():
    m = _machine(members=("a", "b"))
    m.fleet = Fleet(name="f", task="go", sessions=m.fleet.sessions, hop_limit=1)
    m.start()
    out = _end(m, "a", 10, "@cap://b hi\n@cap://zed hello\n  @cap://a me")
    refused = [(o.event.target, o.event.reason) for o in out
               if isinstance(o, Emit) and type(o.event).__name__ == "FleetMessageRefused"]
    assert refused == [("zed", "unknown_target"), ("a", "self")]
    _end(m, "b", 20, "task done")  # b's own task turn
    out = _end(m, "b", 30, "@cap://a thanks")  # the message's turn: hop 2 > 1
    assert [(o.event.target, o.event.reason, o.event.hops) for o in out
            if isinstance(o, Emit) and type(o.event).__name__ == "FleetMessageRefused"] == [
        ("a", "hop_limit", 2)]


def test_a_write_two_members_make_is_a_conflict_once_the_second_succeeds():
    from trio_cap.events.kinds import ToolCallEnd, ToolCallStart

    fleet = Fleet(name="f", task="go", sessions=(Member("a"), Member("b")))
    m = FleetMachine(fleet, {"a": "f.a", "b": "f.b"}, {"a": "/wt/a", "b": "/wt/b"})
    m.start()

    def write(member, call, path, seq, *, error=False, tool="Write"):
        out = m.observe(f"f.{member}", seq, ToolCallStart(call_id=call, name=tool,
                                                          input={"file_path": path}))
        out += m.observe(f"f.{member}", seq + 1, ToolCallEnd(call_id=call, is_error=error))
        return [(type(o.event).__name__, o.event, o.cause) for o in out if isinstance(o, Emit)]

    assert [k for k, _e, _c in write("a", "c1", "/wt/a/src/x.py", 10)] == ["FleetTouched"]
    assert write("a", "c2", "src/x.py", 20) == []  # a again: already known
    assert write("b", "c3", "/wt/b/src/x.py", 30, error=True) == []  # failed: no change
    assert write("b", "c4", "/wt/b/src/y.py", 40, tool="Read") == []  # not a write tool
    out = write("b", "c5", "./src/../src/x.py", 50)
    assert [k for k, _e, _c in out] == ["FleetTouched", "FleetConflict"]
    conflict = out[1][1]
    assert (conflict.path, conflict.members, out[1][2]) == ("src/x.py", ("a", "b"), 51)
    # outside the worktree the path stays absolute; a diff's files count as well
    assert write("a", "c6", "/etc/hosts", 60)[0][1].path == "/etc/hosts"
    out = m.diffed("b", "diff --git a/etc.txt b/etc.txt\n--- a/etc.txt\n")
    assert [(o.event.member, o.event.path, o.event.via) for o in out] == [
        ("b", "etc.txt", "diff")]
