"""Requests of the four API shapes, reduced to what choosing a reply needs.

Agents send big, API-specific bodies; the planner only cares about a handful
of facts (the last thing the user said, the system prompt, how many model
replies already happened since then, which tools exist, whether JSON is
demanded).  Reducing every shape to one :class:`ChatRequest` keeps the planner
API-agnostic and lets it be tested without HTTP.

Parsing is forgiving on purpose: agents add fields and roles the public docs do
not mention (Claude Code puts ``role: "system"`` entries into ``messages``), and
a scripted server that rejected them would test nothing.
"""

from __future__ import annotations

from typing import Any

import msgspec

from trio_cap.actors.model_server.script import ApiName


class ChatRequest(msgspec.Struct, frozen=True, kw_only=True):
    api: ApiName
    model: str
    stream: bool = False
    last_user_text: str = ""
    system_text: str = ""
    # Model replies (runs of assistant items) since the last real user message:
    # 0 for a fresh prompt, 1 once the first tool results come back, …
    depth: int = 0
    tool_names: tuple[str, ...] = ()
    json_mode: bool = False
    json_schema: Any = None
    # OpenAI chat: whether the client asked for a usage chunk at the end.
    include_usage: bool = False
    input_tokens: int = 1


def estimate_tokens(raw_size: int) -> int:
    """A stable stand-in for a tokenizer: about four bytes a token."""
    return max(1, raw_size // 4)


_MAX_CONTENT_DEPTH = 32
"""Real content is two or three levels deep; a client's deeper nesting is not text we need,
and following it would let one request exhaust the stack."""


def text_of(content: Any, depth: int = 0) -> str:
    """Concatenate the text parts of any of the APIs' content representations."""
    if content is None or depth > _MAX_CONTENT_DEPTH:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        if isinstance(content.get("text"), str):
            return content["text"]
        if "content" in content:
            return text_of(content["content"], depth + 1)
        if "parts" in content:
            return text_of(content["parts"], depth + 1)
        return ""
    if isinstance(content, list):
        return "\n".join(t for t in (text_of(c, depth + 1) for c in content) if t)
    return ""


def _runs(flags: list[bool]) -> int:
    """How many maximal runs of True: one run per model reply."""
    count, prev = 0, False
    for flag in flags:
        if flag and not prev:
            count += 1
        prev = flag
    return count


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def parse_openai_chat(body: dict[str, Any], raw_size: int) -> ChatRequest:
    messages = [m for m in _as_list(body.get("messages")) if isinstance(m, dict)]
    system = [
        text_of(m.get("content")) for m in messages if m.get("role") in ("system", "developer")
    ]
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    after = messages[last_user + 1 :]
    tools = tuple(
        _as_dict(t.get("function")).get("name") or t.get("name") or ""
        for t in _as_list(body.get("tools")) if isinstance(t, dict)
    )
    fmt = _as_dict(body.get("response_format"))
    json_mode = fmt.get("type") in ("json_object", "json_schema")
    schema = _as_dict(fmt.get("json_schema")).get("schema") if json_mode else None
    return ChatRequest(
        api="openai-chat",
        model=str(body.get("model") or ""),
        stream=bool(body.get("stream")),
        last_user_text=text_of(messages[last_user].get("content")) if last_user >= 0 else "",
        system_text="\n".join(system),
        depth=_runs([m.get("role") == "assistant" for m in after]),
        tool_names=tools,
        json_mode=json_mode,
        json_schema=schema,
        include_usage=bool(_as_dict(body.get("stream_options")).get("include_usage")),
        input_tokens=estimate_tokens(raw_size),
    )


_RESPONSES_MODEL_ITEMS = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "reasoning", "web_search_call"}
)


def _is_user_item(item: dict[str, Any]) -> bool:
    return item.get("role") == "user" and item.get("type", "message") == "message"


