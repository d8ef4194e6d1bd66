"""The publisher's HTTP surface with hostile or unusual input: every answer is the right JSON-RPC
error (or HTTP status), never a 500 or a traceback, and the server goes on serving.

Raw ``httpx`` (under Trio) sends exactly the bytes each case needs; the SDK
client would never send most of them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from tests.serve_a2a.conftest import TOKEN, publish
from trio_cap.actors.bindings.a2a.serve_app import RPC_PATH

V1 = {"A2A-Version": "1.0"}


def _send(text: str, method: str = "message/stream") -> dict[str, Any]:
    if method[0].isupper():
        message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]}
    else:
        message = {"kind": "message", "messageId": "m1", "role": "user",
                   "parts": [{"kind": "text", "text": text}]}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}


def _events(body: str) -> list[tuple[int | None, dict[str, Any]]]:
    out = []
    for block in body.split("\n\n"):
        lines = block.strip().splitlines()
        data = [ln[6:] for ln in lines if ln.startswith("data: ")]
        ids = [int(ln[4:]) for ln in lines if ln.startswith("id: ")]
        if data:
            out.append((ids[0] if ids else None, json.loads(data[0])))
    return out


CASES: list[tuple[str, bytes, dict[str, str], int, Any]] = [
    ("not JSON", b"{oops", {}, -32700, None),
    ("not UTF-8", b'{"jsonrpc":"2.0","id":1,"method":"\xff"}', {}, -32700, None),
    ("a batch", b"[]", {}, -32600, None),
    ("a number", b"42", {}, -32600, None),
    ("no jsonrpc", b'{"id":1,"method":"tasks/get"}', {}, -32600, 1),
    ("a boolean id", b'{"jsonrpc":"2.0","id":true,"method":"tasks/get"}', {}, -32600, None),
    ("params a string", b'{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":"x"}', {},
     -32600, 2),
    ("a response", b'{"jsonrpc":"2.0","id":3,"result":{}}', {}, -32600, 3),
    ("an unknown method", b'{"jsonrpc":"2.0","id":4,"method":"tasks/explode"}', {}, -32601, 4),
    ("draft params missing", b'{"jsonrpc":"2.0","id":5,"method":"message/send","params":{}}',
     {}, -32602, 5),
    ("v1 params of the wrong type",
     b'{"jsonrpc":"2.0","id":6,"method":"GetTask","params":{"id":7}}', V1, -32602, 6),
    ("a v1 method with a draft version",
     b'{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"x"}}',
     {"A2A-Version": "0.3"}, -32009, 7),
    ("an unknown version", b'{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"id":"x"}}',
     {"A2A-Version": "9.0"}, -32009, 8),
    ("an unknown task", b'{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"id":"x"}}',
     {}, -32001, 9),
    ("push notifications", b'{"jsonrpc":"2.0","id":10,"method":'
     b'"tasks/pushNotificationConfig/set","params":{}}', {}, -32003, 10),
    ("a file part", json.dumps({"jsonrpc": "2.0", "id": 11, "method": "message/send",
                                "params": {"message": {"kind": "message", "messageId": "m",
                                                       "role": "user", "parts": [
                                    {"kind": "file", "file": {"uri": "https://x/y"}}]}}}
                               ).encode(), {}, -32005, 11),
    ("an agent's message", json.dumps(_send("hi", "SendMessage") | {"id": 12}).replace(
        "ROLE_USER", "ROLE_AGENT").encode(), V1, -32602, 12),
    ("deeply nested", b'{"jsonrpc":"2.0","id":13,"method":"message/send","params":'
     + b'[' * 5000 + b']' * 5000 + b'}', {}, -32700, None),  # the kit: too deep to parse
]


async def test_malformed_bodies_get_the_right_errors(tmp_path: Path) -> None:
    async with publish(tmp_path) as pub, httpx.AsyncClient(base_url=pub.url) as http:
        for name, body, headers, code, request_id in CASES:
            response = await http.post(RPC_PATH, content=body, headers=headers)
            assert response.status_code == 200, (name, response.status_code, response.text)
            answer = response.json()
            assert answer["jsonrpc"] == "2.0", name
            assert answer["error"]["code"] == code, (name, answer)
            assert answer["id"] == request_id, (name, answer)
            assert answer["error"]["message"], name
            if headers.get("A2A-Version") == "1.0":  # v1: a list of typed details
                assert answer["error"]["data"][0]["@type"].endswith("ErrorInfo"), name
        # and it still serves
        done = await http.post(RPC_PATH, json=_send("still here", "message/send"))
        assert done.json()["result"]["status"]["state"] == "completed"


async def test_http_level_refusals(tmp_path: Path) -> None:
    async with publish(tmp_path, max_body=2048) as pub, \
            httpx.AsyncClient(base_url=pub.url) as http:
        big = await http.post(RPC_PATH, json=_send("x" * 4096, "message/send"))
        assert big.status_code == 413
        assert big.json()["error"]["code"] == -32600
        assert "limit" in big.json()["error"]["message"]
        assert (await http.get(RPC_PATH)).status_code == 405
        assert (await http.post("/elsewhere", json={})).status_code == 404
        notification = await http.post(RPC_PATH, json={"jsonrpc": "2.0", "method": "tasks/get",
                                                        "params": {"id": "x"}})
        assert notification.status_code == 204 and notification.content == b""
        for path in ("/.well-known/agent-card.json", "/.well-known/agent.json"):
            card = await http.get(path)
            assert card.status_code == 200
            assert card.json()["capabilities"]["extensions"][0]["uri"] == "cap-protocol/v1"


async def test_auth_refuses_before_reading_and_the_card_stays_public(tmp_path: Path) -> None:
    async with publish(tmp_path, tokens={TOKEN: "alice"}) as pub, \
            httpx.AsyncClient(base_url=pub.url) as http:
        for headers in ({}, {"Authorization": "Bearer nope-0123456789abcdef"},
                        {"Authorization": f"Basic {TOKEN}"}):
            refused = await http.post(RPC_PATH, json=_send("hi", "message/send"),
                                      headers=headers)
            assert refused.status_code == 401, headers
            assert refused.headers["www-authenticate"].startswith("Bearer")
        card = (await http.get("/.well-known/agent-card.json")).json()
        assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
        assert card["securityRequirements"] == [{"schemes": {"bearer": {"list": []}}}]
        ok = await http.post(RPC_PATH, json=_send("hi", "message/send"),
                             headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.json()["result"]["status"]["state"] == "completed"
        assert pub.orch.state.sessions.sessions  # only the authorised call made a session


async def test_the_card_lists_both_interfaces(tmp_path: Path) -> None:
    async with publish(tmp_path) as pub, httpx.AsyncClient(base_url=pub.url) as http:
        card = (await http.get("/.well-known/agent-card.json")).json()
    rpc = pub.url + RPC_PATH
    assert card["supportedInterfaces"] == [
        {"url": rpc, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": rpc, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}]
    assert (card["url"], card["preferredTransport"], card["protocolVersion"]) == (
        rpc, "JSONRPC", "0.3.0")
    assert card["name"] == "cap-agent" and card["capabilities"]["streaming"] is True


@pytest.mark.parametrize("method", ["message/stream", "SendStreamingMessage"])
async def test_sse_numbers_events_and_last_event_id_resumes(tmp_path: Path,
                                                          method: str) -> None:
    headers = V1 if method[0].isupper() else {}
    resubscribe = "SubscribeToTask" if headers else "tasks/resubscribe"
    async with publish(tmp_path) as pub, httpx.AsyncClient(base_url=pub.url,
                                                           timeout=60) as http:
        stream = await http.post(RPC_PATH, json=_send("ask: more? [yes|no]", method),
                                 headers=headers)
        assert stream.headers["content-type"].startswith("text/event-stream")
        events = _events(stream.text)
        numbered = [n for n, _ in events if n is not None]
        assert numbered == list(range(len(numbered)))  # 0, 1, 2 … after the snapshot
        first = events[0][1]["result"]
        task = first["task"] if headers else first
        again = await http.post(RPC_PATH, json={"jsonrpc": "2.0", "id": "r", "method":
                                                resubscribe, "params": {"id": task["id"]}},
                                headers={**headers, "Last-Event-ID": "0"})
        resumed = _events(again.text)
        assert [n for n, _ in resumed] == numbered[1:]  # after event 0, none twice
        assert all(e["id"] == "r" for _, e in resumed)  # the request's own id, exactly


async def test_include_raw_opts_a_subscriber_into_raw_bytes(tmp_path: Path) -> None:
    """Only the subscriber with ``?include_raw=1`` gets cap.pty.raw_bytes (fed into the
    machine here as the PTY binding logs them: cap-agent inproc has no screen)."""
    import trio

    from trio_cap.events.envelope import Envelope
    from trio_cap.events.kinds import (
        InputInjected,
        PtyRawBytes,
        SessionTurnEnded,
        SessionWorking,
        TextChunk,
    )

    async with publish(tmp_path) as pub, httpx.AsyncClient(base_url=pub.url,
                                                           timeout=60) as http:
        done = (await http.post(RPC_PATH, json=_send("hi", "message/send"))).json()["result"]
        context = done["contextId"]
        machine = pub.server.publisher.machine
        plan = machine.send("anonymous", _inbound("more", context))
        seq = 10_000
        first_seq = seq + 1

        def feed(*events: Any) -> None:
            nonlocal seq
            envs = []
            for event in events:  # the turn's events name the input as their cause
                seq += 1
                cause = None if isinstance(event, InputInjected) else first_seq
                envs.append(Envelope(seq, 1.0, context, cause, event))
            pub.server.publisher._publish(machine.on_envelopes(context, envs))

        feed(InputInjected(text="more", source=f"a2a:{plan.task_id}"), SessionWorking(turn=2),
             PtyRawBytes(bytes_b64="aGk="), TextChunk(message_id="t", text="screen"))
        bodies: dict[str, str] = {}

        async def resubscribe(query: str) -> None:
            response = await http.post(RPC_PATH + query, json={
                "jsonrpc": "2.0", "id": 1, "method": "tasks/resubscribe",
                "params": {"id": plan.task_id}}, headers={"Last-Event-ID": "0"})
            bodies[query] = response.text

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(resubscribe, "")
                nursery.start_soon(resubscribe, "?include_raw=1")
                while pub.methods.get("tasks/resubscribe", 0) < 2:  # noqa: ASYNC110
                    await trio.sleep(0.01)
                feed(SessionTurnEnded(turn=2))

        def kinds(body: str) -> list[str]:
            out = []
            for _, event in _events(body):
                result = event["result"]
                holder = result.get("artifact") or result.get("status", {}).get("message") or {}
                out += [p.get("data", {}).get("kind", "text") for p in holder.get("parts", [])]
            return out

        assert "cap.pty.raw_bytes" not in kinds(bodies[""])
        assert kinds(bodies["?include_raw=1"]).count("cap.pty.raw_bytes") == 1
        assert "text" in kinds(bodies[""])  # both got the rest


def _inbound(text: str, context_id: str):
    from trio_cap.actors.bindings.a2a.publisher import Inbound

    return Inbound("m9", text, context_id=context_id)


def test_cases_are_json_rpc_shaped() -> None:
    """The table's bodies are what they say (a guard against a typo making a case vacuous)."""
    for name, body, *_ in CASES[5:]:
        if name in ("deeply nested", "not UTF-8"):
            continue
        decoded = msgspec.json.decode(body)
        assert isinstance(decoded, dict), name


