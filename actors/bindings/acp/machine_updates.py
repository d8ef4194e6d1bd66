"""``session/update`` → CAP events: the driver's mapping of what an ACP agent reports.

Mapping, not protocol state: the only state kept is per tool call (what its
content said so far, so a ``tool_call_update`` that *replaces* the content list
becomes a delta of what is new) and the running session cost (ACP's
``usage_update.cost`` is the session's total; ``cap.usage`` carries what this
update added, which is what the session's budget gate sums).  Pure: no I/O.

====================================  ===================================================
update                                CAP event
====================================  ===================================================
``agent_message_chunk`` (text)        ``cap.text_chunk`` (``message_id`` = ``messageId``,
                                      else one id per turn; ``cap.*`` keys of the
                                      update's or block's ``_meta`` kept in ``meta``)
``agent_thought_chunk``               ``cap.thought``
``user_message_chunk``                ``cap.text_chunk`` channel ``system``,
                                      ``_meta.acp.role`` ``user``
a chunk that is not text              ``agent.raw`` ``content_<type>``
``tool_call``                         ``cap.tool_call.start`` (``name`` = the unstable
                                      ``name``, else ``kind``; ``input`` = ``rawInput``);
                                      status/title/kind/locations/diffs under
                                      ``_meta.acp``; already completed/failed: also
                                      ``cap.tool_call.end``
``tool_call_update`` not finished     ``cap.tool_call.delta`` (new text of its content;
                                      ``_meta.acp`` as above, ``replaced`` when the text
                                      did not extend the previous one)
``tool_call_update`` completed/failed ``cap.tool_call.end`` (``is_error`` for failed)
an update for a call never started    its ``cap.tool_call.start`` first
``plan``                              ``cap.plan`` (entries numbered in order)
``usage_update``                      ``cap.usage`` (cost = growth of ``cost.amount`` in
                                      USD; ``used``/``size`` under ``_meta.acp``)
modes, commands, config options,      ``agent.raw`` (``current_mode``,
session info                          ``available_commands``, ``config_options``,
                                      ``session_info``): recorded, nothing to act on
unstable or unknown kinds             ``agent.raw`` ``unstable_update`` /
                                      ``unknown_update``
====================================  ===================================================
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET

from trio_cap.actors.bindings.acp import frames as f
from trio_cap.events.kinds import (
    AgentRaw,
    Event,
    Plan,
    PlanEntry,
    StopReason,
    TextChunk,
    Thought,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

BINDING = "acp"
RAW_LIMIT = 64 * 1024
"""Characters of an unmapped frame kept in the log (the rest is counted, not stored)."""

_FINISHED = frozenset({"completed", "failed"})
_CHUNKS = frozenset({f.AgentMessageChunk, f.AgentThoughtChunk, f.MessageChunkView,
                     f.ThoughtChunkView})
_THOUGHTS = frozenset({f.AgentThoughtChunk, f.ThoughtChunkView})
_TEXTS = frozenset({f.TextContent, f.TextView})
_to_builtins = msgspec.to_builtins


def cap_meta(update: Any, content: Any) -> dict[str, Any] | None:
    """A text chunk's CAP keys (``cap.message_to``…) from the update's ``_meta`` and its
    block's, or None: the rest of an agent's ``_meta`` is its own business."""
    found: dict[str, Any] = {}
    for holder in (update, content):
        meta = getattr(holder, "meta", None)
        if isinstance(meta, dict):
            found.update((k, v) for k, v in meta.items() if k.startswith("cap."))
    return found or None


def raw(reason: str, text: str) -> AgentRaw:
    return AgentRaw(binding=BINDING, reason=reason, text=text[:RAW_LIMIT],
                    truncated=max(0, len(text) - RAW_LIMIT))


def raw_value(reason: str, value: Any) -> AgentRaw:
    return raw(reason, f.encode(value).decode("utf-8", errors="replace"))


def tool_text(content: tuple[f.ToolCallContent, ...] | Any | None) -> str:
    """The text a tool call's content list says (diffs and terminals are in ``_meta``)."""
    if not isinstance(content, tuple):
        return ""
    if len(content) == 1:  # the usual case: one block (the join of one part is the part)
        item = content[0]
        return f.content_text(item.content) if type(item) is f.ToolContent else ""
    parts = [f.content_text(item.content) for item in content if type(item) is f.ToolContent]
    return "\n".join(p for p in parts if p)


