"""The never-rules of DESIGN §2a, enforced: machines touch no I/O, and nothing imports upward.

Two independent checks for the machines, because each misses what the other
sees: the AST check finds a forbidden import anywhere in a machine's own
file (also inside a function that no test happens to call); the import check
imports every machine in a fresh interpreter where no trio-cap package
``__init__`` has run and where any trio-cap module asking for a forbidden
name gets ImportError, so it also finds a forbidden import reached
*through* another trio-cap module (a machine importing a helper that
imports ``trio``).  ``os`` and friends are preloaded by the interpreter, so
the blocker refuses the *import statement* of trio-cap code, not the module.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FORBIDDEN = ("trio", "subprocess", "socket", "os", "time", "random", "uuid",
             "signal", "asyncio", "threading", "multiprocessing", "select", "selectors",
             "shutil", "tempfile")
"""No I/O, processes, clocks or randomness in a machine (the first seven are DESIGN §2a's;
the rest are other doors to the same things)."""

MACHINES = (
    "actors/bindings/base.py",          # the machine contract and the shared outputs
    "actors/bindings/ndjson.py",        # the one line framer
    "actors/bindings/jsonrpc.py",       # sans-io JSON-RPC 2.0
    "actors/bindings/byte_shape.py",    # a run of frames matched in bytes
    "actors/bindings/*/frames.py",      # every binding's wire frames (and their helpers)
    "actors/bindings/*/frames_*.py",
    "actors/bindings/*/machine*.py",    # every binding's machine and its helpers …
    "actors/bindings/*/driver.py",      # … named driver for the orchestrator's side
    "actors/bindings/*/driver_*.py",
    "actors/bindings/*/agent_*.py",     # … and agent_* for the agent's side
    "actors/bindings/*/publisher*.py",  # … and publisher* for a binding's serving side (A2A)
    "actors/session/machine.py",        # the session lifecycle machine
    "actors/session/policy.py",         # permission policies as pure decisions
    "actors/fleet/machine*.py",         # the fleet's routing and budget rules
    "actors/fleet/outputs.py",          # what the fleet machine asks its shell to do
    "actors/fleet/touches.py",          # who changed which file (conflicts), for the machine
    "actors/fleet/ratelimit.py",        # how long a rate limit is waited out, for the machine
    "actors/fleet/model.py",            # the fleet file's typed values
    "actors/fleet/face.py",             # a fleet run seen as one agent (the fleet face)
    "actors/relay.py",                  # driven sessions' questions, renumbered for a face
    "actors/risk.py",                   # risk rating (a module or, now, a package)
    "actors/risk/*.py",
)
"""Which modules are machines, by the kit's naming rules (docs/architecture.md, "The
binding kit"), so a new binding's machine is checked the day it is added.  The list is
explicit rather than "everything under bindings/" because the shells live there too."""

SHELLS_NAMED_LIKE_MACHINES = {
    "actors/bindings/stream_json/agent_shell.py",  # the agent side's Trio shell
    "actors/bindings/stream_json/agent_ids.py",    # the shell's uuid source, injected
    "actors/bindings/acp/agent_shell.py",          # the ACP agent side's Trio shell
    "actors/bindings/acp/agent_host.py",           # its tools through the client (Trio)
}
"""Files the patterns above catch that are shell-side by design (their docstrings say so)."""


def machine_files() -> list[str]:
    found: set[str] = set()
    for pattern in MACHINES:
        found.update(p.relative_to(ROOT).as_posix() for p in ROOT.glob(pattern))
    return sorted(found - SHELLS_NAMED_LIKE_MACHINES)


def module_of(path: str) -> str:
    parts = list(Path(path).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return "trio_cap." + ".".join(parts)


def imports_of(path: Path, name: str | None = None) -> list[tuple[int, str]]:
    """(line, absolute dotted name) of every import in the file, anywhere in it."""
    tree = ast.parse(path.read_text(), str(path))
    name = name or module_of(path.relative_to(ROOT).as_posix())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            out.append((node.lineno, target))
            # ``from pkg import submodule`` imports pkg.submodule
            out.extend((node.lineno, f"{target}.{alias.name}") for alias in node.names
                       if (ROOT / _path_of(f"{target}.{alias.name}")).exists()
                       or (ROOT / _path_of(f"{target}.{alias.name}", package=True)).exists())
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
                node.func, "id", "")) in ("import_module", "__import__"):
            out.append((node.lineno, "importlib (a dynamic import the checks cannot see)"))
    return out


def _path_of(module: str, package: bool = False) -> str:
    parts = module.removeprefix("trio_cap.").split(".")
    if parts == ["trio_cap"]:
        parts = ["actors", "public"]
    return "/".join(parts) + ("/__init__.py" if package else ".py")


# ---- the machines ---------------------------------------------------------------------


def test_the_machine_list_finds_the_machines() -> None:
    files = machine_files()
    for must in ("actors/bindings/base.py", "actors/bindings/stream_json/driver.py",
                 "actors/bindings/stream_json/agent_side.py", "actors/session/machine.py"):
        assert must in files
    for shell in SHELLS_NAMED_LIKE_MACHINES:
        assert (ROOT / shell).exists(), f"{shell} is gone: drop it from the exceptions"


def forbidden_imports(path: Path, name: str | None = None) -> list[str]:
    return [f"{path.name}:{line}: import {target}" for line, target in imports_of(path, name)
            if target.partition(".")[0] in FORBIDDEN or target.startswith("importlib (")]


@pytest.mark.parametrize("path", machine_files())
def test_a_machine_has_no_forbidden_import_in_its_file(path: str) -> None:
    bad = forbidden_imports(ROOT / path)
    assert not bad, "machines are sans-io (DESIGN §2a):\n" + "\n".join(bad)


def test_the_file_check_sees_imports_hidden_in_functions(tmp_path: Path) -> None:
    fake = tmp_path / "machine.py"
    fake.write_text("import msgspec\n\ndef now():\n    from time import monotonic\n"
                    "    return monotonic()\n")
    assert forbidden_imports(fake, "trio_cap.actors.bindings.fake.machine") == [
        "machine.py:4: import time"]


BLOCKER = textwrap.dedent("""
    import builtins, importlib, json, sys, types
    forbidden, stubs, modules = json.loads(sys.argv[1])
    for name, path in stubs.items():  # packages whose __init__ must not run (they load trio)
        stub = types.ModuleType(name)
        stub.__path__ = [path]
        sys.modules[name] = stub
    real_import = builtins.__import__

    def guarded(name, globals=None, locals=None, fromlist=(), level=0):
        importer = (globals or {}).get("__name__") or ""
        if level == 0 and importer.startswith("trio_cap") and name.split(".")[0] in forbidden:
            raise ImportError(f"{importer} imports {name}")
        return real_import(name, globals, locals, fromlist, level)

    builtins.__import__ = guarded
    results = {}
    for module in modules:
        try:
            importlib.import_module(module)
        except BaseException as exc:
            results[module] = f"{type(exc).__name__}: {exc}"
        else:
            results[module] = None
    print(json.dumps(results))