async def test_the_cap_extension_is_echoed_when_asked_for(tmp_path: Path) -> None:
    async with publish(tmp_path) as pub, httpx.AsyncClient(base_url=pub.url) as http:
        draft = await http.post(RPC_PATH, json=_send("hi", "message/send"),
                                headers={"X-A2A-Extensions": "x/y, cap-protocol/v1"})
        assert draft.headers["x-a2a-extensions"] == "cap-protocol/v1"
        current = await http.post(RPC_PATH, json=_send("hi", "SendMessage"),
                                  headers={**V1, "A2A-Extensions": "cap-protocol/v1"})
        assert current.headers["a2a-extensions"] == "cap-protocol/v1"
        plain = await http.post(RPC_PATH, json=_send("hi", "message/send"))
        assert "x-a2a-extensions" not in plain.headers  # a plain A2A client is served too
        assert plain.json()["result"]["status"]["state"] == "completed"


async def test_non_blocking_send_list_tasks_and_a_public_url(tmp_path: Path) -> None:
    async with publish(tmp_path, public_url="https://agents.example/cap/") as pub, \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{pub.server.port}",
                              timeout=60) as http:
        card = (await http.get("/.well-known/agent-card.json")).json()
        assert card["url"] == "https://agents.example/cap/a2a/jsonrpc"
        assert {i["url"] for i in card["supportedInterfaces"]} == {card["url"]}
        body = _send("wait 30", "message/send")
        body["params"]["configuration"] = {"blocking": False}
        early = (await http.post(RPC_PATH, json=body)).json()["result"]
        assert early["status"]["state"] in ("submitted", "working")  # answered at once
        cancel = {"jsonrpc": "2.0", "id": 2, "method": "tasks/cancel",
                  "params": {"id": early["id"]}}
        assert (await http.post(RPC_PATH, json=cancel)).json()["result"]["status"][
            "state"] == "canceled"
        listed = (await http.post(RPC_PATH, headers=V1, json={
            "jsonrpc": "2.0", "id": 3, "method": "ListTasks", "params": {}})).json()["result"]
        assert [t["id"] for t in listed["tasks"]] == [early["id"]]
        assert listed["tasks"][0]["status"]["state"] == "TASK_STATE_CANCELED"
        assert listed["totalSize"] == 1


