"""``--agent codex``: ACP through the real codex-acp when it is there, else Codex's TUI.

The bundled ``codex`` manifest prefers ``acp_stdio = ["codex-acp"]`` and falls
back to the ``codex`` TUI over the PTY binding.  With both installed (``cap
peers install codex codex-acp``) a turn runs over ACP and nothing falls back;
with codex-acp missing from PATH the session logs ``binding.fallback`` (acp →
pty) and the same turn runs in the TUI.  Both on the scripted model server; a
missing peer fails, never skips.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import trio

from tests.harness.conftest import PeerFactory
from trio_cap.actors.bindings.acp.connector import AcpConnector
from trio_cap.actors.bindings.process import live_groups
from trio_cap.actors.bindings.pty.connector import PtyConnector
from trio_cap.actors.model_server import ModelServer, script_from_obj
from trio_cap.actors.orchestrator import Orchestrator, open_orchestrator
from trio_cap.actors.peers.catalog import PEERS
from trio_cap.actors.peers.install import bin_dir, peers_root
from trio_cap.events.kinds import BindingFallback, CapSessionReady, SessionStarting

pytestmark = pytest.mark.peers

SECONDS = 240
REPLY = "codex answered through trio-cap"
SCRIPT = {"rules": [{"match": "zzhello", "text": REPLY}]}
# codex's workspace-write sandbox needs bubblewrap, which this machine lacks (as in
# test_real_agents.py); trio-cap's policy reviews the commands instead
ACP_OPTIONS = {"acp_args": ["-c", 'sandbox_mode="danger-full-access"']}


def log_of(orch: Orchestrator, session_id: str, kind: type) -> list[Any]:
    return [env.event for env in orch.log.read(1, session_id) if type(env.event) is kind]


def on_path(*names: str, rest: str) -> str:
    dirs = [str(bin_dir(PEERS[name], peers_root())) for name in names]
    return os.pathsep.join([*dirs, rest])


async def test_agent_codex_runs_a_turn_over_acp_through_codex_acp(
        peer: PeerFactory, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch) -> None:
    peer("codex")  # both programs installed, as `cap peers install` leaves them
    penv, workdir = peer("codex-acp")
    path = on_path("codex-acp", "codex", rest=penv.env["PATH"])
    env = {**penv.env, "PATH": path}
    monkeypatch.setenv("PATH", path)
    model_server.set_script(script_from_obj(SCRIPT))
    before = set(live_groups())
    async with open_orchestrator(grace=10.0) as orch:
        orch.connectors["acp"] = AcpConnector(env=env, inherit_env=False)
        with trio.fail_after(SECONDS):
            session = await orch.start_session("codex", cwd=workdir, permissions="allow",
                                               options=ACP_OPTIONS)  # no binding forced
            turn = await session.run_turn("please say zzhello")
            view = await session.close()
    assert (turn.stop_reason, turn.text.strip()) == ("end_turn", REPLY), turn
    assert view.status == "completed"
    assert [s.binding for s in log_of(orch, session.id, SessionStarting)] == ["acp"]
    assert log_of(orch, session.id, BindingFallback) == []
    ready = log_of(orch, session.id, CapSessionReady)[0]
    assert ready.meta["acp"]["protocol_version"] == 1
    assert "codex" in ready.meta["acp"]["agent"]["name"]
    assert set(live_groups()) <= before  # codex-acp ignores stdin EOF: its group was ended


async def test_agent_codex_falls_back_to_its_tui_without_codex_acp(
        peer: PeerFactory, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # the TUI opens on a model migration screen with its default model (test_real_tuis.py)
    penv, workdir = peer("codex", model="fake-model")
    assert "codex-acp" not in penv.env["PATH"]
    monkeypatch.setenv("PATH", penv.env["PATH"])
    model_server.set_script(script_from_obj(SCRIPT))
    async with open_orchestrator(grace=10.0) as orch:
        orch.connectors["acp"] = AcpConnector(env=penv.env, inherit_env=False)
        orch.connectors["pty"] = PtyConnector(env=penv.env, inherit_env=False)
        with trio.fail_after(SECONDS):
            session = await orch.start_session("codex", cwd=workdir, permissions="allow")
            turn = await session.run_turn("please say zzhello")
            view = await session.close()
    (fallback,) = log_of(orch, session.id, BindingFallback)
    assert (fallback.failed, fallback.next) == ("acp", "pty")
    assert "codex-acp" in fallback.reason
    assert [s.binding for s in log_of(orch, session.id, SessionStarting)] == ["pty"]
    assert (turn.stop_reason, turn.text.strip()) == ("end_turn", REPLY), turn
    assert view.status == "completed"

