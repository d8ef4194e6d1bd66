"""The Gemini generateContent shape over raw HTTP, as the Gemini CLI sends it (peers.md)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from trio_cap.actors.model_server import ModelServer, script_from_obj
from trio_cap.actors.model_server.record import REDACTED

HEADERS = {"x-goog-api-key": "AIza-secret", "content-type": "application/json"}
TOOLS = [{"functionDeclarations": [{"name": "write_file", "parametersJsonSchema": {
    "type": "object", "properties": {"file_path": {"type": "string"},
                                     "content": {"type": "string"}}}}]}]
SCRIPT = {"rules": [{
    "match": "create", "thinking": "Plan: write.", "text": "Writing.",
    "tool_calls": [{"name": "write_file", "arguments": {"file_path": "/w/g.txt",
                                                        "content": "G"}}],
    "then": {"text": "Wrote g.txt."},
}]}


def contents(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "parts": [{"text": text}]}]


def sse_events(raw: str) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: "):]) for line in raw.splitlines()
            if line.startswith("data: ")]


async def post(server: ModelServer, path: str, body: Any, **kw: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server.url) as client:
        return await client.post(path, json=body, headers=HEADERS, **kw)


async def test_generate_content_non_streamed(model_server: ModelServer) -> None:
    r = await post(model_server, "/v1beta/models/fake-model:generateContent",
                   {"contents": contents("hi")})
    assert r.status_code == 200
    data = r.json()
    cand = data["candidates"][0]
    assert cand["content"] == {"role": "model", "parts": [{"text": "hello from fake model"}]}
    assert cand["finishReason"] == "STOP"
    usage = data["usageMetadata"]
    assert usage["candidatesTokenCount"] == 4
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + 4
    assert data["modelVersion"] == "fake-model"


async def test_stream_generate_content_sse(model_server: ModelServer) -> None:
    r = await post(model_server, "/v1beta/models/fake-model:streamGenerateContent?alt=sse",
                   {"contents": contents("hi")})
    assert r.headers["content-type"].startswith("text/event-stream")
    events = sse_events(r.text)
    texts = [p["text"] for e in events for p in e["candidates"][0]["content"]["parts"]]
    assert texts == ["hello ", "from ", "fake ", "model"]
    assert all("finishReason" not in e["candidates"][0] for e in events[:-1])
    assert events[-1]["candidates"][0]["finishReason"] == "STOP"
    assert events[-1]["usageMetadata"]["candidatesTokenCount"] == 4


async def test_stream_without_alt_is_a_json_array(model_server: ModelServer) -> None:
    r = await post(model_server, "/v1beta/models/fake-model:streamGenerateContent",
                   {"contents": contents("hi")})
    chunks = r.json()
    assert isinstance(chunks, list) and len(chunks) == 4
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"


async def test_function_call_then_function_response(model_server: ModelServer) -> None:
    model_server.set_script(script_from_obj(SCRIPT))
    first = await post(model_server,
                       "/v1beta/models/fake-model:streamGenerateContent?alt=sse",
                       {"contents": contents("create g.txt"), "tools": TOOLS})
    parts = [p for e in sse_events(first.text) for p in e["candidates"][0]["content"]["parts"]]
    thoughts = "".join(p["text"] for p in parts if p.get("thought"))
    assert thoughts == "Plan: write."
    calls = [p["functionCall"] for p in parts if "functionCall" in p]
    assert [(c["name"], c["args"]) for c in calls] == [
        ("write_file", {"file_path": "/w/g.txt", "content": "G"})]

    follow = [
        *contents("create g.txt"),
        {"role": "model", "parts": [{"functionCall": calls[0]}]},
        {"role": "user", "parts": [{"functionResponse": {
            "id": calls[0]["id"], "name": "write_file", "response": {"output": "ok"}}}]},
    ]
    second = await post(model_server, "/v1beta/models/fake-model:generateContent",
                        {"contents": follow, "tools": TOOLS})
    assert second.json()["candidates"][0]["content"]["parts"] == [{"text": "Wrote g.txt."}]


async def test_router_json_call_does_not_consume_turn(model_server: ModelServer) -> None:
    model_server.set_script(script_from_obj({"turns": [{"text": "the answer"}]}))
    router = {"contents": contents("hi"), "generationConfig": {
        "responseMimeType": "application/json",
        "responseJsonSchema": {"type": "object", "properties": {
            "complexity_reasoning": {"type": "string"},
            "complexity_score": {"type": "integer"}},
            "required": ["complexity_reasoning", "complexity_score"]}}}
    r = await post(model_server, "/v1beta/models/gemini-3.5-flash-lite:generateContent", router)
    payload = json.loads(r.json()["candidates"][0]["content"]["parts"][0]["text"])
    assert payload == {"complexity_reasoning": "fake", "complexity_score": 1}
    r = await post(model_server, "/v1beta/models/fake-model:generateContent",
                   {"contents": contents("hi")})
    assert r.json()["candidates"][0]["content"]["parts"][0]["text"] == "the answer"


async def test_count_tokens_and_model_listing(model_server: ModelServer) -> None:
    r = await post(model_server, "/v1beta/models/fake-model:countTokens",
                   {"contents": contents("hi")})
    assert r.json()["totalTokens"] > 0
    async with httpx.AsyncClient(base_url=model_server.url) as client:
        listing = (await client.get("/v1beta/models")).json()
        one = (await client.get("/v1beta/models/fake-model")).json()
    assert [m["name"] for m in listing["models"]] == ["models/fake-model"]
    assert "streamGenerateContent" in one["supportedGenerationMethods"]


async def test_error_shape_secrets_and_bad_requests(model_server: ModelServer) -> None:
    model_server.set_script(script_from_obj(
        {"default": {"error": {"status": 429, "message": "quota", "retry_after": 2}}}))
    r = await post(model_server, "/v1beta/models/m:generateContent?key=AIza-query",
                   {"contents": contents("hi")})
    assert r.status_code == 429 and r.headers["retry-after"] == "2"
    err = r.json()["error"]
    assert (err["code"], err["status"], err["message"]) == (429, "RESOURCE_EXHAUSTED", "quota")
    assert err["details"][0]["retryDelay"] == "2s"
    async with httpx.AsyncClient(base_url=model_server.url) as client:
        bad = await client.post("/v1beta/models/m:generateContent", content=b"{not json")
        missing = await client.post("/v1beta/nothing", json={})
    assert bad.status_code == 400 and missing.status_code == 404
    rec = model_server.records[0]
    assert rec["headers"]["x-goog-api-key"] == REDACTED and rec["query"]["key"] == REDACTED
    assert "AIza" not in json.dumps(model_server.records)
    assert [x["reply"]["status"] for x in model_server.records] == [429, 400, 404]


async def test_client_leaving_mid_stream_does_not_hurt_the_server(
    model_server: ModelServer,
) -> None:
    model_server.set_script(script_from_obj(
        {"default": {"text": "one two three four five six", "delay_ms": 200}}))
    path = "/v1beta/models/m:streamGenerateContent?alt=sse"
    async with (
        httpx.AsyncClient(base_url=model_server.url) as client,
        client.stream("POST", path, json={"contents": contents("hi")}) as r,
    ):
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                break  # leave after the first chunk, five pauses before the end
    model_server.set_script(script_from_obj({}))
    r = await post(model_server, "/v1beta/models/m:generateContent", {"contents": contents("x")})
    assert r.json()["candidates"][0]["content"]["parts"][0]["text"] == "hello from fake model"
