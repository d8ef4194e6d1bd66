"""Client machine cases issue 11 names beyond machine.py's rule table: lines up to the
32 MiB limit, where the authenticate method and the session mode come from, the
bypass mode mapping, available commands recorded, and ``reject_always`` as the
only way an agent offers to say no.  Sans-io: wire lines in, outputs out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.driver_acp.acp_lib import (
    CWD,
    acp_manifest_toml,
    line,
    of,
    prompt,
    ready_client,
    request,
    result,
    turn_ends,
    update,
    written,
)
from trio_cap.actors.bindings.acp import frames as f
from trio_cap.actors.bindings.acp.connector import AUTH_ENV, AcpConnector
from trio_cap.actors.bindings.acp.machine import AcpClient, ClientState
from trio_cap.actors.connection import AgentSpec
from trio_cap.actors.manifest import parse_manifest
from trio_cap.events.kinds import (
    AgentRaw,
    CapError,
    CapSessionReady,
    PermissionRequest,
    PermissionResponse,
    SessionConfig,
    TextChunk,
)

MIB = 1024 * 1024
READ = 64 * 1024  # what the connector's pump hands the machine at a time


def feed(client: AcpClient, data: bytes, size: int = READ) -> list[Any]:
    """``data`` as the pipe delivers it: in reads of ``size`` bytes."""
    out: list[Any] = []
    for start in range(0, len(data), size):
        out += client.receive_data(data[start:start + size])
    return out


# ---- lines up to 32 MiB ---------------------------------------------------------------------


def test_a_20_mib_update_and_a_20_mib_result_are_accepted() -> None:
    client, _ = ready_client()
    pid = prompt(client)
    text = "é" * (10 * MIB)  # 20 MiB of UTF-8 on one line
    chunk = json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk",
                                      "content": {"type": "text", "text": text}}}},
        ensure_ascii=False).encode() + b"\n"
    assert 20 * MIB < len(chunk) < f.MAX_LINE
    out = feed(client, chunk)
    (got,) = of(out, TextChunk)
    assert got.text == text
    assert not of(out, CapError)
    meta = {"blob": "x" * (20 * MIB)}
    answer = result(pid, {"stopReason": "end_turn", "_meta": meta})
    assert len(answer) > 20 * MIB
    out = feed(client, answer)
    assert turn_ends(out) == ["end_turn"] and not of(out, CapError)


def test_a_line_over_32_mib_is_a_parse_error_and_the_next_line_still_counts() -> None:
    client, _ = ready_client()
    pid = prompt(client)
    over = update("agent_message_chunk", content={"type": "text",
                                                  "text": "y" * (f.MAX_LINE + 10)})
    assert len(over) > f.MAX_LINE
    after = update("agent_message_chunk", content={"type": "text", "text": "still here"})
    out = feed(client, over + after + result(pid, {"stopReason": "end_turn"}))
    (problem,) = of(out, CapError)
    assert problem.code == "parse_failed" and str(f.MAX_LINE) in problem.message
    assert [t.text for t in of(out, TextChunk)] == ["still here"]
    assert turn_ends(out) == ["end_turn"]
    assert client.state is ClientState.READY


# ---- where the authenticate method and the mode come from (connector.options_for) ------------


def spec(tmp_path: Path, x_acp: str = "", permission_mode: str = "interactive",
         **options: Any) -> AgentSpec:
    # the argv the connector is given; the manifest's own command is not run here
    text = acp_manifest_toml("acp-demo", ["demo", "acp"], ready="^> ", x_acp=x_acp)
    manifest = parse_manifest(text, "acp-demo")
    config = SessionConfig(cwd=str(tmp_path), permission_mode=permission_mode)  # type: ignore[arg-type]
    return AgentSpec(name="acp-demo", binding="acp", config=config, argv=("demo", "acp"),
                     options={"manifest": manifest, **options})


def test_the_auth_method_comes_from_options_then_env_then_manifest(tmp_path: Path) -> None:
    connector = AcpConnector()
    in_manifest = spec(tmp_path, 'auth-method = "from-manifest"')
    assert connector.options_for(in_manifest, {}).auth_method == "from-manifest"
    assert connector.options_for(in_manifest, {AUTH_ENV: "from-env"}).auth_method == "from-env"
    assert connector.options_for(spec(tmp_path), {AUTH_ENV: "from-env"}).auth_method == \
        "from-env"
    chosen = spec(tmp_path, 'auth-method = "from-manifest"', acp_auth_method="from-options")
    assert connector.options_for(chosen, {AUTH_ENV: "from-env"}).auth_method == "from-options"
    assert connector.options_for(spec(tmp_path), {}).auth_method is None
    # the env the agent gets is where the variable is read: options["env"] counts too
    env_spec = spec(tmp_path, env={AUTH_ENV: "via-session-env"})
    assert connector.options_for(env_spec, connector._env(env_spec)).auth_method == \
        "via-session-env"


def test_the_mode_comes_from_options_or_the_bypass_mapping(tmp_path: Path) -> None:
    connector = AcpConnector()
    bypass = 'bypass-mode = "yolo"'
    assert connector.options_for(spec(tmp_path, bypass), {}).mode is None
    assert connector.options_for(spec(tmp_path, bypass, "none"), {}).mode == "yolo"
    assert connector.options_for(spec(tmp_path, "", "none"), {}).mode is None
    chosen = spec(tmp_path, bypass, "none", acp_mode="plan")
    assert connector.options_for(chosen, {}).mode == "plan"  # the embedder's choice wins
    assert connector.options_for(spec(tmp_path, acp_mode="plan"), {}).mode == "plan"


# ---- modes in the handshake --------------------------------------------------------------------

MODES = {"currentModeId": "default", "availableModes": [
    {"id": "default", "name": "Default"}, {"id": "plan", "name": "Plan"},
    {"id": "yolo", "name": "Bypass"}]}


def test_a_chosen_mode_is_set_with_session_set_mode_before_ready() -> None:
    client, out = ready_client(new={"sessionId": "s1", "modes": MODES}, mode="yolo")
    sent = written(out)
    assert sent[-1]["method"] == "session/set_mode"
    assert sent[-1]["params"] == {"sessionId": "s1", "modeId": "yolo"}
    assert not of(out, CapSessionReady) and client.state is ClientState.CONFIGURING
    out = client.receive_data(result(sent[-1]["id"], {}))
    (ready,) = of(out, CapSessionReady)
    assert ready.meta["acp"]["mode"] == "yolo"
    assert ready.meta["acp"]["modes"] == ["default", "plan", "yolo"]
    assert client.state is ClientState.READY


def test_the_current_mode_or_one_not_offered_sends_no_set_mode() -> None:
    _, out = ready_client(new={"sessionId": "s1", "modes": MODES}, mode="default")
    assert [m["method"] for m in written(out)][-1] == "session/new"
    assert of(out, CapSessionReady)
    _, out = ready_client(new={"sessionId": "s1", "modes": MODES}, mode="warp")
    assert "session/set_mode" not in [m["method"] for m in written(out)]
    assert [r.reason for r in of(out, AgentRaw)] == ["mode_not_applied"]
    assert of(out, CapSessionReady)


def test_a_refused_set_mode_is_recorded_and_the_session_still_opens() -> None:
    client, out = ready_client(new={"sessionId": "s1", "modes": MODES}, mode="plan")
    sent = written(out)[-1]
    assert sent["method"] == "session/set_mode"
    out = client.receive_data(line({"jsonrpc": "2.0", "id": sent["id"],
                                    "error": {"code": -32603, "message": "no"}}))
    (ready,) = of(out, CapSessionReady)
    assert client.state is ClientState.READY
    assert [r.reason for r in of(out, AgentRaw)] == ["config_refused"]
    assert ready.meta["acp"]["mode"] == "default"  # the agent's mode, not the one asked for


# ---- available commands and reject_always ----------------------------------------------------


def test_available_commands_update_is_recorded() -> None:
    client, _ = ready_client()
    commands = [{"name": "create_plan", "description": "Plan the work"},
                {"name": "test", "description": "Run the tests", "input": {"hint": "which"}}]
    for live in (False, True):  # between turns and during one
        if live:
            prompt(client)
        out = client.receive_data(update("available_commands_update",
                                         availableCommands=commands))
        (rec,) = of(out, AgentRaw)
        assert rec.reason == "available_commands"
        body = json.loads(rec.text)
        assert [c["name"] for c in body["availableCommands"]] == ["create_plan", "test"]
        assert body["availableCommands"][1]["input"] == {"hint": "which"}


@pytest.mark.parametrize(("decision", "option"), [("deny", "never"), ("allow_once", "once")])
def test_reject_always_is_chosen_when_no_reject_once_is_offered(decision: str,
                                                                option: str) -> None:
    client, _ = ready_client()
    prompt(client)
    params = {"sessionId": "s1",
              "toolCall": {"toolCallId": "c1", "title": "Edit", "kind": "edit",
                           "rawInput": {"path": f"{CWD}/a"}},
              "options": [{"optionId": "once", "name": "Allow", "kind": "allow_once"},
                          {"optionId": "never", "name": "Never", "kind": "reject_always"}]}
    (req,) = of(client.receive_data(request(7, "session/request_permission", params)),
                PermissionRequest)
    out = client.send(PermissionResponse(req_id=req.req_id, decision=decision))  # type: ignore[arg-type]
    assert written(out) == [{"jsonrpc": "2.0", "id": 7, "result": {
        "outcome": {"outcome": "selected", "optionId": option}}}]

