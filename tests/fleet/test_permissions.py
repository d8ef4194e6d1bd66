"""The fleet file's permission policy: per fleet and per session; high risk is never
auto-approved unless the file says allow_high_risk = true."""

from __future__ import annotations

import pytest
import trio

from tests.fleet.helpers import events, run_file, run_with_person
from trio_cap.actors.fleet import FleetInvalid, load_fleet
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.orchestrator import open_orchestrator

RISKY = ('[[turn]]\nsteps = [ { tool = "Deploy", input = { target = "production" }, '
         'scope = "network", risk = "high", output = "deployed" }, { say = "tried" } ]\n')
SAFE = '[[turn]]\nsteps = [ { write = "ok.txt", content = "x" }, { say = "wrote" } ]\n'


def _write(tmp_path, fleet_extra: str, session_extra: str = "") -> object:
    (tmp_path / "risky.toml").write_text(RISKY)
    (tmp_path / "safe.toml").write_text(SAFE)
    path = tmp_path / "fleet.toml"
    path.write_text(
        f'name = "p"\ntask = "go"\nworktrees = "dirs"\n{fleet_extra}\n'
        f'[[session]]\nid = "risky"\nbinding = "inproc"\nscript = "risky.toml"\n'
        f'{session_extra}\n'
        '[[session]]\nid = "safe"\nbinding = "inproc"\nscript = "safe.toml"\n')
    return path


def _decisions(log, member: str) -> list[tuple[str, str]]:
    return [(e.event.decision, e.event.by) for e in events(log, "permission.decided",
                                                           f"p.{member}")]


async def test_high_risk_under_allow_is_still_refused(tmp_path):
    policy = "allow"
    outcome, log, _ = await run_file(_write(tmp_path, f'permissions = "{policy}"'))
    assert _decisions(log, "risky") == [("deny", f"policy:{policy}")]
    (decided,) = events(log, "permission.decided", "p.risky")
    assert "high-risk" in decided.event.reason
    assert _decisions(log, "safe") == [("allow_once", f"policy:{policy}")]
    assert outcome.completed  # a refused tool is the agent's problem, not a failed turn


@pytest.mark.parametrize(("fleet", "session", "where"), [
    ('permissions = "bypass"', "", "permissions"),
    ('permissions = "allow"', 'permissions = "bypass"', "session[0].permissions"),
])
def test_bypass_without_allow_high_risk_is_refused_before_anything_runs(tmp_path, fleet,
                                                                       session, where):
    path = _write(tmp_path, fleet, session)
    with pytest.raises(FleetInvalid) as caught:
        load_fleet(path)
    assert caught.value.problems == [
        f"{path}: {where}: bypass lets the agent run every tool without asking, high risk "
        "included: set allow_high_risk = true to accept that, or use allow"]
    load_fleet(_write(tmp_path, fleet + "\nallow_high_risk = true", session))  # accepted


async def test_allow_high_risk_in_the_file_lets_the_policy_approve_it(tmp_path):
    _outcome, log, _ = await run_file(_write(tmp_path, 'permissions = "allow"\n'
                                                      'allow_high_risk = true'))
    assert _decisions(log, "risky") == [("allow_once", "policy:allow")]


async def test_a_sessions_own_policy_overrides_the_fleets(tmp_path):
    _outcome, log, _ = await run_file(_write(tmp_path, 'permissions = "allow"',
                                            'permissions = "deny"'))
    assert _decisions(log, "risky") == [("deny", "policy:deny")]
    assert _decisions(log, "safe") == [("allow_once", "policy:allow")]
    created = {e.stream: e.event.permissions for e in events(log, "session.created")}
    assert created == {"p.risky": "deny", "p.safe": "allow"}


async def test_high_risk_under_allow_goes_to_the_person_present(tmp_path):
    """A person is there (the live view's keys, the fleet face, an embedding caller): the
    high-risk request waits for them instead of being refused, and their decision is the
    one logged; the low-risk one is still the policy's."""
    path = _write(tmp_path, 'permissions = "allow"')

    def waiting(_state) -> str | None:
        return next((e.event.ref for e in orch.log.read(1, "p.risky")
                     if e.kind == "session.input_required" and e.event.reason == "permission"),
                    None)

    async def decide(_state) -> None:
        (needed,) = [e.event for e in orch.log.read(1, "p.risky")
                     if e.kind == "session.input_required"]
        assert needed.risk == "high"
        await orch.session("p.risky").decide(needed.ref, "allow_once")

    async with open_orchestrator(tmp_path / "run.caplog", ids=SequentialIds()) as orch:
        with trio.fail_after(60):
            outcome = await run_with_person(orch, load_fleet(path),
                                            lambda s: waiting(s) is not None, decide)
        assert outcome.completed, outcome.reason
        log = orch.log
        assert _decisions(log, "risky") == [("allow_once", "human")]
        assert _decisions(log, "safe") == [("allow_once", "policy:allow")]
