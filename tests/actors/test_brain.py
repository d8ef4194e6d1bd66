"""The scripted brain: the command language and script files."""

from pathlib import Path

import pytest

from trio_cap.actors.agent.brain import ScriptedBrain
from trio_cap.actors.agent.commands import parse_line, parse_prompt
from trio_cap.actors.agent.script import ScriptError, load_script, parse_script
from trio_cap.actors.agent.steps import Ask, Fail, PlanItem, PlanStep, Run, Say, Think, Wait, Write

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("line", "step"),
    [
        ("write src/a.py: print(1)\\nprint(2)", Write(write="src/a.py",
                                                     content="print(1)\nprint(2)\n")),
        ("run: ls -la | wc -l", Run(run="ls -la | wc -l")),
        ("ask: Which DB? [pg|sqlite]", Ask(ask="Which DB?", options=["pg", "sqlite"])),
        ("ask: Really?", Ask(ask="Really?")),
        ("plan: read; write ; test", PlanStep(plan=[PlanItem("read"), PlanItem("write"),
                                                   PlanItem("test")])),
        ("think: hmm", Think(think="hmm")),
        ("wait 2.5", Wait(wait=2.5)),
        ("fail: rate_limit", Fail(fail="rate_limit", message="scripted failure: rate_limit")),
        ("hello world", None),
        ("running late", None),
    ],
)
def test_command_lines(line, step):
    assert parse_line(line) == step


def test_a_prompt_without_commands_gets_a_reply_quoting_it():
    (step,) = parse_prompt("what is this?")
    assert isinstance(step, Say) and step.say.startswith('You said: "what is this?"')
    steps = parse_prompt("think: x\nand also this")
    assert steps[-1] == Say(say='You also said: "and also this".')


def test_turns_then_rules_then_the_command_language():
    script = parse_script({
        "turn": [{"steps": [{"say": "first"}]}],
        "rule": [{"match": "^deploy", "commands": "think: deploying"}],
    })
    brain = ScriptedBrain(script)
    assert brain.steps_for("anything") == [Say(say="first")]
    assert brain.steps_for("deploy now") == [Think(think="deploying")]
    assert brain.steps_for("run: ls") == [Run(run="ls")]


def test_every_problem_in_a_script_is_reported_with_its_path(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(
        """
colour = "blue"
chunk_words = 0
[[turn]]
steps = [ { say = 3 }, { dance = "x" }, { write = "a", bogus = 1 }, { say = "a", think = "b" } ]
[[turn]]
commands = "x"
steps = []
[[rule]]
match = "(unclosed"
steps = []
"""
    )
    with pytest.raises(ScriptError) as info:
        load_script(path)
    problems = info.value.problems
    assert str(path) in str(info.value)
    expected = [
        "colour: unknown key",
        "turn[0].steps[0]",
        "turn[0].steps[1]: no step verb",
        "turn[0].steps[2]",
        "turn[0].steps[3]: several step verbs",
        "turn[1]: give exactly one of 'steps'",
        "rule[0].match: invalid regular expression",
        "chunk_words: expected a positive integer",
    ]
    for fragment in expected:
        assert any(p.startswith(fragment) for p in problems), (fragment, problems)
    assert any("bogus" in p for p in problems)


def test_unreadable_and_non_toml_scripts(tmp_path):
    with pytest.raises(ScriptError, match="cannot read"):
        load_script(tmp_path / "missing.toml")
    (tmp_path / "x.toml").write_text("turn = [")
    with pytest.raises(ScriptError, match="not valid TOML"):
        load_script(tmp_path / "x.toml")


def test_the_example_script_is_valid():
    script = load_script(ROOT / "examples" / "demo-script.toml")
    assert len(script.turns) == 1 and len(script.rules) == 2
    assert script.input_per_mtok == 3.0
