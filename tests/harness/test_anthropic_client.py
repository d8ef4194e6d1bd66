"""The official ``anthropic`` client against the server: Messages, streamed and not."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anthropic
import httpx
import pytest
import trio

from trio_cap.actors.model_server import ModelServer, script_from_obj
from trio_cap.actors.model_server.record import REDACTED

T = TypeVar("T")

TOOLS: list[Any] = [{"name": "Write", "description": "write a file", "input_schema": {
    "type": "object", "properties": {"file_path": {"type": "string"},
                                     "content": {"type": "string"}}}}]
SCRIPT = {"rules": [{
    "match": "(?i)create", "thinking": "I will write it.", "text": "Writing.",
    "tool_calls": [{"name": "Write", "arguments": {"file_path": "/w/a.txt", "content": "A"}}],
    "then": {"text": "Wrote a.txt."},
}]}


async def call(server: ModelServer, fn: Callable[[anthropic.Anthropic], T]) -> T:
    client = anthropic.Anthropic(base_url=server.url, api_key="sk-ant-secret", max_retries=0)
    with client:
        return await trio.to_thread.run_sync(fn, client)


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


async def test_message_non_streamed(model_server: ModelServer) -> None:
    m = await call(model_server, lambda c: c.messages.create(
        model="claude-x", max_tokens=100, messages=user("hi")))
    assert [b.type for b in m.content] == ["text"]
    assert m.content[0].text == "hello from fake model"  # type: ignore[union-attr]
    assert m.stop_reason == "end_turn" and m.model == "claude-x"
    assert m.usage.output_tokens == 4 and m.usage.input_tokens > 0
    (rec,) = model_server.records
    # anthropic 2.x sends the key as a bearer token; Claude Code uses x-api-key.
    secret_headers = {k for k, v in rec["headers"].items() if v == REDACTED}
    assert secret_headers & {"x-api-key", "authorization"}
    assert "sk-ant-secret" not in json.dumps(rec)
    assert rec["headers"]["anthropic-version"]


async def test_message_streamed_text(model_server: ModelServer) -> None:
    def run(c: anthropic.Anthropic) -> tuple[list[str], Any]:
        with c.messages.stream(model="claude-x", max_tokens=100, messages=user("hi")) as s:
            pieces = list(s.text_stream)
            return pieces, s.get_final_message()

    pieces, final = await call(model_server, run)
    assert pieces == ["hello ", "from ", "fake ", "model"]
    assert final.stop_reason == "end_turn" and final.usage.output_tokens == 4


@pytest.mark.parametrize("stream", [False, True])
async def test_thinking_and_tool_use_round_trip(model_server: ModelServer, stream: bool) -> None:
    model_server.set_script(script_from_obj(SCRIPT))

    def ask(c: anthropic.Anthropic, messages: list[Any]) -> Any:
        kwargs: dict[str, Any] = {"model": "claude-x", "max_tokens": 1000, "tools": TOOLS,
                                  "messages": messages}
        if not stream:
            return c.messages.create(**kwargs)
        with c.messages.stream(**kwargs) as s:
            return s.get_final_message()

    first = await call(model_server, lambda c: ask(c, user("create a.txt")))
    assert [b.type for b in first.content] == ["thinking", "text", "tool_use"]
    assert first.content[0].thinking == "I will write it." and first.content[0].signature
    tool_use = first.content[2]
    assert tool_use.name == "Write" and tool_use.input == {"file_path": "/w/a.txt",
                                                           "content": "A"}
    assert tool_use.id.startswith("toolu_") and first.stop_reason == "tool_use"

    convo = [*user("create a.txt"),
             {"role": "assistant", "content": [b.model_dump(exclude_none=True)
                                               for b in first.content]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id,
                                           "content": "ok"}]}]
    second = await call(model_server, lambda c: ask(c, convo))
    assert second.content[0].text == "Wrote a.txt." and second.stop_reason == "end_turn"


async def test_beta_path_count_tokens_and_models(model_server: ModelServer) -> None:
    # Claude Code calls the beta path (``?beta=true``) with an anthropic-beta header.
    m = await call(model_server, lambda c: c.beta.messages.create(
        model="claude-x", max_tokens=10, messages=user("hi"), betas=["fake-beta-2025"],
        extra_query={"beta": "true"}))
    assert m.content[0].text == "hello from fake model"  # type: ignore[union-attr]
    count = await call(model_server, lambda c: c.messages.count_tokens(
        model="claude-x", messages=user("hi")))
    assert count.input_tokens > 0
    models = await call(model_server, lambda c: [m.id for m in c.models.list()])
    assert models == ["fake-model"]
    paths = [(r["path"], r["query"]) for r in model_server.records]
    assert paths[0] == ("/v1/messages", {"beta": "true"})
    assert paths[1][0] == "/v1/messages/count_tokens"
    assert model_server.records[0]["headers"]["anthropic-beta"] == "fake-beta-2025"


async def test_system_role_entries_and_head_probe(model_server: ModelServer) -> None:
    """Claude Code puts ``role: system`` items in ``messages`` and probes ``HEAD /``."""
    body = {"model": "claude-x", "max_tokens": 10, "stream": False, "messages": [
        {"role": "system", "content": "environment info"}, {"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(base_url=model_server.url) as client:
        head = await client.head("/")
        r = await client.post("/v1/messages?beta=true", json=body,
                              headers={"x-api-key": "k", "anthropic-version": "2023-06-01"})
    assert head.status_code == 200
    assert r.status_code == 200 and r.json()["content"][0]["text"] == "hello from fake model"


async def test_overloaded_and_rate_limit_error_shapes(model_server: ModelServer) -> None:
    model_server.set_script(script_from_obj({"turns": [
        {"error": {"status": 529, "message": "overloaded"}},
        {"error": {"status": 429, "message": "slow down", "retry_after": 3}},
    ]}))
    with pytest.raises(anthropic.APIStatusError) as info:
        await call(model_server, lambda c: c.messages.create(
            model="x", max_tokens=5, messages=user("a")))
    assert info.value.status_code == 529
    assert info.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    # The faulted turn was not consumed: the next request gets turn 0 itself.
    m = await call(model_server, lambda c: c.messages.create(
        model="x", max_tokens=5, messages=user("a")))
    assert m.content[0].text == ""  # type: ignore[union-attr]
    with pytest.raises(anthropic.RateLimitError) as rl:
        await call(model_server, lambda c: c.messages.create(
            model="x", max_tokens=5, messages=user("b")))
    assert rl.value.response.headers["retry-after"] == "3"
    assert rl.value.body["error"]["message"] == "slow down"  # type: ignore[index]


async def test_slow_stream_spaces_chunks(model_server: ModelServer) -> None:
    model_server.set_script(script_from_obj({"default": {"text": "a b c d", "delay_ms": 60}}))

    def run(c: anthropic.Anthropic) -> tuple[list[str], float]:
        started = time.monotonic()
        with c.messages.stream(model="x", max_tokens=5, messages=user("hi")) as s:
            pieces = list(s.text_stream)
        return pieces, time.monotonic() - started

    pieces, elapsed = await call(model_server, run)
    assert pieces == ["a ", "b ", "c ", "d"]
    # 9 SSE frames (start, block start, 4 deltas, block stop, delta, stop): 8 pauses.
    assert elapsed >= 8 * 0.06


async def test_recorded_jsonl_matches_memory(model_server: ModelServer) -> None:
    await call(model_server, lambda c: c.messages.create(
        model="x", max_tokens=5, messages=user("record me")))
    assert model_server.app.recorder.path is not None
    lines = model_server.app.recorder.path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == model_server.records
    assert model_server.records[0]["body"]["messages"][0]["content"] == "record me"
    assert "sk-ant-secret" not in lines[0]
