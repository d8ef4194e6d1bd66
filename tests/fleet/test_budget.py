"""Budgets per session and per fleet, from cap.usage: refused up front, cancelled mid-turn."""

from __future__ import annotations

from tests.fleet.helpers import events, run_file

SESSION = '[[session]]\nid = "{id}"\nbinding = "inproc"\nscript = "{id}.toml"\n{extra}\n'


def _fleet(tmp_path, head: str, sessions: dict[str, str], routes: str, extra=None):
    extra = extra or {}
    body = "".join(SESSION.format(id=sid, extra=extra.get(sid, "")) for sid in sessions)
    for sid, script in sessions.items():
        (tmp_path / f"{sid}.toml").write_text(script)
    path = tmp_path / "fleet.toml"
    path.write_text(f'name = "b"\ntask = "go"\nworktrees = "dirs"\n{head}\n{body}{routes}')
    return path


def _spend(cost: float, say: str = "done") -> str:
    return (f'[[turn]]\nsteps = [ {{ usage = {{ cost_usd = {cost} }} }}, '
            f'{{ say = "{say}" }} ]\n')


async def test_a_turn_whose_fleet_budget_is_spent_is_refused_before_it_starts(tmp_path):
    path = _fleet(tmp_path, "budget_usd = 1.0", {"a": _spend(1.0), "b": _spend(0.5)},
                  '[[route]]\npipeline = ["a", "b"]\n')
    outcome, log, live = await run_file(path)
    assert not outcome.completed
    (refused,) = events(log, "fleet.budget_refused")
    assert (refused.event.member, refused.event.scope, refused.event.code) == ("b", "fleet",
                                                                               -32004)
    assert refused.event.spent_usd == 1.0 and refused.event.budget_usd == 1.0
    assert events(log, "input.injected", "b.b") == []  # b's turn never started
    assert sum(e.event.cost_usd_estimate for e in events(log, "cap.usage")) == 1.0
    assert live.fleets["b"].status == "failed" and "budget" in live.fleets["b"].reason
    assert [e.kind for e in log.read(1, "fleet:b")][-1] == "fleet.failed"


async def test_a_sessions_own_budget_refuses_its_next_turn(tmp_path):
    lead = _spend(0.6, "split") + _spend(0.1, "merged")
    path = _fleet(tmp_path, "budget_usd = 5.0",
                  {"lead": lead, "w1": _spend(0.1), "w2": _spend(0.1)},
                  '[[route]]\nfan_out = { from = "lead", to = ["w1", "w2"] }\nrounds = 1\n'
                  '[[route]]\njoin = { from = ["w1", "w2"], to = "lead" }\n',
                  extra={"lead": "budget_usd = 0.5"})
    outcome, log, _ = await run_file(path)
    assert not outcome.completed
    (refused,) = events(log, "fleet.budget_refused")
    assert (refused.event.member, refused.event.scope) == ("lead", "session")
    assert len(events(log, "input.injected", "b.lead")) == 1  # only the first turn ran


async def test_usage_crossing_the_fleet_budget_mid_turn_cancels_the_turns_in_flight(tmp_path):
    slow = '[[turn]]\nsteps = [ { say = "working" }, { wait = 3600 }, { say = "late" } ]\n'
    path = _fleet(tmp_path, "budget_usd = 1.0",
                  {"lead": _spend(0.0, "split"), "spender": _spend(1.5), "slow": slow},
                  '[[route]]\nfan_out = { from = "lead", to = ["spender", "slow"] }\n'
                  'rounds = 1\n[[route]]\njoin = { from = ["spender", "slow"], to = "lead" }\n')
    outcome, log, _ = await run_file(path)
    assert not outcome.completed
    (cancel,) = events(log, "fleet.cancel")
    # every turn still in flight: the slow one, and the spender's own (its usage comes
    # just before its turn end)
    assert set(cancel.event.members) == {"spender", "slow"} and cancel.event.reason == "budget"
    (slow_end,) = events(log, "session.turn_ended", "b.slow")
    assert slow_end.event.stop_reason == "cancelled"
    assert "late" not in "".join(e.event.text for e in events(log, "cap.text_chunk", "b.slow"))
    # nothing is spent after the cancel, and the join's turn for the lead never starts
    assert all(e.event.cost_usd_estimate == 0 for e in events(log, "cap.usage")
               if e.seq > cancel.seq)
    assert len(events(log, "input.injected", "b.lead")) == 1
    assert events(log, "fleet.budget_refused") == [] or all(
        e.event.scope == "fleet" for e in events(log, "fleet.budget_refused"))
