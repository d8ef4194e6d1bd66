"""README's two set-up commands are exactly what CI runs."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set-up: two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_ci_runs_the_readme_commands_verbatim():
    commands = readme_commands()
    assert len(commands) == 2
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line and not line.startswith("#")]
    assert commands[0] in ci and commands[1] in ci
    assert ci.index(commands[0]) < ci.index(commands[1])


def test_every_cli_command_is_documented():
    from trio_cap.actors.cli.main import build_parser

    parser = build_parser()
    text = (ROOT / "README.md").read_text()
    groups = parser._subparsers._group_actions[0].choices  # argparse keeps them here
    for name, sub in groups.items():
        nested = [a for a in sub._actions if a.__class__.__name__ == "_SubParsersAction"]
        leaves = [f"cap {name} {leaf}" for leaf in nested[0].choices] if nested else [f"cap {name}"]
        for leaf in leaves:
            assert f"### `{leaf}" in text, f"README has no section for `{leaf}`"