async def test_include_raw_with_a_real_pty_agent(tmp_path: Path, monkeypatch) -> None:
    """cap-agent's TUI over the PTY binding, published: only the subscriber that asked gets
    its screen bytes (``cap serve a2a`` logs them, as this test's connector does)."""
    import sys

    from trio_cap.actors.bindings.a2a.serve_sessions import SessionOptions
    from trio_cap.actors.bindings.pty.connector import PtyConnector

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    options = SessionOptions(cwd=str(tmp_path), binding="pty")
    async with publish(tmp_path, options=options,
                       connectors={"pty": PtyConnector(raw_bytes=True)}) as pub, \
            httpx.AsyncClient(base_url=pub.url, timeout=60) as http:
        raw = await http.post(RPC_PATH + "?include_raw=1", json=_send("hello"))
        body = _send("again")
        body["params"]["message"]["contextId"] = _events(raw.text)[0][1]["result"]["contextId"]
        plain = await http.post(RPC_PATH, json=body)

    def kinds(text: str) -> list[str]:
        out = []
        for _, event in _events(text):
            result = event["result"]
            holder = result.get("artifact") or result.get("status", {}).get("message") or {}
            out += [p.get("data", {}).get("kind", "text") for p in holder.get("parts", [])]
            if "status" in result:
                out.append(result["status"]["state"])
        return out

    assert kinds(raw.text).count("cap.pty.raw_bytes") > 0 and kinds(raw.text)[-1] == "completed"
    assert "cap.pty.raw_bytes" not in kinds(plain.text) and kinds(plain.text)[-1] == "completed"
