"""A fleet log replayed rebuilds the same fleet projections the live run had."""

from __future__ import annotations

import msgspec

from tests.fleet.helpers import copy_examples, run_file
from trio_cap.events.replay import replay


async def test_replaying_a_fleet_log_rebuilds_plan_budget_and_audit(tmp_path):
    where = copy_examples(tmp_path)
    for name in ("by_subtask.toml", "messages.toml", "race.toml"):
        outcome, log, live = await run_file(where / name)
        assert outcome.completed, outcome.reason
        rebuilt = replay(log).fleets
        assert msgspec.to_builtins(rebuilt) == msgspec.to_builtins(live)
        (view,) = rebuilt.fleets.values()
        assert view.status == "completed" and view.audit
        assert all(m.status == "done" for m in view.members.values())
        log.close()


async def test_replay_rebuilds_a_failed_fleets_spend_and_refusal(tmp_path):
    (tmp_path / "a.toml").write_text(
        '[[turn]]\nsteps = [ { usage = { cost_usd = 0.75 } }, { say = "spent" } ]\n')
    (tmp_path / "fleet.toml").write_text(
        'name = "r"\ntask = "go"\nworktrees = "dirs"\nbudget_usd = 0.5\n'
        '[[session]]\nid = "a"\nbinding = "inproc"\nscript = "a.toml"\n'
        '[[session]]\nid = "b"\nbinding = "inproc"\n'
        '[[route]]\npipeline = ["a", "b"]\n')
    outcome, log, live = await run_file(tmp_path / "fleet.toml")
    assert not outcome.completed
    rebuilt = replay(log).fleets
    assert msgspec.to_builtins(rebuilt) == msgspec.to_builtins(live)
    view = rebuilt.fleets["r"]
    assert view.status == "failed" and view.spent_usd == 0.75
    assert view.members["a"].spent_usd == 0.75 and view.members["b"].turns == 0
    assert [r.kind for r in view.audit if r.kind == "fleet.budget_refused"] == [
        "fleet.budget_refused"]
    log.close()