""")


@cache
def blocked_imports() -> dict[str, str | None]:
    """Every machine imported under the blocker, in one fresh interpreter."""
    machines = {module_of(p) for p in machine_files()}
    stubs = {"trio_cap": str(ROOT / "actors" / "public")}
    for init in [*ROOT.glob("actors/**/__init__.py"), *ROOT.glob("events/**/__init__.py")]:
        name = module_of(init.relative_to(ROOT).as_posix())
        if name not in machines and "__pycache__" not in init.parts:
            stubs[name] = str(init.parent)
    result = subprocess.run(
        [sys.executable, "-c", BLOCKER, json.dumps([FORBIDDEN, stubs, sorted(machines)])],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("path", machine_files())
def test_a_machine_imports_with_io_modules_made_unimportable(path: str) -> None:
    error = blocked_imports()[module_of(path)]
    assert error is None, f"{path} (or a trio-cap module it imports) is not sans-io: {error}"


def test_the_blocker_catches_a_forbidden_import_through_a_helper(tmp_path: Path) -> None:
    """The check can fail: a fake machine whose helper imports trio is caught."""
    pkg = tmp_path / "trio_cap_fake"
    pkg.mkdir()
    (pkg / "helper.py").write_text("import trio\n")
    (pkg / "machine.py").write_text("from trio_cap_fake import helper\n")
    result = subprocess.run(
        [sys.executable, "-c", BLOCKER, json.dumps([FORBIDDEN, {"trio_cap_fake": str(pkg)},
                                                 ["trio_cap_fake.machine"]])],
        capture_output=True, text=True, timeout=60)
    assert json.loads(result.stdout) == {
        "trio_cap_fake.machine": "ImportError: trio_cap_fake.helper imports trio"}


# ---- layering -------------------------------------------------------------------------

LAYERS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (0, "events (and package markers)", ("events", "events.*", "actors", "actors.bindings",
                   "actors.bindings.stream_json", "actors.bindings.acp", "actors.bindings.pty",
                   "actors.bindings.a2a", "actors.session")),
    (1, "frames", ("actors.bindings.base", "actors.bindings.byte_shape",
                   "actors.bindings.*.frames",
                   "actors.bindings.*.frames_*")),
    (2, "machines", ("actors.bindings.ndjson", "actors.bindings.jsonrpc",
                     "actors.bindings.acp.frames_lenient",  # frames + jsonrpc's PayloadError
                     "actors.bindings.acp.runs",  # the hot read's loop (and its C twin)
                     "actors.bindings.*.machine*", "actors.bindings.*.driver*",
                     "actors.bindings.*.agent_*", "actors.bindings.*.publisher*",
                     "actors.session.machine",
                     "actors.session.policy", "actors.session.raw_budget",
                     "actors.session.timers", "actors.risk", "actors.risk.*",
                     "actors.fleet.machine", "actors.fleet.machine_*", "actors.fleet.model",
                     "actors.fleet.face",
                     "actors.fleet.touches", "actors.fleet.ratelimit", "actors.fleet.outputs",
                     "actors.relay")),
    (3, "shells", ("actors.connection", "actors.ids", "actors.runtime", "actors.gc_tuning",
                   "actors.bindings.process", "actors.bindings.deliver",
                   "actors.bindings.registry", "actors.bindings.inproc",
                   "actors.bindings.*.connector", "actors.bindings.pty.ptyproc",
                   "actors.bindings.*.agent_shell", "actors.bindings.acp.agent_host",
                   "actors.bindings.acp.fs_service", "actors.bindings.acp.terminals",
                   "actors.bindings.*.agent_ids", "actors.bindings.pty.tui_shell",
                   "actors.agent", "actors.agent.*",
                   "actors.manifest", "actors.manifest.*", "actors.peers", "actors.peers.*",
                   "actors.model_server", "actors.model_server.*", "actors.recording",
                   "actors.nodes", "actors.fleet.worktrees")),
    (4, "session actors", ("actors.session.actor", "actors.session.resolve")),
    (5, "orchestrator", ("actors.orchestrator", "actors.session_handle")),
    (6, "brains that use the orchestrator", ("actors.bridge", "actors.fleet_face",
                                             "actors.brains",
                                             "actors.brains.*",
                                             "actors.bindings.a2a.serve_*",
                                             "actors.replay", "actors.replay.*",
                                             "actors.fleet", "actors.fleet.*")),
    (7, "CLI and the public face", ("actors.cli", "actors.cli.*", "actors.peers.__main__",
                                    "actors.public")),
)
"""DESIGN §2a's layering, module by module: events ← frames ← machines ← shells ←
session actors ← orchestrator ← brains that use the orchestrator ← CLI.  The most specific
pattern wins (``actors.peers.__main__`` is the CLI, the rest of ``actors.peers`` a shell);
a module no pattern names fails the test until it is given a place."""


def _specificity(pattern: str) -> tuple[int, int]:
    return (pattern.count("."), -pattern.count("*"))


def layer_of(module: str) -> tuple[int, str] | None:
    best: tuple[tuple[int, int], int, str] | None = None
    for rank, name, patterns in LAYERS:
        for pattern in patterns:
            if fnmatchcase(module, pattern) and (best is None or _specificity(pattern) > best[0]):
                best = (_specificity(pattern), rank, name)
    return None if best is None else (best[1], best[2])


def all_modules() -> dict[str, Path]:
    out = {}
    for top in ("actors", "events"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if "__pycache__" not in path.parts:
                out[module_of(path.relative_to(ROOT).as_posix()).removeprefix("trio_cap.")] = path
    return out


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in all_modules() if layer_of(m) is None]
    assert not unplaced, f"give these a layer in LAYERS: {unplaced}"


def test_events_never_import_actors() -> None:
    bad = [f"{path.relative_to(ROOT)}:{line}: {name}"
           for module, path in all_modules().items() if module.startswith("events")
           for line, name in imports_of(path) if name.startswith("trio_cap.actors")]
    assert not bad, "events/ is the bottom layer:\n" + "\n".join(bad)


def upward_imports(module: str, path: Path, known: set[str]) -> list[str]:
    mine = layer_of(module)
    if mine is None:
        return []
    bad = []
    for line, name in imports_of(path, "trio_cap." + module):
        if name == "trio_cap":
            name = "trio_cap.actors.public"
        target = name.removeprefix("trio_cap.")
        theirs = layer_of(target) if name.startswith("trio_cap.") else None
        if theirs is not None and target in known and theirs[0] > mine[0]:
            bad.append(f"{module} ({mine[1]}), line {line}: imports {target} ({theirs[1]})")
    return bad


def test_nothing_imports_upward() -> None:
    modules = all_modules()
    bad = [b for module, path in modules.items() for b in upward_imports(module, path,
                                                                         set(modules))]
    assert not bad, "nothing imports upward (DESIGN §2a):\n" + "\n".join(bad)


def test_the_layering_check_sees_a_machine_reaching_for_the_orchestrator(
        tmp_path: Path) -> None:
    fake = tmp_path / "machine.py"
    fake.write_text("from trio_cap.events.kinds import Event\n"
                    "from trio_cap.actors.orchestrator import Session\n")
    assert upward_imports("actors.session.machine", fake, set(all_modules())) == [
        "actors.session.machine (machines), line 2: imports actors.orchestrator (orchestrator)"]


def test_the_binding_kit_never_borrows_from_the_test_peers_package() -> None:
    """``actors/peers`` installs and runs real agents for tests; a binding needing it
    would make the product depend on test infrastructure (it once held kill_process_group)."""
    bad = [f"{module}, line {line}: imports {name}"
           for module, path in all_modules().items() if module.startswith("actors.bindings")
           for line, name in imports_of(path) if name.startswith("trio_cap.actors.peers")]
    assert not bad, "\n".join(bad)
