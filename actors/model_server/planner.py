"""Choosing the reply: a pure function of (script, state, request).

No I/O, clock or randomness here, so a run against the server is as
reproducible as the script: ids come from the request counter, token counts
from sizes.  Selection order:

1. JSON-mode requests get JSON (a matching rule's ``json``, else an instance
   synthesised from the request's schema) and never consume a turn, so the
   Gemini CLI's routing call cannot eat the scripted answer.
2. Rules, in file order; a rule that would call tools only matches requests
   that offer tools (side calls without tools fall through).
3. Known side requests (opencode's title generator, Codex's title call) get a
   short title and consume nothing.
4. The next ordered turn, for a fresh user message; follow-ups (tool results
   coming back) walk the ``then`` chain of the turn that started it.
5. The default reply.

A fault (``error``) on the chosen reply is returned ``times`` times before the
reply itself, and a faulted request does not consume its turn, so an agent's
retry gets the same turn.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import msgspec

from trio_cap.actors.model_server.parse import ChatRequest
from trio_cap.actors.model_server.script import Fault, Reply, Rule, Script, search

# Side requests some agents make next to the real turn (peers.md, cross-cutting findings).
SIDE_REQUEST_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"You are a title generator"),
    re.compile(r"Generate a concise, single-line task title"),
)
SIDE_REPLY = Reply(text="Fake title")

_WORD = re.compile(r"\S+\s*")
_LEADING_SPACE = re.compile(r"\s*")


class ScriptState(msgspec.Struct, frozen=True):
    requests: int = 0
    next_turn: int = 0
    active_turn: int | None = None
    faults_fired: dict[str, int] = msgspec.field(default_factory=dict)


class PlannedCall(msgspec.Struct, frozen=True):
    id: str
    name: str
    arguments: dict[str, Any]
    custom: bool = False


class ReplyPlan(msgspec.Struct, frozen=True, kw_only=True):
    source: str
    model: str
    response_id: str
    text: str | None = None
    thinking: str | None = None
    tool_calls: tuple[PlannedCall, ...] = ()
    stop: Literal["end_turn", "tool_use"] = "end_turn"
    input_tokens: int = 1
    output_tokens: int = 1
    thinking_tokens: int = 0
    error: Fault | None = None
    delay_ms: int = 0
    chunk_chars: int = 0


def _word_tokens(text: str | None) -> int:
    return len(text.split()) if text else 0


def synth_json(schema: Any, depth: int = 0) -> Any:
    """A small value that satisfies ``schema`` (JSON Schema or Gemini's OpenAPI subset).

    The schema is the client's: any shape must give a value, never an exception.
    """
    if not isinstance(schema, dict) or depth > 8:
        return {}
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return synth_json(schema[key][0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    kind = kind.lower() if isinstance(kind, str) else ("object" if "properties" in schema
                                                         else "")
    if kind == "object":
        props = schema.get("properties")
        if not isinstance(props, dict):
            return {}
        return {str(k): synth_json(v, depth + 1) for k, v in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        low = _number(schema.get("minimum"))
        return int(low) if kind == "integer" else low
    if kind == "boolean":
        return False
    if kind == "string":
        return "fake"
    if kind == "null":
        return None
    return {}


def _number(value: Any) -> float:
    """A usable lower bound: finite numbers only (a string, a bool or 1e400 count as absent)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 1.0
    try:
        number = float(value)
    except OverflowError:
        return 1.0
    return number if number == number and abs(number) < 1e300 else 1.0


def _rule_matches(rule: Rule, req: ChatRequest) -> bool:
    if rule.api is not None and rule.api != req.api:
        return False
    checks = ((rule.match, req.last_user_text), (rule.system, req.system_text),
              (rule.model, req.model))
    # RE2 (script.search): the text is the client's, so matching must stay linear.
    if any(p is not None and not search(p, text) for p, text in checks):
        return False
    return not (rule.tool_calls and not req.tool_names)


def _follow(reply: Reply, depth: int, fallback: Reply) -> Reply:
    for _ in range(depth):
        if reply.then is None:
            return fallback
        reply = reply.then
    return reply


def _choose(script: Script, state: ScriptState, req: ChatRequest) -> tuple[Reply, str, int | None]:
    """The reply, where it came from, and the turn index a fresh prompt would consume."""
    fallback = Reply(text=script.default.text or "done")
    for i, rule in enumerate(script.rules):
        if _rule_matches(rule, req):
            return _follow(rule, req.depth, fallback), f"rule {i}", None
    if req.json_mode:
        return Reply(), "json", None
    if any(p.search(req.system_text) or p.search(req.last_user_text)
           for p in SIDE_REQUEST_PATTERNS):
        return SIDE_REPLY, "side", None
    if req.depth == 0 and state.next_turn < len(script.turns):
        turn = state.next_turn
        return script.turns[turn], f"turn {turn}", turn
    if req.depth > 0 and state.active_turn is not None:
        turn = state.active_turn
        return _follow(script.turns[turn], req.depth, fallback), f"turn {turn}", None
    return _follow(script.default, req.depth, fallback), "default", None


def plan_reply(
    script: Script, state: ScriptState, req: ChatRequest
) -> tuple[ReplyPlan, ScriptState]:
    seq = state.requests + 1
    reply, source, consumes = _choose(script, state, req)
    response_id = f"fake{seq:05d}"
    base = {"source": source, "model": req.model or "fake-model", "response_id": response_id,
            "input_tokens": req.input_tokens, "delay_ms": reply.delay_ms,
            "chunk_chars": reply.chunk_chars}

    fault_key = f"{source}@{req.depth}"
    fired = state.faults_fired.get(fault_key, 0)
    if reply.error is not None and fired < reply.error.times:
        faults = dict(state.faults_fired)
        faults[fault_key] = fired + 1
        plan = ReplyPlan(**base, error=reply.error, output_tokens=0)
        return plan, msgspec.structs.replace(state, requests=seq, faults_fired=faults)

    new_state = msgspec.structs.replace(state, requests=seq)
    if consumes is not None:
        new_state = msgspec.structs.replace(
            new_state, next_turn=consumes + 1, active_turn=consumes
        )

    if req.json_mode:
        value = reply.json if reply.json is not None else synth_json(req.json_schema)
        text = json.dumps(value, separators=(",", ":"))
        plan = ReplyPlan(**base, text=text, output_tokens=max(1, len(text) // 4))
        return plan, new_state

    calls: tuple[PlannedCall, ...] = ()
    if req.tool_names:
        calls = tuple(
            PlannedCall(id=f"{response_id}_{i}", name=c.name, arguments=dict(c.arguments),
                        custom=c.custom)
            for i, c in enumerate(reply.tool_calls)
        )
    text = reply.text
    if text is None and not calls and reply.thinking is None:
        text = ""
    args_tokens = sum(len(json.dumps(c.arguments)) // 4 for c in calls)
    thinking_tokens = _word_tokens(reply.thinking)
    plan = ReplyPlan(
        **base,
        text=text,
        thinking=reply.thinking,
        tool_calls=calls,
        stop="tool_use" if calls else "end_turn",
        output_tokens=max(1, _word_tokens(text) + args_tokens + thinking_tokens),
        thinking_tokens=thinking_tokens,
    )
    return plan, new_state


def chunk_text(text: str, chunk_chars: int = 0) -> list[str]:
    """Split text for streaming: word by word (spaces kept) or fixed-size pieces."""
    if not text:
        return []
    if chunk_chars > 0:
        return [text[i : i + chunk_chars] for i in range(0, len(text), chunk_chars)]
    # Not r"\s*\S+\s*": on a long run of spaces that pattern backtracks quadratically.
    pieces = _WORD.findall(text)
    if not pieces:
        return [text]
    lead = _LEADING_SPACE.match(text)
    if lead is not None and lead.end():
        pieces[0] = text[: lead.end()] + pieces[0]
    return pieces
