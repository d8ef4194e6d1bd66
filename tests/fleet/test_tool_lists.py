"""Per-tool allow and deny lists in a fleet file (per fleet and per session, adding up), and
the policy settings' validation: every bad one reported at once, with its path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fleet.helpers import cap, events, run_file
from trio_cap.actors.fleet import FleetInvalid, load_fleet
from trio_cap.actors.fleet.model import AutoAnswerSettings

WRITE = '[[turn]]\nsteps = [ { write = "ok.txt", content = "x" }, { say = "wrote" } ]\n'
RISKY = ('[[turn]]\nsteps = [ { tool = "Deploy", input = { target = "production" }, '
         'scope = "network", risk = "high", output = "deployed" }, { say = "tried" } ]\n')


def _write(tmp_path, fleet_extra: str, first: str = "", second: str = "",
           script: str = "write.toml"):
    (tmp_path / "write.toml").write_text(WRITE)
    (tmp_path / "risky.toml").write_text(RISKY)
    path = tmp_path / "fleet.toml"
    path.write_text(
        f'name = "t"\ntask = "go"\nworktrees = "dirs"\n{fleet_extra}\n'
        f'[[session]]\nid = "one"\nbinding = "inproc"\nscript = "{script}"\n{first}\n'
        f'[[session]]\nid = "two"\nbinding = "inproc"\nscript = "write.toml"\n{second}\n')
    return path


def _decisions(log, member: str) -> list[tuple[str, str]]:
    return [(e.event.decision, e.event.by)
            for e in events(log, "permission.decided", f"t.{member}")]


async def test_a_denied_tool_is_refused_in_a_fleet_run_with_the_decision_in_the_log(tmp_path):
    path = _write(tmp_path, 'permissions = "allow"', second='deny_tools = ["Wr*"]')
    outcome, log, _ = await run_file(path)
    assert outcome.completed, outcome.reason
    assert _decisions(log, "one") == [("allow_once", "policy:allow")]
    assert _decisions(log, "two") == [("deny", "policy:deny_tools")]
    (refused,) = events(log, "permission.decided", "t.two")
    assert refused.event.reason == "tool 'Write' is refused by deny_tools ('Wr*')"
    dirs = {e.event.member: e.event.path for e in events(log, "fleet.worktree")}
    assert (Path(dirs["one"]) / "ok.txt").exists()
    assert not (Path(dirs["two"]) / "ok.txt").exists()
    created = {e.stream: (e.event.allow_tools, e.event.deny_tools)
               for e in events(log, "session.created")}
    assert created == {"t.one": ((), ()), "t.two": ((), ("Wr*",))}
    log.close()


async def test_fleet_and_session_lists_add_up(tmp_path):
    path = _write(tmp_path, 'allow_tools = ["Read"]\ndeny_tools = ["Bash"]',
                  first='allow_tools = ["Write"]')
    _outcome, log, _ = await run_file(path)
    assert _decisions(log, "one") == [("allow_once", "policy:allow_tools")]
    assert _decisions(log, "two") == [("deny", "policy:deny")]  # the fleet's policy
    created = {e.stream: (e.event.allow_tools, e.event.deny_tools)
               for e in events(log, "session.created")}
    assert created == {"t.one": (("Read", "Write"), ("Bash",)),
                       "t.two": (("Read",), ("Bash",))}
    log.close()


async def test_high_risk_on_an_allow_list_is_refused_unless_allow_high_risk(tmp_path):
    for extra, expected in (("", "deny"), ("allow_high_risk = true", "allow_once")):
        where = tmp_path / ("high" if extra else "plain")
        where.mkdir()
        path = _write(where, f'allow_tools = ["Deploy"]\n{extra}', script="risky.toml")
        _outcome, log, _ = await run_file(path)
        assert _decisions(log, "one") == [(expected, "policy:allow_tools")]
        log.close()


def test_bad_policy_settings_are_all_reported_at_once(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text(
        'name = "v"\ntask = "x"\nallow_tools = ["Read", 3]\ndeny_tools = "Bash"\n'
        '[auto_answer]\narchive = "no/such/folder"\nthreshold = -1\nmax_passages = 0\n'
        'colour = "red"\n'
        '[[session]]\nid = "a"\nallow_tools = ["Bash"]\ndeny_tools = ["Bash"]\n'
        'auto_answer = "yes"\n')
    with pytest.raises(FleetInvalid) as caught:
        load_fleet(path)
    p = str(path)
    assert caught.value.problems == [
        f"{p}: allow_tools: expected a list of tool names or globs (\"Read\", \"mcp__*\"), "
        "got ['Read', 3]",
        f"{p}: deny_tools: expected a list of tool names or globs (\"Read\", \"mcp__*\"), "
        "got 'Bash'",
        f"{p}: auto_answer.colour: unknown key (auto_answer takes archive, enabled, "
        "max_passages, threshold)",
        f"{p}: auto_answer.threshold: expected a BM25 score as a number > 0, got -1",
        f"{p}: auto_answer.max_passages: expected a whole number from 1 to 20, got 0",
        f"{p}: auto_answer.archive: archive folder no/such/folder does not exist "
        f"({tmp_path / 'no/such/folder'})",
        f"{p}: session[0].allow_tools[0]: 'Bash' is in deny_tools too: keep it in one list",
        f"{p}: session[0].auto_answer: expected true or false, got 'yes'",
    ]


def test_an_archive_needs_markdown_and_a_session_cannot_opt_into_no_archive(tmp_path):
    (tmp_path / "empty").mkdir()
    path = tmp_path / "fleet.toml"
    path.write_text('name = "v"\ntask = "x"\n[auto_answer]\narchive = "empty"\n'
                    '[[session]]\nid = "a"\n')
    with pytest.raises(FleetInvalid) as caught:
        load_fleet(path)
    assert caught.value.problems == [
        f"{path}: auto_answer.archive: archive folder empty has no markdown (.md) files"]
    path.write_text('name = "v"\ntask = "x"\n[auto_answer]\nenabled = false\n'
                    '[[session]]\nid = "a"\nauto_answer = true\n')
    with pytest.raises(FleetInvalid) as caught:
        load_fleet(path)
    assert caught.value.problems == [
        f"{path}: session[0].auto_answer: the fleet has no [auto_answer] archive enabled"]


def test_auto_answer_defaults_and_yaml(tmp_path):
    (tmp_path / "docs" / "research").mkdir(parents=True)
    (tmp_path / "docs" / "research" / "a.md").write_text("# A\n\ntext\n")
    path = tmp_path / "fleet.yaml"
    path.write_text('name: y\ntask: x\nauto_answer: {}\ndeny_tools: [Bash]\n'
                    'sessions:\n  - id: a\n')
    fleet = load_fleet(path)
    assert fleet.auto_answer == AutoAnswerSettings(str(tmp_path / "docs" / "research"), 3.0, 3)
    assert fleet.deny_tools == ("Bash",)


def test_cap_fleet_validate_prints_every_policy_problem(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text('name = "v"\ntask = "x"\n[auto_answer]\narchive = "gone"\nthreshold = 0\n'
                    '[[session]]\nid = "a"\n')
    done = cap("fleet", "validate", str(path))
    assert done.returncode == 2, done.stderr
    assert "auto_answer.threshold: expected a BM25 score as a number > 0, got 0" in done.stderr
    assert "auto_answer.archive: archive folder gone does not exist" in done.stderr
    assert "Traceback" not in done.stderr