def _acp_meta(update: f.ToolCall | f.ToolCallUpdate | f.ToolCallFields) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    value = update.title
    if isinstance(value, str):
        meta["title"] = value
    value = update.kind
    if isinstance(value, str):
        meta["kind"] = value
    value = update.status
    if isinstance(value, str):
        meta["status"] = value
    if isinstance(update.locations, tuple):
        meta["locations"] = [_to_builtins(loc) for loc in update.locations]
    content = update.content
    if isinstance(content, tuple) and content:
        diffs: list[Any] = []
        terminals: list[str] = []
        for item in content:  # one pass; the keys keep their order (diffs, then terminals)
            kind = type(item)
            if kind is f.Diff:
                diffs.append(_to_builtins(item))
            elif kind is f.TerminalRef:
                terminals.append(item.terminal_id)
        if diffs:
            meta["diffs"] = diffs
        if terminals:
            meta["terminals"] = terminals
    if update.raw_output is not UNSET:
        meta["raw_output"] = update.raw_output
    if type(update) is f.ToolCallUpdate and update.raw_input not in (UNSET, None):
        meta["raw_input"] = update.raw_input  # the input, when the start did not have it yet
    return meta


def _output_text(raw_output: Any) -> str:
    """A finished call's result text when its content list had none (``rawOutput``)."""
    if isinstance(raw_output, str):
        return raw_output
    if isinstance(raw_output, list):
        return "".join(str(item.get("text", "")) for item in raw_output
                       if isinstance(item, dict) and item.get("type") == "text")
    if isinstance(raw_output, dict):
        for key in ("output", "formatted_output", "stdout", "content"):
            if isinstance(raw_output.get(key), str):
                return raw_output[key]
    return ""


def _as_update(call: f.ToolCall) -> f.ToolCallUpdate:
    return f.ToolCallUpdate(tool_call_id=call.tool_call_id, title=call.title, kind=call.kind,
                            status=call.status, content=call.content, locations=call.locations,
                            raw_input=call.raw_input, raw_output=call.raw_output, meta=call.meta)


class ToolCallState:
    """What the driver knows of one tool call: enough to rate a permission for it later."""

    __slots__ = ("ended", "kind", "locations", "raw_input", "text", "title")

    def __init__(self, title: str, kind: str, raw_input: Any,
                 locations: tuple[f.ToolCallLocation, ...]) -> None:
        self.title = title
        self.kind = kind
        self.raw_input = raw_input
        self.locations = locations
        self.text = ""
        self.ended = False


