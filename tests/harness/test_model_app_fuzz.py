"""Whatever a client sends, the model app answers with a status below 500 and JSON errors.

Drives the ASGI app directly (no sockets) with random bodies for every endpoint, in
each API's shape and out of it, including hostile schemas for JSON-mode requests.
"""

from __future__ import annotations

import json
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_cap.actors.model_server.app import ModelApp
from trio_cap.actors.model_server.planner import synth_json
from trio_cap.actors.model_server.script import script_from_obj

PATHS = ["/v1/chat/completions", "/v1/responses", "/v1/messages",
         "/v1/messages/count_tokens", "/v1beta/models/g:generateContent",
         "/v1beta/models/g:streamGenerateContent", "/v1beta/models/g:countTokens", "/nope"]

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "role", "content", "text", "parts", "messages", "tools",
                         "function", "name", "schema", "minimum", "enum", "anyOf",
                         "properties", "items", "const", "json_schema", "x"]),
        inner, max_size=4),
    max_leaves=16,
)
_schema = st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(["integer", "number", "string", "object", "array", "boolean",
                             "null", "weird"]) | st.lists(st.text(max_size=6), max_size=3)
    | _json,
    "minimum": _json, "enum": _json, "anyOf": _json, "properties": _json, "const": _json,
})
_bodies = st.one_of(
    _json,
    st.fixed_dictionaries({"model": _json, "messages": _json}, optional={
        "stream": _json, "tools": _json, "response_format": st.fixed_dictionaries(
            {"type": st.sampled_from(["json_schema", "json_object"]),
             "json_schema": st.fixed_dictionaries({"schema": _schema})}),
        "system": _json, "stream_options": _json}),
    st.fixed_dictionaries({"contents": _json}, optional={
        "generationConfig": st.fixed_dictionaries(
            {"responseMimeType": st.just("application/json"), "responseSchema": _schema}),
        "systemInstruction": _json, "tools": _json}),
    st.fixed_dictionaries({"input": _json}, optional={
        "instructions": _json, "tools": _json, "text": st.fixed_dictionaries(
            {"format": st.fixed_dictionaries({"type": st.just("json_schema"),
                                              "schema": _schema})})}),
)

SCRIPT = script_from_obj({
    "rules": [{"match": "(?i)tool", "text": "calling", "tool_calls": [
        {"name": "Write", "arguments": {"input": "x"}, "custom": True}],
        "then": {"text": "done"}}],
    "turns": [{"text": "first", "thinking": "hmm"}],
})


async def call(app: ModelApp, path: str, body: bytes) -> tuple[int, bytes]:
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "query_string": b"alt=sse",
             "headers": [(b"content-type", b"application/json")]}
    await app(scope, receive, send)
    status = sent[0]["status"]
    return status, b"".join(m.get("body", b"") for m in sent[1:])


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(PATHS), _bodies)
def test_no_body_makes_the_app_fail(path: str, body: Any) -> None:
    app = ModelApp(SCRIPT)
    status, data = trio.run(call, app, path, json.dumps(body).encode())
    assert status < 500, data
    if status >= 400:
        assert "error" in json.loads(data)


@settings(max_examples=500, deadline=None)
@given(_schema | _json)
def test_any_schema_gets_a_json_value(schema: Any) -> None:
    json.dumps(synth_json(schema))


@settings(max_examples=300, deadline=None)
@given(_schema, st.sampled_from(PATHS[:3] + PATHS[4:5]))
def test_json_mode_with_any_schema_is_answered(schema: Any, path: str) -> None:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                            "input": "hi", "contents": [{"parts": [{"text": "hi"}]}],
                            "response_format": {"type": "json_schema",
                                                "json_schema": {"schema": schema}},
                            "text": {"format": {"type": "json_schema", "schema": schema}},
                            "output_format": {"type": "json_schema", "schema": schema},
                            "generationConfig": {"responseSchema": schema}}
    status, data = trio.run(call, ModelApp(SCRIPT), path, json.dumps(body).encode())
    assert status == 200, data


def test_known_hostile_bodies() -> None:
    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    for extra in [
        {"response_format": {"type": "json_schema", "json_schema": {
            "schema": {"type": "integer", "minimum": "abc"}}}},
        {"response_format": {"type": "json_schema", "json_schema": {
            "schema": {"type": "number", "minimum": 10**400}}}},
        {"response_format": {"type": "json_schema", "json_schema": {
            "schema": {"type": "object", "properties": [1, 2]}}}},
        {"response_format": {"type": "json_schema", "json_schema": {
            "schema": {"enum": "abc", "type": {"x": 1}}}}},
        {"model": ["x"], "messages": "hi", "stream": True},
        {"tools": "all", "stream": {"yes": 1}},
    ]:
        status, data = trio.run(call, ModelApp(SCRIPT), PATHS[0],
                                json.dumps({**base, **extra}).encode())
        assert status == 200, (extra, data)


_reply = st.fixed_dictionaries({}, optional={
    "text": st.text(max_size=30), "thinking": st.text(max_size=20),
    "tool_calls": st.lists(st.fixed_dictionaries(
        {"name": st.text(min_size=1, max_size=8)},
        optional={"arguments": st.dictionaries(st.text(max_size=5), _json, max_size=3),
                  "custom": st.booleans()}), max_size=2),
    "json": _json, "chunk_chars": st.integers(0, 5),
    "error": st.fixed_dictionaries({}, optional={
        "status": st.integers(100, 599), "retry_after": st.floats(0, 100),
        "times": st.integers(0, 2), "message": st.text(max_size=10)}),
})


@settings(max_examples=300, deadline=None)
@given(_reply, st.sampled_from(PATHS[:3] + PATHS[4:6]), st.booleans(), st.booleans())
def test_any_valid_script_reply_renders_in_every_shape(reply: dict[str, Any], path: str,
                                                       stream: bool, tools: bool) -> None:
    app = ModelApp(script_from_obj({"default": reply}))
    body: dict[str, Any] = {"model": "m", "stream": stream,
                            "messages": [{"role": "user", "content": "hi"}], "input": "hi",
                            "contents": [{"parts": [{"text": "hi"}]}]}
    if tools:
        body["tools"] = [{"name": "W", "type": "function", "function": {"name": "W"},
                          "functionDeclarations": [{"name": "W"}]}]
    status, data = trio.run(call, app, path, json.dumps(body).encode())
    expected = reply.get("error")
    if expected is not None and expected.get("times", 1) > 0:
        assert status == expected.get("status", 500)
    else:
        assert status == 200, data
