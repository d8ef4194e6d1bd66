"""The ACP agent-side machine under random input: it never raises, and rule 1 holds.

Random bytes, random client messages (every method, random params, answers to
real and made-up ids), the byte stream cut anywhere, and any CAP event a core
could emit, interleaved with turn ends, tool-host calls, core failures and EOF.
Whatever comes in, the machine returns only its typed effects, writes only
whole JSON lines, answers each prompt at most once, and shows nothing of a
session's answered turn until that session's next prompt or load.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.agent_acp.harness import Harness
from tests.strategies import events
from trio_cap.actors.bindings.acp import frames as f
from trio_cap.actors.bindings.base import TurnEnded
from trio_cap.events.kinds import PermissionRequest

METHODS = ("initialize", "session/new", "session/load", "session/prompt", "session/cancel",
           "session/set_mode", "session/close", "authenticate", "session/resume",
           "no/such", "_ext/x", "$/cancel_request")
SIDS = ("s1", "s1", "s2", "nope")
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                           max_leaves=8)
blocks = st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=20)})
params = st.one_of(
    st.fixed_dictionaries({"sessionId": st.sampled_from(SIDS), "prompt": st.lists(blocks,
                                                                                  max_size=2)}),
    st.fixed_dictionaries({"cwd": st.sampled_from(["/w", "rel"]), "mcpServers": st.just([])}),
    st.fixed_dictionaries({"sessionId": st.sampled_from(SIDS), "cwd": st.just("/w"),
                           "mcpServers": st.just([])}),
    st.fixed_dictionaries({"sessionId": st.sampled_from(SIDS),
                           "modeId": st.sampled_from(["plan", "x"])}),
    st.fixed_dictionaries({"protocolVersion": st.integers(0, 3), "clientCapabilities":
                           st.fixed_dictionaries({"terminal": st.booleans(),
                                                  "fs": st.fixed_dictionaries({
                                                      "readTextFile": st.booleans(),
                                                      "writeTextFile": st.booleans()})})}),
    st.dictionaries(st.text(max_size=8), json_values, max_size=3))
ids = st.one_of(st.integers(0, 6), st.sampled_from(["a", "0"]), st.none())


@st.composite
def client_message(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["request", "notification", "answer", "garbage"]))
    if kind == "garbage":
        return draw(st.binary(max_size=40)) + b"\n"
    message: dict[str, Any] = {"jsonrpc": "2.0"}
    if kind == "answer":
        message["id"] = draw(ids)
        if draw(st.booleans()):
            message["result"] = draw(st.one_of(json_values, st.just(
                {"outcome": {"outcome": "selected", "optionId": "allow_once"}})))
        else:
            message["error"] = {"code": draw(st.integers(-32800, -32000)), "message": "x"}
    else:
        message["method"] = draw(st.sampled_from(METHODS))
        message["params"] = draw(params)
        if kind == "request":
            message["id"] = draw(ids)
    return json.dumps(message).encode() + b"\n"


step = st.one_of(
    st.tuples(st.just("data"), client_message()),
    st.tuples(st.just("prompt"), st.sampled_from(SIDS), st.text(max_size=10)),
    st.tuples(st.just("cancel"), st.sampled_from(SIDS)),
    st.tuples(st.just("reply"), st.sampled_from([
        {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
        {"outcome": {"outcome": "cancelled"}}, {"content": "x"}, {"terminalId": "t"}, {}])),
    st.tuples(st.just("core"), st.sampled_from(SIDS), st.lists(st.one_of(events(), st.just(
        PermissionRequest(req_id="perm_1", tool="Write", intent={"path": "a"}))), max_size=3)),
    st.tuples(st.just("end"), st.sampled_from(SIDS),
              st.sampled_from(["end_turn", "cancelled", "error", "tool_use"])),
    st.tuples(st.just("call"), st.sampled_from(SIDS),
              st.sampled_from([f.FS_READ, f.TERMINAL_CREATE, f.TERMINAL_RELEASE])),
    st.tuples(st.just("failed"), st.sampled_from(SIDS)),
    st.tuples(st.just("file"), st.sampled_from(SIDS)))


class Rule1:
    """Tracks prompts fed and lines written; fails on an update of an answered turn."""

    def __init__(self) -> None:
        self.prompts: dict[Any, str] = {}  # open prompt request id → session
        self.answered: set[str] = set()  # sessions whose last turn was answered

    def fed(self, data: bytes) -> None:
        try:
            decoded = json.loads(data)
        except ValueError:
            return
        if not isinstance(decoded, dict) or not isinstance(decoded.get("params"), dict):
            return
        if decoded.get("method") in ("session/prompt", "session/load"):
            sid = str(decoded["params"].get("sessionId"))
            self.answered.discard(sid)
            if decoded["method"] == "session/prompt" and "id" in decoded:
                self.prompts.setdefault(decoded["id"], sid)

    def written(self, lines: list[dict[str, Any]]) -> None:
        for line in lines:
            if line.get("method") == "session/update":
                assert line["params"]["sessionId"] not in self.answered, line
            elif "method" not in line and line.get("id") in self.prompts and (
                    "stopReason" in str(line.get("result")) or "error" in line):
                self.answered.add(self.prompts.pop(line["id"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, max_size=25), st.integers(1, 64))
def test_random_input_never_raises_and_nothing_follows_a_prompt_response(
        steps: list[tuple[Any, ...]], cut: int) -> None:
    h = Harness()
    rule = Rule1()
    h.feed(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n',
           b'{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/w",'
           b'"mcpServers":[]}}\n')
    tickets = prompt_id = 0
    for item in steps:
        match item:
            case ("data", data):
                # the same bytes in two reads cut anywhere: the framer keeps the tail
                rule.fed(data)
                lines = h.feed(data[:cut]) + h.feed(data[cut:])
            case ("prompt", sid, text):
                prompt_id += 1
                data = json.dumps({"jsonrpc": "2.0", "id": f"p{prompt_id}",
                                   "method": "session/prompt", "params": {
                                       "sessionId": sid, "prompt": [
                                           {"type": "text", "text": text}]}}).encode() + b"\n"
                rule.fed(data)
                lines = h.feed(data)
            case ("cancel", sid):
                lines = h.feed(json.dumps({"jsonrpc": "2.0", "method": "session/cancel",
                                           "params": {"sessionId": sid}}).encode() + b"\n")
            case ("reply", result):
                asked = [m["id"] for m in h.lines if "method" in m and "id" in m]
                lines = h.answer(asked[-1], result) if asked else []
            case ("core", sid, evs):
                lines = h.core(sid, *evs)
            case ("end", sid, stop):
                lines = h.core(sid, TurnEnded(stop))
            case ("call", sid, method):
                tickets += 1
                lines = h.run(h.machine.client_call(tickets, sid, method, {"sessionId": sid}))
            case ("failed", sid):
                lines = h.run(h.machine.core_failed(sid, "gone"))
            case _:
                lines = h.run(h.machine.file_changed(item[1], "/w/a", None, "x"))
        rule.written(lines)
    h.run(h.machine.receive_eof())
    assert h.finished == 0
    assert h.machine.receive_data(b'{"jsonrpc":"2.0","id":9,"method":"initialize"}\n') == []
