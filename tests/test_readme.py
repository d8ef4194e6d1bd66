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


def _leaf_parsers():
    from trio_cap.actors.cli.main import build_parser

    groups = build_parser()._subparsers._group_actions[0].choices
    for name, sub in groups.items():
        nested = [a for a in sub._actions if a.__class__.__name__ == "_SubParsersAction"]
        if nested:
            for leaf, leaf_parser in nested[0].choices.items():
                yield f"cap {name} {leaf}", leaf_parser
        else:
            yield f"cap {name}", sub


def _readme_section(text: str, command: str) -> str:
    start = text.index(f"### `{command}")
    end = text.find("\n### ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def test_readme_and_help_agree_on_every_flag():
    """Each command's README section names exactly the long flags its parser takes."""
    text = (ROOT / "README.md").read_text()
    problems = []
    for command, parser in _leaf_parsers():
        section = _readme_section(text, command)
        synopsis = section.split("```", 2)[1] if section.count("```") >= 2 else ""
        documented = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", synopsis))
        taken = {opt for action in parser._actions for opt in action.option_strings
                 if opt.startswith("--") and opt != "--help"}
        for action in parser._actions:
            spellings = [o for o in action.option_strings if o.startswith("--")]
            if spellings and "--help" not in spellings and not documented & set(spellings):
                problems.append(f"{command}: {spellings[0]} is in --help but not in README's "
                                "synopsis")
        for flag in sorted(documented - taken):
            problems.append(f"{command}: README's synopsis has {flag}, --help does not")
        for action in parser._actions:
            if action.option_strings and action.help in (None, "") and "--help" not in \
                    action.option_strings:
                problems.append(f"{command}: {action.option_strings[0]} has no --help text")
    assert not problems, "\n".join(problems)