def parse_openai_responses(body: dict[str, Any], raw_size: int) -> ChatRequest:
    raw_input = body.get("input")
    if isinstance(raw_input, str):
        items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": raw_input}]
    else:
        items = [i for i in _as_list(raw_input) if isinstance(i, dict)]
    system = [str(body.get("instructions") or "")]
    system += [text_of(i.get("content")) for i in items if i.get("role") in ("system", "developer")]
    last_user = max((n for n, i in enumerate(items) if _is_user_item(i)), default=-1)
    after = items[last_user + 1 :]
    tools = tuple(
        str(t.get("name") or _as_dict(t.get("function")).get("name") or t.get("type") or "")
        for t in _as_list(body.get("tools")) if isinstance(t, dict)
    )
    fmt = _as_dict(_as_dict(body.get("text")).get("format"))
    json_mode = fmt.get("type") in ("json_schema", "json_object")
    return ChatRequest(
        api="openai-responses",
        model=str(body.get("model") or ""),
        stream=bool(body.get("stream")),
        last_user_text=text_of(items[last_user].get("content")) if last_user >= 0 else "",
        system_text="\n".join(s for s in system if s),
        depth=_runs([
            i.get("type") in _RESPONSES_MODEL_ITEMS or i.get("role") == "assistant" for i in after
        ]),
        tool_names=tools,
        json_mode=json_mode,
        json_schema=fmt.get("schema") if json_mode else None,
        input_tokens=estimate_tokens(raw_size),
    )


def _has_block(content: Any, kind: str) -> bool:
    return any(isinstance(b, dict) and b.get("type") == kind for b in _as_list(content))


def parse_anthropic(body: dict[str, Any], raw_size: int) -> ChatRequest:
    messages = [m for m in _as_list(body.get("messages")) if isinstance(m, dict)]
    system = [text_of(body.get("system"))]
    system += [text_of(m.get("content")) for m in messages if m.get("role") == "system"]
    last_user = max(
        (
            i for i, m in enumerate(messages)
            if m.get("role") == "user" and not _has_block(m.get("content"), "tool_result")
        ),
        default=-1,
    )
    after = messages[last_user + 1 :]
    tools = tuple(
        str(t.get("name") or "") for t in _as_list(body.get("tools")) if isinstance(t, dict)
    )
    fmt = _as_dict(body.get("output_format")) or _as_dict(
        _as_dict(body.get("output_config")).get("format")
    )
    json_mode = fmt.get("type") == "json_schema"
    return ChatRequest(
        api="anthropic",
        model=str(body.get("model") or ""),
        stream=bool(body.get("stream")),
        last_user_text=text_of(messages[last_user].get("content")) if last_user >= 0 else "",
        system_text="\n".join(s for s in system if s),
        depth=_runs([m.get("role") == "assistant" for m in after]),
        tool_names=tools,
        json_mode=json_mode,
        json_schema=fmt.get("schema") if json_mode else None,
        input_tokens=estimate_tokens(raw_size),
    )


def _gemini_is_user(content: dict[str, Any]) -> bool:
    if content.get("role", "user") != "user":
        return False
    return not any(
        isinstance(p, dict) and ("functionResponse" in p or "function_response" in p)
        for p in _as_list(content.get("parts"))
    )


def parse_gemini(body: dict[str, Any], raw_size: int, *, model: str, stream: bool) -> ChatRequest:
    contents = [c for c in _as_list(body.get("contents")) if isinstance(c, dict)]
    system = text_of(body.get("systemInstruction") or body.get("system_instruction"))
    last_user = max((i for i, c in enumerate(contents) if _gemini_is_user(c)), default=-1)
    after = contents[last_user + 1 :]
    tools: list[str] = []
    for tool in _as_list(body.get("tools")):
        decls = _as_dict(tool).get("functionDeclarations") or _as_dict(tool).get(
            "function_declarations"
        )
        tools.extend(str(_as_dict(d).get("name") or "") for d in _as_list(decls))
    config = _as_dict(body.get("generationConfig") or body.get("generation_config"))
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    json_mode = config.get("responseMimeType") == "application/json" or schema is not None
    return ChatRequest(
        api="gemini",
        model=model,
        stream=stream,
        last_user_text=text_of(contents[last_user].get("parts")) if last_user >= 0 else "",
        system_text=system,
        depth=_runs([c.get("role") == "model" for c in after]),
        tool_names=tuple(tools),
        json_mode=json_mode,
        json_schema=schema,
        input_tokens=estimate_tokens(raw_size),
    )
