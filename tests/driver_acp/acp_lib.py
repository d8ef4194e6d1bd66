"""Helpers for driving the ACP client machine by hand: wire lines in, outputs out."""

from __future__ import annotations

import json
from typing import Any

from trio_cap.actors.bindings.acp.machine import AcpClient, ClientOptions, Serve
from trio_cap.actors.bindings.base import ToAgent, TurnEnded
from trio_cap.events.kinds import Event

CWD = "/work/space"


def line(obj: Any) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def result(id: Any, value: Any) -> bytes:
    return line({"jsonrpc": "2.0", "id": id, "result": value})


def error(id: Any, code: int, message: str) -> bytes:
    return line({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})


def request(id: Any, method: str, params: Any) -> bytes:
    return line({"jsonrpc": "2.0", "id": id, "method": method, "params": params})


def notify(method: str, params: Any) -> bytes:
    return line({"jsonrpc": "2.0", "method": method, "params": params})


def update(update_kind: str, session: str = "s1", /, **fields: Any) -> bytes:
    return notify("session/update", {"sessionId": session,
                                     "update": {"sessionUpdate": update_kind, **fields}})


def written(outputs: list[Any]) -> list[dict[str, Any]]:
    """The JSON messages a step wrote to the agent, decoded."""
    out = []
    for o in outputs:
        if isinstance(o, ToAgent):
            out += [json.loads(x) for x in o.data.splitlines() if x.strip()]
    return out


def events(outputs: list[Any]) -> list[Event]:
    return [o for o in outputs if isinstance(o, Event)]


def of(outputs: list[Any], kind: type) -> list[Any]:
    return [o for o in outputs if type(o) is kind]


def turn_ends(outputs: list[Any]) -> list[str]:
    return [o.stop_reason for o in outputs if isinstance(o, TurnEnded)]


def serves(outputs: list[Any]) -> list[Serve]:
    return [o for o in outputs if isinstance(o, Serve)]


INIT_RESULT = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}


def ready_client(init: dict[str, Any] | None = None, new: dict[str, Any] | None = None,
                 **options: Any) -> tuple[AcpClient, list[Any]]:
    """A client through initialize and session/new (session id ``s1``)."""
    client = AcpClient(ClientOptions(cwd=CWD, **options))
    client.initialize()
    out = client.receive_data(result(0, init or INIT_RESULT))
    sent = written(out)
    assert sent and sent[-1]["method"] in ("session/new", "authenticate", "session/load"), sent
    if sent[-1]["method"] != "session/new":
        return client, out
    out += client.receive_data(result(sent[-1]["id"], new or {"sessionId": "s1"}))
    return client, out


def prompt(client: AcpClient, text: str = "hi") -> int:
    from trio_cap.events.kinds import ContentBlock, UserInputInject

    sent = written(client.send(UserInputInject(content=(ContentBlock(text=text),))))
    assert sent[-1]["method"] == "session/prompt", sent
    return sent[-1]["id"]


__all__ = ["CWD", "ClientOptions"]


def acp_manifest_toml(name: str, command: list[str], *, ready: str, x_acp: str = "") -> str:
    """A minimal manifest of an ACP agent started as ``command``, with its ``[x-acp]`` table."""
    return f"""
[agent]
name = "{name}"
binary = {json.dumps(command[0])}
profiles = []

[startup]
command = {json.dumps(command)}
ready_when = {{ pattern = {json.dumps(ready)} }}

[fast_path]
acp_stdio = {json.dumps(command)}

[pty]
cols = 80
rows = 24

[capabilities]
streaming_output = true

[x-acp]
{x_acp}
"""
