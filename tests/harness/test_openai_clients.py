"""The official ``openai`` client against the server: chat completions and Responses.

The clients are synchronous and run in a worker thread while the server runs
in the test's Trio loop, so each test is a real HTTP round trip on loopback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import openai
import pytest
import trio

from trio_cap.actors.model_server import ModelServer, script_from_obj
from trio_cap.actors.model_server.record import REDACTED

T = TypeVar("T")

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}}
RESPONSES_TOOL = {"type": "function", "name": "get_weather",
                  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}

SCRIPT = {
    "rules": [{
        "match": "(?i)weather", "thinking": "Need the tool.", "text": "Checking.",
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
        "then": {"text": "Sunny in Paris."},
    }],
}


async def call(server: ModelServer, fn: Callable[[openai.OpenAI], T]) -> T:
    client = openai.OpenAI(base_url=server.openai_url, api_key="sk-test-secret", max_retries=0)
    with client:
        return await trio.to_thread.run_sync(fn, client)


async def test_chat_plain_non_streamed(model_server: ModelServer) -> None:
    r = await call(model_server, lambda c: c.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "hi"}]))
    assert r.choices[0].message.content == "hello from fake model"
    assert r.choices[0].finish_reason == "stop"
    assert r.model == "fake-model" and r.object == "chat.completion"
    assert r.usage is not None and r.usage.completion_tokens == 4
    assert r.usage.total_tokens == r.usage.prompt_tokens + 4
    (rec,) = model_server.records
    assert rec["path"] == "/v1/chat/completions"
    assert rec["headers"]["authorization"] == REDACTED
    assert "sk-test-secret" not in json.dumps(rec)


async def test_chat_streamed_text_with_usage(model_server: ModelServer) -> None:
    def run(c: openai.OpenAI) -> tuple[list[str], Any, list[Any]]:
        stream = c.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=True,
            stream_options={"include_usage": True})
        pieces, finishes, usage = [], [], None
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                if choice.delta.content:
                    pieces.append(choice.delta.content)
                if choice.finish_reason:
                    finishes.append(choice.finish_reason)
        return pieces, usage, finishes

    pieces, usage, finishes = await call(model_server, run)
    assert pieces == ["hello ", "from ", "fake ", "model"]
    assert finishes == ["stop"]
    assert usage is not None and usage.completion_tokens == 4


async def test_chat_tool_call_round_trip_streamed_and_not(model_server: ModelServer) -> None:
    model_server.set_script(script_from_obj(SCRIPT))
    messages: list[dict[str, Any]] = [{"role": "user", "content": "weather in Paris?"}]

    first = await call(model_server, lambda c: c.chat.completions.create(
        model="fake-model", messages=messages, tools=[WEATHER_TOOL]))
    msg = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls"
    assert msg.content == "Checking."
    assert msg.tool_calls is not None and len(msg.tool_calls) == 1
    tc = msg.tool_calls[0]
    assert tc.function.name == "get_weather"
    assert json.loads(tc.function.arguments) == {"city": "Paris"}

    def stream_follow_up(c: openai.OpenAI) -> str:
        convo = [*messages, msg.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": tc.id, "content": "18C sunny"}]
        with c.chat.completions.stream(model="fake-model", messages=convo,
                                       tools=[WEATHER_TOOL]) as stream:
            return stream.get_final_completion().choices[0].message.content or ""

    assert await call(model_server, stream_follow_up) == "Sunny in Paris."

    def stream_tool_call(c: openai.OpenAI) -> Any:
        with c.chat.completions.stream(model="fake-model", messages=messages,
                                       tools=[WEATHER_TOOL]) as stream:
            return stream.get_final_completion()

    streamed = await call(model_server, stream_tool_call)
    smsg = streamed.choices[0].message
    assert smsg.tool_calls is not None
    assert smsg.tool_calls[0].function.name == "get_weather"
    assert json.loads(smsg.tool_calls[0].function.arguments) == {"city": "Paris"}
    assert [r["reply"]["source"] for r in model_server.records] == ["rule 0"] * 3


async def test_chat_json_mode(model_server: ModelServer) -> None:
    schema = {"type": "object", "properties": {"score": {"type": "integer"},
                                               "why": {"type": "string"}},
              "required": ["score", "why"]}
    r = await call(model_server, lambda c: c.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": "rate it"}],
        response_format={"type": "json_schema",
                         "json_schema": {"name": "rating", "schema": schema}}))
    assert json.loads(r.choices[0].message.content or "") == {"score": 1, "why": "fake"}


async def test_models_listing(model_server: ModelServer) -> None:
    models = await call(model_server, lambda c: [m.id for m in c.models.list()])
    assert models == ["fake-model"]
    one = await call(model_server, lambda c: c.models.retrieve("gpt-5.4"))
    assert one.id == "gpt-5.4"


async def test_responses_non_streamed_with_tool_call(model_server: ModelServer) -> None:
    model_server.set_script(script_from_obj(SCRIPT))
    r = await call(model_server, lambda c: c.responses.create(
        model="gpt-5.5", input="weather?", tools=[RESPONSES_TOOL]))  # type: ignore[list-item]
    kinds = [item.type for item in r.output]
    assert kinds == ["reasoning", "message", "function_call"]
    assert r.output_text == "Checking."
    fc = r.output[2]
    assert fc.type == "function_call" and fc.name == "get_weather"
    assert json.loads(fc.arguments) == {"city": "Paris"}
    assert r.usage is not None and r.usage.output_tokens_details.reasoning_tokens == 3
    assert r.status == "completed"

    follow = await call(model_server, lambda c: c.responses.create(
        model="gpt-5.5", tools=[RESPONSES_TOOL],  # type: ignore[list-item]
        input=[{"role": "user", "content": "weather?"},
               {"type": "function_call", "call_id": fc.call_id, "name": fc.name,
                "arguments": fc.arguments},
               {"type": "function_call_output", "call_id": fc.call_id, "output": "18C"}]))
    assert follow.output_text == "Sunny in Paris."


async def test_responses_streamed_event_sequence(model_server: ModelServer) -> None:
    def run(c: openai.OpenAI) -> tuple[list[str], str, Any]:
        with c.responses.stream(model="gpt-5.5", input="hi") as stream:
            kinds = [event.type for event in stream]
            final = stream.get_final_response()
        return kinds, final.output_text, final.usage

    kinds, text, usage = await call(model_server, run)
    assert text == "hello from fake model"
    assert kinds[:4] == ["response.created", "response.in_progress",
                         "response.output_item.added", "response.content_part.added"]
    assert kinds.count("response.output_text.delta") == 4
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done",
                          "response.output_item.done", "response.completed"]
    assert usage.output_tokens == 4 and usage.input_tokens_details.cached_tokens == 0


async def test_responses_streamed_tool_call(model_server: ModelServer) -> None:
    model_server.set_script(script_from_obj(SCRIPT))

    def run(c: openai.OpenAI) -> Any:
        with c.responses.stream(model="gpt-5.5", input="weather?",
                                tools=[RESPONSES_TOOL]) as stream:  # type: ignore[list-item]
            for _ in stream:
                pass
            return stream.get_final_response()

    final = await call(model_server, run)
    calls = [o for o in final.output if o.type == "function_call"]
    assert len(calls) == 1 and json.loads(calls[0].arguments) == {"city": "Paris"}
    reasoning = [o for o in final.output if o.type == "reasoning"]
    assert reasoning[0].summary[0].text == "Need the tool."


async def test_rate_limit_fault_then_retry(model_server: ModelServer) -> None:
    model_server.set_script(script_from_obj(
        {"turns": [{"text": "after retry", "error": {"status": 429, "retry_after": 0.01}}]}))
    with pytest.raises(openai.RateLimitError) as info:
        await call(model_server, lambda c: c.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]))
    assert info.value.response.headers["retry-after"] == "0.01"
    assert info.value.body["type"] == "rate_limit_exceeded"  # type: ignore[index]
    r = await call(model_server, lambda c: c.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}]))
    assert r.choices[0].message.content == "after retry"


async def test_client_retry_honours_retry_after(model_server: ModelServer) -> None:
    model_server.set_script(script_from_obj(
        {"default": {"text": "ok", "error": {"status": 429, "retry_after": 0.01, "times": 1}}}))
    client = openai.OpenAI(base_url=model_server.openai_url, api_key="k", max_retries=1)
    with client:
        r = await trio.to_thread.run_sync(lambda: client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]))
    assert r.choices[0].message.content == "ok"
    assert [rec["reply"]["status"] for rec in model_server.records] == [429, 200]


async def test_server_error_fault(model_server: ModelServer) -> None:
    model_server.set_script(script_from_obj(
        {"default": {"error": {"status": 500, "message": "boom", "times": 5}}}))
    with pytest.raises(openai.InternalServerError, match="boom"):
        await call(model_server, lambda c: c.responses.create(model="m", input="x"))
