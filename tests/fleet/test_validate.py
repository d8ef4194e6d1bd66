"""Every problem of a fleet file, at once, as ``file: field.path: problem`` — before anything
is spawned; and each CLI failure path as a real process (exit code, lines, no traceback)."""

from __future__ import annotations

import pytest

from tests.fleet.helpers import EXAMPLES, cap
from trio_cap.actors.fleet import FleetInvalid, load_fleet

BAD = '''\
name = "bad fleet"
task = "x"
budget_usd = -1
permissions = "sometimes"
colour = "blue"

[[session]]
id = "lead"
budget_usd = "lots"

[[session]]
id = "lead"

[[session]]
id = "w1"
agent = "manifests/nope.toml"

[[route]]
fan_out = { from = "lead", to = ["w1", "ghost"] }

[[route]]
pipeline = ["w1", "lead"]

[[route]]
race = { from = ["w1"] }
'''


def test_every_problem_is_reported_at_once_with_its_path(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text(BAD)
    with pytest.raises(FleetInvalid) as caught:
        load_fleet(path)
    p = str(path)
    assert caught.value.problems == [
        f"{p}: colour: unknown key",
        f"{p}: name: 'bad fleet' is not a usable id (letters, digits, '-', '_'; at most 63, "
        "starting with a letter or digit)",
        f"{p}: budget_usd: expected dollars as a number >= 0, got -1",
        f"{p}: permissions: 'sometimes' is not a policy: one of ask, allow, deny, bypass",
        f"{p}: session[0].budget_usd: expected dollars as a number >= 0, got 'lots'",
        f"{p}: session[1].id: session 'lead' is defined twice",
        f"{p}: session[2].agent: manifest manifests/nope.toml does not exist",
        f"{p}: route[0].fan_out.to[1]: unknown session 'ghost' (sessions: lead, w1)",
        f"{p}: route[2].race.from: needs at least 2 session ids",
        f"{p}: route: cycle lead → w1 → lead has no exit: give one of its routes rounds = N",
    ]


def test_a_cycle_with_rounds_on_one_route_has_an_exit_and_start_names_who_begins(tmp_path):
    path = tmp_path / "fleet.toml"
    text = ('name = "ok"\ntask = "x"\n[[session]]\nid = "a"\n{start}[[session]]\nid = "b"\n'
            '[[route]]\npipeline = ["a", "b"]\nrounds = 2\n'
            '[[route]]\npipeline = ["b", "a"]\n')
    path.write_text(text.format(start=""))
    with pytest.raises(FleetInvalid) as caught:  # no cycle error, but nobody would begin
        load_fleet(path)
    assert caught.value.problems == [
        f"{path}: session: no session gets the task (every one is fed by a route): set "
        "start = true on the first"]
    path.write_text(text.format(start="start = true\n"))
    assert load_fleet(path).entry_members() == ("a",)


def test_yaml_problems_have_the_same_paths(tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text("name: y\ntask: x\nsessions:\n  - id: a\n    budget_usd: -2\n"
                    "routes:\n  - pipeline: [a, zed]\n")
    with pytest.raises(FleetInvalid) as caught:
        load_fleet(path)
    assert caught.value.problems == [
        f"{path}: sessions[0].budget_usd: expected dollars as a number >= 0, got -2",
        f"{path}: routes[0].pipeline[1]: unknown session 'zed' (sessions: a)"]


def test_plan_problems(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text('name = "p"\ntask = "x"\n[[session]]\nid = "a"\n'
                    '[[plan]]\nid = "one"\ncontent = "do"\nassigned_to = "a"\n'
                    'depends_on = ["two"]\n'
                    '[[plan]]\nid = "two"\ncontent = "do"\nassigned_to = "b"\n'
                    '[[plan]]\nid = "three"\ncontent = "x"\nassigned_to = "a"\n'
                    'depends_on = ["four"]\n')
    with pytest.raises(FleetInvalid) as caught:
        load_fleet(path)
    assert caught.value.problems == [
        f"{path}: plan[1].assigned_to: unknown session 'b' (sessions: a)",
        f"{path}: plan[2].depends_on[0]: unknown plan entry 'four'"]


def test_cap_fleet_validate_lists_every_problem_and_exits_2(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text(BAD)
    run = cap("fleet", "validate", str(path))
    assert run.returncode == 2
    lines = run.stderr.splitlines()
    assert lines[0] == f"cap: error: {path}: colour: unknown key"
    assert len(lines) == 10 and "Traceback" not in run.stderr


def test_an_agent_no_manifest_answers_to_is_a_problem_of_the_file(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text('name = "m"\ntask = "x"\n[[session]]\nid = "a"\nagent = "no-such-agent"\n'
                    '[[session]]\nid = "b"\nbinding = "acp-nonsense"\n')
    run = cap("fleet", "validate", str(path))
    assert run.returncode == 2
    lines = run.stderr.splitlines()
    assert len(lines) == 2 and "Traceback" not in run.stderr
    assert lines[0].startswith(f"cap: error: {path}: session[0].agent: ")
    assert "no-such-agent" in lines[0]
    assert lines[1].startswith(f"{path}: session[1].binding: ")


def test_every_example_validates():
    for path in sorted(EXAMPLES.glob("*.toml")) + sorted(EXAMPLES.glob("*.yaml")):
        run = cap("fleet", "validate", str(path))
        assert run.returncode == 0, run.stderr
        assert run.stdout.startswith(f"{path}: ok: fleet ")


@pytest.mark.parametrize(("args", "code", "message"), [
    (["fleet", "validate", "missing.toml"], 2, "cap: error: missing.toml: cannot read it: "
                                               "No such file or directory"),
    (["fleet", "validate", "."], 2, "cap: error: .: is a directory, not a fleet file"),
    (["fleet", "run", "broken.toml"], 2, "cap: error: broken.toml: not valid TOML: "),
    (["fleet", "run", "empty.toml", "--task", " "], 2, "cap: error: --task: the task is empty"),
    (["fleet", "run", "notask.toml"], 2, "cap: error: notask.toml: no task: give task or "
                                         "task_file in the file, or --task"),
    (["fleet", "status", "nolog.caplog"], 2, "cap: error: nolog.caplog: no such log file"),
    (["fleet", "status", "plain.caplog"], 1, "cap fleet status: plain.caplog has no fleet in"),
    (["fleet", "clean", "notask.toml"], 0, "cap fleet clean: no log says fleet nt made "),
])
def test_failure_paths_end_in_one_line_and_an_exit_code(tmp_path, args, code, message):
    (tmp_path / "broken.toml").write_text("name = \n")
    (tmp_path / "empty.toml").write_text('name = "e"\ntask = "x"\n[[session]]\nid = "a"\n')
    (tmp_path / "notask.toml").write_text('name = "nt"\nworktrees = "dirs"\n'
                                          '[[session]]\nid = "a"\n')
    import trio

    from trio_cap.events.kinds import TextChunk
    from trio_cap.events.log import FileEventLog

    async def plain():
        async with FileEventLog(tmp_path / "plain.caplog") as log:
            await log.append([TextChunk(message_id="m", text="hi")], stream="s")

    trio.run(plain)
    run = cap(*args, cwd=tmp_path)
    assert run.returncode == code, run.stderr
    (line,) = run.stderr.splitlines()
    assert line.startswith(message)
    assert not list(tmp_path.glob(".cap/fleets/*/*.caplog"))  # nothing ran: no log left
