"""``cap CMD`` loads only CMD's module: the map it uses must say what every module registers."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

from trio_cap.actors.cli.main import COMMAND_MODULES, COMMANDS, build_parser


def _registered(module: str) -> set[str]:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    importlib.import_module(module).register(sub)
    return set(sub.choices)


def test_every_command_maps_to_the_module_that_registers_it() -> None:
    found = {name: module for module in COMMAND_MODULES for name in _registered(module)}
    assert found == COMMANDS
    assert set(COMMANDS.values()) == set(COMMAND_MODULES)


def test_a_partial_parser_parses_its_command_as_the_whole_one_does() -> None:
    for argv in (["run", "--task", "x", "--binding", "inproc"], ["log", "show", "a.caplog"],
                 ["replay", "a.caplog", "--until", "3"], ["agent", "--cap-manifest"]):
        whole = vars(build_parser().parse_args(argv))
        partial = vars(build_parser(argv[0]).parse_args(argv))
        assert {k: v for k, v in partial.items() if k != "func"} == \
            {k: v for k, v in whole.items() if k != "func"}


def test_starting_an_agent_imports_no_server_driver_or_orchestrator() -> None:
    code = ("import sys; from trio_cap.actors.cli.main import build_parser; "
            "build_parser('agent'); print(sorted(m for m in sys.modules if m.startswith("
            "('psycopg', 'hypercorn', 'httpx', 'a2a', 'trio_cap.actors.orchestrator'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_a_stream_json_agent_without_a_bridge_never_imports_the_orchestrator() -> None:
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "trio_cap.actors.cli",
                          "agent", "--cap-speak", "stream-json"], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines()
                if line.startswith("import time:")}
    assert "trio_cap.actors.bindings.stream_json.agent_shell" in imported  # it did start
    assert not {"trio_cap.actors.orchestrator", "trio_cap.actors.bridge", "psycopg"} & imported
