"""The sans-io core: request parsing and reply planning, without HTTP."""

from __future__ import annotations

import pytest

from trio_cap.actors.model_server.parse import (
    ChatRequest,
    parse_anthropic,
    parse_gemini,
    parse_openai_chat,
    parse_openai_responses,
)
from trio_cap.actors.model_server.planner import ScriptState, chunk_text, plan_reply, synth_json
from trio_cap.actors.model_server.script import script_from_obj


def req(text: str = "hi", **kw: object) -> ChatRequest:
    base: dict[str, object] = {"api": "openai-chat", "model": "m", "last_user_text": text}
    base.update(kw)
    return ChatRequest(**base)  # type: ignore[arg-type]


def run(script_obj: dict, requests: list[ChatRequest]) -> list:
    script = script_from_obj(script_obj)
    state = ScriptState()
    plans = []
    for r in requests:
        plan, state = plan_reply(script, state, r)
        plans.append(plan)
    return plans


def test_default_reply_and_usage() -> None:
    (plan,) = run({}, [req(input_tokens=40)])
    assert plan.text == "hello from fake model"
    assert plan.source == "default"
    assert plan.input_tokens == 40
    assert plan.output_tokens == 4
    assert plan.stop == "end_turn"


def test_turns_are_consumed_in_order_then_default() -> None:
    plans = run({"turns": [{"text": "one"}, {"text": "two"}], "default": {"text": "d"}},
                [req(), req(), req()])
    assert [p.text for p in plans] == ["one", "two", "d"]
    assert [p.source for p in plans] == ["turn 0", "turn 1", "default"]


def test_rule_matches_last_user_message_and_is_not_consumed() -> None:
    script = {"rules": [{"match": "(?i)weather", "text": "sunny"}], "turns": [{"text": "t0"}]}
    plans = run(script, [req("What's the WEATHER?"), req("other"), req("weather again")])
    assert [p.text for p in plans] == ["sunny", "t0", "sunny"]


def test_rule_conditions_on_system_api_and_model() -> None:
    script = {"rules": [{"system": "pirate", "api": "anthropic", "model": "^claude",
                         "text": "arr"}]}
    good = req(api="anthropic", model="claude-x", system_text="be a pirate")
    plans = run(script, [good, req(api="gemini", model="claude-x", system_text="pirate"),
                         req(api="anthropic", model="gpt", system_text="pirate")])
    assert [p.text for p in plans] == ["arr", "hello from fake model", "hello from fake model"]


def test_tool_call_then_follow_up_by_depth() -> None:
    script = {"rules": [{"match": "create", "text": "on it",
                         "tool_calls": [{"name": "write", "arguments": {"path": "a"}}],
                         "then": {"text": "done"}}]}
    tools = ("write",)
    first, follow, beyond = run(script, [
        req("create a", tool_names=tools), req("create a", tool_names=tools, depth=1),
        req("create a", tool_names=tools, depth=2),
    ])
    assert first.stop == "tool_use"
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("write", {"path": "a"})]
    assert first.tool_calls[0].id == "fake00001_0"
    assert follow.text == "done" and not follow.tool_calls and follow.stop == "end_turn"
    # Past the end of the chain the default text ends the loop instead of repeating calls.
    assert beyond.text == "hello from fake model" and not beyond.tool_calls


def test_tool_rule_skipped_when_request_offers_no_tools() -> None:
    script = {"rules": [{"match": "create", "tool_calls": [{"name": "write"}]}]}
    (plan,) = run(script, [req("create a")])
    assert plan.source == "default"


def test_turn_follow_up_uses_the_active_turn() -> None:
    script = {"turns": [
        {"tool_calls": [{"name": "sh", "arguments": {"cmd": "ls"}}], "then": {"text": "listed"}},
        {"text": "second"},
    ]}
    tools = ("sh",)
    plans = run(script, [req(tool_names=tools), req(tool_names=tools, depth=1),
                         req(tool_names=tools)])
    assert plans[0].tool_calls[0].name == "sh"
    assert plans[1].text == "listed" and plans[1].source == "turn 0"
    assert plans[2].text == "second"


def test_fault_fires_times_then_reply_and_does_not_consume_turn() -> None:
    script = {"turns": [{"text": "ok", "error": {"status": 429, "retry_after": 2, "times": 2}},
                        {"text": "next"}]}
    plans = run(script, [req(), req(), req(), req()])
    assert [p.error.status if p.error else None for p in plans] == [429, 429, None, None]
    assert plans[0].error is not None and plans[0].error.retry_after == 2
    assert [p.text for p in plans[2:]] == ["ok", "next"]