class UpdateMapper:
    """Folds one session's updates into CAP events (see the module table)."""

    def __init__(self) -> None:
        self.calls: dict[str, ToolCallState] = {}
        self.cost_usd = 0.0
        self.mode: str | None = None
        self.config_options: tuple[f.ConfigOption, ...] = ()

    def map(self, update: Any, message_id: str) -> list[Event]:
        """One update → its events; ``message_id`` is the turn's id for chunks without one."""
        kind = type(update)
        if kind in _CHUNKS:
            content = update.content
            mid = update.message_id if isinstance(update.message_id, str) else message_id
            if type(content) in _TEXTS:
                if not content.text:
                    return []  # claude-code-acp opens every message with an empty chunk
                if kind in _THOUGHTS:
                    return [Thought(message_id=mid, text=content.text)]
                return [TextChunk(message_id=mid, text=content.text,
                                  meta=cap_meta(update, content))]
            return [self._non_text(update)]
        if kind is f.ToolCallUpdate:
            return self._update(update)
        if kind is f.ToolCall:
            if update.tool_call_id in self.calls:  # claude-code-acp announces a call twice
                return self._update(_as_update(update))
            return self._start(update)
        if kind is f.Plan:
            return [Plan(entries=tuple([
                PlanEntry(id=str(i), content=e.content, status=e.status, priority=e.priority)
                for i, e in enumerate(update.entries, 1)]))]
        if kind is f.UsageUpdate:
            return [self._usage(update)]
        if kind is f.UserMessageChunk:
            content = update.content
            if type(content) is f.TextContent:
                mid = update.message_id if isinstance(update.message_id, str) else message_id
                return [TextChunk(message_id=mid, text=content.text, channel="system",
                                  meta={"acp": {"role": "user"}})]
            return [self._non_text(update)]
        if kind is f.CurrentModeUpdate:
            self.mode = update.mode or self.mode
            return [raw_value("current_mode", update)]
        if kind is f.AvailableCommandsUpdate:
            return [raw_value("available_commands", update)]
        if kind is f.ConfigOptionUpdate:
            self.config_options = update.config_options
            return [raw_value("config_options", update)]
        if kind is f.SessionInfoUpdate:
            return [raw_value("session_info", update)]
        if kind is f.UnstableUpdate:
            return [raw_value("unstable_update", update.body)]
        if kind is f.UnknownUpdate:
            reason = "unreadable_update" if update.problem else "unknown_update"
            return [raw_value(reason, {"update": update.body, "problem": update.problem}
                              if update.problem else update.body)]
        return [raw_value("unknown_update", update)]

    def _non_text(self, update: Any) -> AgentRaw:
        block = update.content
        tag = block.__struct_config__.tag
        return raw_value(f"content_{tag}", update)

    def _start(self, call: f.ToolCall) -> list[Event]:
        kind = call.kind if isinstance(call.kind, str) else "other"
        raw_input = call.raw_input if call.raw_input is not UNSET else None
        locations = call.locations if isinstance(call.locations, tuple) else ()
        state = ToolCallState(call.title, kind, raw_input, locations)
        self.calls[call.tool_call_id] = state
        out: list[Event] = [ToolCallStart(
            call_id=call.tool_call_id, name=call.name if isinstance(call.name, str) else kind,
            input=raw_input if isinstance(raw_input, dict) else {}, meta={"acp": _acp_meta(call)})]
        text = tool_text(call.content)
        if call.status in _FINISHED:
            state.ended = True
            state.text = text
            out.append(ToolCallEnd(call_id=call.tool_call_id, output=text,
                                   is_error=call.status == "failed"))
        elif text:
            state.text = text
            out.append(ToolCallDelta(call_id=call.tool_call_id, output_chunk=text))
        return out

    def _update(self, update: f.ToolCallUpdate) -> list[Event]:
        call_id = update.tool_call_id
        out: list[Event] = []
        state = self.calls.get(call_id)
        if state is None:  # an update for a call we never saw start: start it now
            title = update.title if isinstance(update.title, str) else ""
            out += self._start(f.ToolCall(
                tool_call_id=call_id, title=title,
                kind=update.kind if isinstance(update.kind, str) else UNSET,
                raw_input=update.raw_input,
                locations=update.locations if isinstance(update.locations, tuple) else UNSET))
            state = self.calls[call_id]
        if isinstance(update.title, str):
            state.title = update.title
        if isinstance(update.kind, str):
            state.kind = update.kind
        if update.raw_input is not UNSET and update.raw_input is not None:
            state.raw_input = update.raw_input
        if isinstance(update.locations, tuple):
            state.locations = update.locations
        meta = {"acp": _acp_meta(update)}
        text = tool_text(update.content) if isinstance(update.content, tuple) else state.text
        if update.status in _FINISHED and not state.ended:
            state.ended = True
            state.text = text
            if not text:
                text = _output_text(update.raw_output)
            out.append(ToolCallEnd(call_id=call_id, output=text,
                                   is_error=update.status == "failed", meta=meta))
            return out
        if text.startswith(state.text):
            chunk = text[len(state.text):]
        else:
            chunk = text
            meta["acp"]["replaced"] = True
        state.text = text
        out.append(ToolCallDelta(call_id=call_id, output_chunk=chunk, meta=meta))
        return out

    def _usage(self, update: f.UsageUpdate) -> Usage:
        meta: dict[str, Any] = {"used": update.used, "size": update.size}
        cost = 0.0
        if isinstance(update.cost, f.Cost):
            meta["cost"] = {"amount": update.cost.amount, "currency": update.cost.currency}
            if update.cost.currency.upper() == "USD":
                total = update.cost.amount
                cost = round(max(0.0, total - self.cost_usd), 12)
                self.cost_usd = max(self.cost_usd, total)
        return Usage(cost_usd_estimate=cost, meta={"acp": meta})


def prompt_error_code(code: int | None, message: str) -> str:
    lowered = message.lower()
    if code == f.AUTH_REQUIRED or "auth" in lowered:
        return "auth_error"
    if "rate limit" in lowered or "429" in lowered:
        return "rate_limit"
    if "context" in lowered and ("exceed" in lowered or "too long" in lowered):
        return "context_overflow"
    return "agent_error"


def prompt_usage(usage: dict[str, Any], stop: StopReason) -> Usage:
    def num(*keys: str) -> int:
        for key in keys:
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return 0

    return Usage(input_tokens=num("inputTokens", "input_tokens"),
                 output_tokens=num("outputTokens", "output_tokens"),
                 cache_read_tokens=num("cachedReadTokens", "cacheReadTokens"),
                 cache_creation_tokens=num("cachedWriteTokens", "cacheWriteTokens"),
                 thinking_tokens=num("thoughtTokens", "reasoningTokens"),
                 stop_reason=stop, meta={"acp": {"usage": usage}})
