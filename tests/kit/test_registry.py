"""Bindings are found by name through entry points; a broken plug-in breaks only itself.

The end-to-end test installs ``tests/kit/plugin/tcap_lines`` as its own
distribution — a ``*.dist-info`` with ``entry_points.txt`` next to the
package on ``sys.path`` of a fresh interpreter, exactly what pip leaves —
and runs a whole session over it with ``open_orchestrator``: trio-cap is not
edited or told about it in any other way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from importlib.metadata import EntryPoint, distributions
from pathlib import Path

import pytest

from trio_cap.actors.bindings.inproc import InprocConnector
from trio_cap.actors.bindings.registry import (
    BUILTIN,
    GROUP,
    BindingLoadFailed,
    ConnectorRegistry,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PLUGIN = HERE / "plugin"


def make_dist(where: Path, name: str, entry_points: dict[str, str]) -> None:
    """A minimal installed distribution: what pip writes for a package with entry points."""
    info = where / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{lines}")


def eps_of(where: Path) -> list[EntryPoint]:
    return [ep for dist in distributions(path=[str(where)]) for ep in dist.entry_points
            if ep.group == GROUP]


def test_pyproject_declares_exactly_the_builtin_bindings() -> None:
    """BUILTIN is the fallback for a checkout without metadata: it must say what pyproject says."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"][GROUP] == BUILTIN


def test_our_bindings_are_found_even_without_installed_metadata() -> None:
    registry = ConnectorRegistry(eps=[])
    assert set(registry) == {"inproc", "stream-json", "acp", "pty", "a2a"}
    assert isinstance(registry["inproc"], InprocConnector)
    assert registry.why_unavailable("inproc") is None
    why = registry.why_unavailable("grpc")
    assert why == "the grpc binding is not in this build of trio-cap yet"
    assert "grpc" not in registry and registry.get("grpc") is None


def test_explicit_connectors_override_and_can_be_removed() -> None:
    registry = ConnectorRegistry(eps=[])
    mine = InprocConnector()
    registry["stream-json"] = mine
    registry.update({"x-mine": mine})
    assert registry["stream-json"] is mine and registry["x-mine"] is mine
    del registry["x-mine"]
    assert "x-mine" not in registry
    with pytest.raises(KeyError):
        del registry["x-mine"]


@pytest.mark.parametrize(("value", "why"), [
    ("tcap_no_such_module:Connector", "ModuleNotFoundError"),
    ("json:NoSuchName", "AttributeError"),
    ("json:dumps", "TypeError"),  # a factory that needs arguments
    ("json:__doc__", "has no open() method"),  # neither a class, a factory nor a connector
])
def test_a_broken_plugin_is_reported_when_chosen_and_breaks_nothing_else(
        tmp_path: Path, value: str, why: str) -> None:
    make_dist(tmp_path, "tcap-broken", {"x-broken": value})
    registry = ConnectorRegistry(eps=eps_of(tmp_path))  # constructing it never raises
    assert "x-broken" in registry
    with pytest.warns(RuntimeWarning, match="binding x-broken failed to load"):
        reason = registry.why_unavailable("x-broken")
    assert reason is not None and reason.startswith("binding x-broken failed to load")
    assert why in reason and value in reason
    with pytest.raises(BindingLoadFailed):
        registry["x-broken"]
    assert registry.get("x-broken") is None
    assert registry.why_unavailable("inproc") is None
    assert set(registry.problems()) == {"x-broken"}


def test_a_plugin_cannot_silently_replace_ours_and_two_claims_are_refused(tmp_path: Path) -> None:
    make_dist(tmp_path, "tcap-evil", {"stream-json": "tcap_evil:Connector",
                                      "x-dup": "tcap_a:Connector"})
    make_dist(tmp_path, "tcap-other", {"x-dup": "tcap_b:Connector"})
    registry = ConnectorRegistry(eps=eps_of(tmp_path))
    assert registry.why_unavailable("stream-json") is None  # ours, not tcap_evil
    problems = registry.problems()
    assert "tcap-evil" in problems["stream-json"] and "ignored" in problems["stream-json"]
    reason = registry.why_unavailable("x-dup")
    assert reason is not None and "several plug-ins" in reason
    assert "tcap-evil" in reason and "tcap-other" in reason


SESSION = """
import json, sys, warnings
import trio
from trio_cap.actors.orchestrator import open_orchestrator

async def main():
    out = {}
    with trio.fail_after(60):
        await run(out)
    print(json.dumps(out))

async def run(out):
    async with open_orchestrator() as orch:
        session = await orch.start_session(sys.argv[1], binding="x-lines", cwd=sys.argv[2])
        turn = await session.run_turn("hello plug-in")
        view = await session.close()
        out["lines"] = [turn.text, turn.stop_reason, view.status, view.binding]
        with warnings.catch_warnings(record=True):
            broken = await orch.start_session(sys.argv[1], binding="x-broken", cwd=sys.argv[2])
            view = await broken.wait_terminal()
        out["broken"] = [view.status, view.last_error]
        inproc = await orch.start_session(cwd=sys.argv[2], binding="inproc")
        turn = await inproc.run_turn("still here")
        await inproc.close()
        out["inproc"] = turn.text

trio.run(main)
"""


def test_a_third_party_binding_runs_a_session_end_to_end(tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(PLUGIN / "tcap_lines", site / "tcap_lines")
    make_dist(site, "tcap-lines", {"x-lines": "tcap_lines:LinesConnector",
                                   "x-broken": "tcap_missing_module:Nope"})
    agent = f"pty:{sys.executable} {PLUGIN / 'lines_agent.py'}"
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(SESSION), agent,
                             str(tmp_path)], capture_output=True, text=True, env=env,
                            timeout=90, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    text, stop, status, binding = out["lines"]
    assert text == "HELLO PLUG-IN" and stop == "end_turn"
    assert status == "completed" and binding == "x-lines"
    status, error = out["broken"]
    assert status == "failed"
    assert "binding x-broken failed to load" in error and "ModuleNotFoundError" in error
    assert "still here" in out["inproc"]


async def test_an_embedding_app_passes_its_own_connectors(tmp_path: Path) -> None:
    from trio_cap.actors.orchestrator import open_orchestrator

    class Counting(InprocConnector):
        opened = 0

        def open(self, spec, deliver):
            Counting.opened += 1
            return super().open(spec, deliver)

    async with open_orchestrator(connectors={"inproc": Counting()}) as orch:
        session = await orch.start_session(cwd=tmp_path, binding="inproc")
        turn = await session.run_turn("hello")
        await session.close()
        assert orch.connectors.why_unavailable("stream-json") is None  # the rest stay
    assert Counting.opened == 1 and "hello" in turn.text