def test_json_mode_synthesises_from_schema_and_keeps_turns() -> None:
    router_schema = {"type": "object", "properties": {
        "complexity_reasoning": {"type": "string"},
        "complexity_score": {"type": "integer", "minimum": 1, "maximum": 100}}}
    plans = run({"turns": [{"text": "real answer"}]},
                [req(json_mode=True, json_schema=router_schema), req()])
    assert plans[0].text == '{"complexity_reasoning":"fake","complexity_score":1}'
    assert plans[0].source == "json"
    assert plans[1].text == "real answer"


def test_json_mode_uses_rule_json() -> None:
    (plan,) = run({"rules": [{"match": "x", "json": {"a": [1, 2]}}]},
                  [req("x", json_mode=True)])
    assert plan.text == '{"a":[1,2]}'


@pytest.mark.parametrize("system", ["You are a title generator. ...", ""])
def test_side_requests_do_not_consume_turns(system: str) -> None:
    text = "Generate a concise, single-line task title" if not system else "hi"
    plans = run({"turns": [{"text": "t0"}]}, [req(text, system_text=system), req()])
    assert plans[0].source == "side" and plans[0].text == "Fake title"
    assert plans[1].text == "t0"


def test_thinking_counts_as_reasoning_tokens() -> None:
    (plan,) = run({"default": {"thinking": "a b c", "text": "x"}}, [req()])
    assert plan.thinking == "a b c" and plan.thinking_tokens == 3 and plan.output_tokens == 4


def test_synth_json_variants() -> None:
    assert synth_json({"type": "STRING"}) == "fake"
    assert synth_json({"enum": ["b", "c"]}) == "b"
    assert synth_json({"anyOf": [{"type": "boolean"}, {"type": "string"}]}) is False
    assert synth_json({"type": ["null", "number"]}) == 1.0
    assert synth_json({"type": "array", "items": {"type": "string"}}) == []


def test_chunk_text_round_trips() -> None:
    text = "  hello  from\nfake model "
    assert "".join(chunk_text(text)) == text
    assert chunk_text("abcdefg", 3) == ["abc", "def", "g"]
    assert chunk_text("") == []


# --- parsing ---------------------------------------------------------------


def test_parse_openai_chat_depth_tools_and_json() -> None:
    body = {
        "model": "fake", "stream": True, "stream_options": {"include_usage": True},
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "make it"}]},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
        "tools": [{"type": "function", "function": {"name": "write"}}],
        "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object"}}},
    }
    r = parse_openai_chat(body, 400)
    assert (r.last_user_text, r.system_text, r.depth) == ("make it", "sys", 1)
    assert r.tool_names == ("write",) and r.include_usage and r.stream
    assert r.json_mode and r.json_schema == {"type": "object"} and r.input_tokens == 100


def test_parse_responses_counts_model_runs_after_last_user() -> None:
    body = {"model": "gpt", "instructions": "be brief", "input": [
        {"type": "message", "role": "developer", "content": "dev"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        {"type": "reasoning", "summary": []},
        {"type": "function_call", "call_id": "a", "name": "sh", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "sh", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "x"},
        {"type": "function_call_output", "call_id": "b", "output": "y"},
        {"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "p"},
        {"type": "custom_tool_call_output", "call_id": "c", "output": "z"},
    ], "tools": [{"type": "function", "name": "sh"}, {"type": "custom", "name": "apply_patch"},
                 {"type": "web_search"}]}
    r = parse_openai_responses(body, 10)
    assert r.last_user_text == "go" and r.depth == 2
    assert r.system_text == "be brief\ndev"
    assert r.tool_names == ("sh", "apply_patch", "web_search")
    assert parse_openai_responses({"input": "plain"}, 1).last_user_text == "plain"


def test_parse_anthropic_system_role_entries_and_tool_results() -> None:
    body = {"model": "claude", "system": [{"type": "text", "text": "top"}], "messages": [
        {"role": "system", "content": "env info"},
        {"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>r</system-reminder>"},
            {"type": "text", "text": "write it"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Write",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                      "content": "done"}]},
    ], "tools": [{"name": "Write"}]}
    r = parse_anthropic(body, 10)
    assert r.last_user_text.endswith("write it") and r.depth == 1
    assert r.system_text == "top\nenv info" and r.tool_names == ("Write",)


def test_parse_gemini_function_response_is_not_a_user_message() -> None:
    body = {"systemInstruction": {"parts": [{"text": "sys"}]}, "contents": [
        {"role": "user", "parts": [{"text": "make file"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "write_file", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "write_file",
                                                         "response": {"output": "ok"}}}]},
    ], "tools": [{"functionDeclarations": [{"name": "write_file"}, {"name": "ls"}]}],
        "generationConfig": {"responseJsonSchema": {"type": "object"}}}
    r = parse_gemini(body, 10, model="fake-model", stream=True)
    assert (r.last_user_text, r.depth, r.system_text) == ("make file", 1, "sys")
    assert r.tool_names == ("write_file", "ls") and r.json_mode and r.stream
