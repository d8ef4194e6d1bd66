"""The agent side's machine modules keep the kit's never-rules (DESIGN §2a).

Read from the source, not by importing: every module the machine modules
import, followed transitively through trio-cap's own modules, may import
neither ``trio``, ``subprocess``, ``socket``, ``os``, ``time``, ``random`` nor
``uuid`` — so the machine runs, replays and fuzzes with no event loop, process,
socket, clock, randomness or id source of its own.  (Package ``__init__``
files are not followed: they are the public face, not what a machine uses.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"trio_cap.actors": ROOT / "actors", "trio_cap.events": ROOT / "events"}
BANNED = {"trio", "subprocess", "socket", "os", "time", "random", "uuid"}
MACHINE = [f"trio_cap.actors.bindings.stream_json.{name}" for name in (
    "agent_side", "agent_tools", "agent_messages", "agent_policy", "agent_transcript",
    "agent_effects", "agent_argv", "agent_replies")]


def module_file(name: str) -> Path | None:
    for prefix, folder in PACKAGES.items():
        if name == prefix or name.startswith(prefix + "."):
            rel = name[len(prefix):].lstrip(".").replace(".", "/")
            base = folder / rel if rel else folder
            if base.with_suffix(".py").is_file():
                return base.with_suffix(".py")
            return None  # a package: its __init__ is not followed
    return None


def imports_of(name: str, path: Path) -> set[str]:
    """Absolute names of everything ``path`` imports (``from P import m`` gives ``P.m`` when
    that is a module, else ``P``)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if module_file(full) else base)
    return found


def reach(start: str) -> dict[str, set[str]]:
    """Every trio-cap module ``start`` reaches, with its direct imports."""
    seen: dict[str, set[str]] = {}
    todo = [start]
    while todo:
        name = todo.pop()
        path = module_file(name)
        if name in seen or path is None:
            continue
        seen[name] = imports_of(name, path)
        todo += [m for m in seen[name] if m.startswith("trio_cap.")]
    return seen


@pytest.mark.parametrize("module", MACHINE)
def test_machine_modules_reach_no_io_clock_or_randomness(module: str) -> None:
    graph = reach(module)
    assert module in graph, f"{module} not found"
    broken = {name: sorted(m for m in deps if m.split(".")[0] in BANNED)
              for name, deps in graph.items()}
    assert not {k: v for k, v in broken.items() if v}, broken


def test_the_check_sees_a_banned_import(tmp_path: Path) -> None:
    """The reader is not blind: the agent shell (not a machine module) does reach trio."""
    graph = reach("trio_cap.actors.bindings.stream_json.agent_shell")
    assert any(m.split(".")[0] == "trio" for deps in graph.values() for m in deps)
    assert "trio_cap.actors.agent.core" in graph
