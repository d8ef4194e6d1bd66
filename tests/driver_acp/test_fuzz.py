"""Hypothesis: any bytes into the ACP client machine give typed outputs, never an exception."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.driver_acp.acp_lib import CWD, ClientOptions, ready_client
from trio_cap.actors.bindings.acp.machine import AcpClient, Serve, Withdraw
from trio_cap.actors.bindings.base import ToAgent, TurnEnded
from trio_cap.events.kinds import Event

OUTPUTS = (Event, ToAgent, TurnEnded, Serve, Withdraw)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12)
METHODS = ["session/update", "session/request_permission", "fs/read_text_file",
           "fs/write_text_file", "terminal/create", "terminal/output", "elicitation/create",
           "$/cancel_request", "_x"]
KINDS = ["agent_message_chunk", "tool_call", "tool_call_update", "plan", "usage_update",
         "current_mode_update", "available_commands_update", "config_option_update",
         "session_info_update", "user_message_chunk", "agent_thought_chunk", "nope"]


@st.composite
def messages(draw: st.DrawFn) -> bytes:
    shape = draw(st.sampled_from(["request", "notification", "response", "update", "junk"]))
    if shape == "junk":
        return draw(st.binary(max_size=200)) + b"\n"
    msg: dict[str, object] = {"jsonrpc": draw(st.sampled_from(["2.0", "2.0", "1.0"]))}
    if shape in ("request", "response"):
        msg["id"] = draw(st.integers(0, 5) | st.text(max_size=3) | st.none())
    if shape == "response":
        msg[draw(st.sampled_from(["result", "error"]))] = draw(json_values)
    elif shape == "update":
        msg["method"] = "session/update"
        msg["params"] = {"sessionId": draw(st.sampled_from(["s1", "s2"])),
                         "update": {"sessionUpdate": draw(st.sampled_from(KINDS)),
                                    **draw(st.dictionaries(st.sampled_from(
                                        ["content", "toolCallId", "title", "status", "entries",
                                         "used", "size", "cost", "messageId", "locations",
                                         "availableCommands", "configOptions", "modeId"]),
                                        json_values, max_size=5))}}
    else:
        msg["method"] = draw(st.sampled_from(METHODS))
        msg["params"] = draw(json_values)
    return json.dumps(msg).encode() + b"\n"


def check(outputs: list[object]) -> None:
    for o in outputs:
        assert isinstance(o, OUTPUTS), o


@settings(max_examples=300, deadline=None)
@given(st.lists(messages(), max_size=12), st.integers(1, 64))
def test_messages_in_any_chunking_never_raise(lines: list[bytes], chunk: int) -> None:
    client, _ = ready_client()
    data = b"".join(lines)
    for i in range(0, len(data), chunk):
        check(client.receive_data(data[i:i + chunk]))
    check(client.receive_eof())


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000))
def test_random_bytes_before_the_handshake_never_raise(data: bytes) -> None:
    client = AcpClient(ClientOptions(cwd=CWD))
    client.initialize()
    check(client.receive_data(data))
    check(client.receive_eof())
