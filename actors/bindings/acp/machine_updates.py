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
_TOOL_CONTENT, _DIFF, _TERMINAL = f.ToolContent, f.Diff, f.TerminalRef
_PLAN_IDS = tuple(str(i) for i in range(1, 65))
"""A plan entry's id is its place in the list: the usual lengths' ids made once."""
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


def _content_meta(content: tuple[f.ToolCallContent, ...], meta: dict[str, Any]) -> str:
    """One pass over a call's content list: its diffs and terminals go to ``meta`` (in
    that order), and its text (the text blocks joined by newlines) is returned."""
    diffs: list[Any] = []
    terminals: list[str] = []
    parts: list[str] = []
    for item in content:
        kind = type(item)
        if kind is _TOOL_CONTENT:
            block = item.content
            part = block.text if type(block) in _TEXTS else f.content_text(block)
            if part:
                parts.append(part)
        elif kind is _DIFF:
            diffs.append(item)
        elif kind is _TERMINAL:
            terminals.append(item.terminal_id)
    if diffs:
        meta["diffs"] = list(_to_builtins(diffs))  # a tuple of structs → a list of dicts
    if terminals:
        meta["terminals"] = terminals
    if not parts:
        return ""
    return parts[0] if len(parts) == 1 else "\n".join(parts)


def _acp_meta(call: f.ToolCall) -> tuple[dict[str, Any], str]:
    """A started call's ``_meta.acp`` and its content's text.

    Keys in order: title, kind, status, locations, diffs, terminals, raw_output (an
    update's are built the same way in :meth:`UpdateMapper._update`, plus raw_input).
    The fields are ``str``/tuple, ``UNSET`` or None, so identity tests say it all.
    """
    meta: dict[str, Any] = {"title": call.title}
    if call.kind is not UNSET:
        meta["kind"] = call.kind
    if call.status is not UNSET:
        meta["status"] = call.status
    if call.locations is not UNSET:
        meta["locations"] = list(_to_builtins(call.locations))
    content = call.content
    text = _content_meta(content, meta) if content is not UNSET and content else ""
    if call.raw_output is not UNSET:
        meta["raw_output"] = call.raw_output
    return meta, text


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
        """One update → its events; ``message_id`` is the turn's id for chunks without one.

        Chunks first (the most frequent), then one dict look-up by type instead of
        a chain of ``is`` tests (``_ROUTES``, below the class).
        """
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
        route = _ROUTES.get(kind)
        if route is None:
            return [raw_value("unknown_update", update)]
        return route(self, update, message_id)  # type: ignore[no-any-return]

    def _tool_call(self, call: f.ToolCall, message_id: str) -> list[Event]:
        if call.tool_call_id in self.calls:  # claude-code-acp announces a call twice
            return self._update(call)  # read as the update it is (same fields)
        return self._start(call)

    def _plan(self, update: f.Plan, message_id: str) -> list[Event]:
        entries = update.entries
        ids = _PLAN_IDS if len(entries) <= len(_PLAN_IDS) else [str(i) for i in range(
            1, len(entries) + 1)]  # entries are numbered in order: "1", "2" …
        return [Plan(entries=tuple([
            PlanEntry(id=i, content=e.content, status=e.status, priority=e.priority)
            for i, e in zip(ids, entries)]))]  # noqa: B905 (ids may be longer)

    def _user_chunk(self, update: f.UserMessageChunk, message_id: str) -> list[Event]:
        content = update.content
        if type(content) is f.TextContent:
            mid = update.message_id if isinstance(update.message_id, str) else message_id
            return [TextChunk(message_id=mid, text=content.text, channel="system",
                              meta={"acp": {"role": "user"}})]
        return [self._non_text(update)]

    def _mode(self, update: f.CurrentModeUpdate, message_id: str) -> list[Event]:
        self.mode = update.mode or self.mode
        return [raw_value("current_mode", update)]

    def _config(self, update: f.ConfigOptionUpdate, message_id: str) -> list[Event]:
        self.config_options = update.config_options
        return [raw_value("config_options", update)]

    def _unknown(self, update: f.UnknownUpdate, message_id: str) -> list[Event]:
        reason = "unreadable_update" if update.problem else "unknown_update"
        return [raw_value(reason, {"update": update.body, "problem": update.problem}
                          if update.problem else update.body)]

    def _non_text(self, update: Any) -> AgentRaw:
        block = update.content
        tag = block.__struct_config__.tag
        return raw_value(f"content_{tag}", update)

    def _start(self, call: f.ToolCall) -> list[Event]:
        kind = call.kind if call.kind is not UNSET else "other"
        raw_input = call.raw_input if call.raw_input is not UNSET else None
        locations = call.locations if call.locations is not UNSET else ()
        state = ToolCallState(call.title, kind, raw_input, locations)
        self.calls[call.tool_call_id] = state
        acp, text = _acp_meta(call)
        out: list[Event] = [ToolCallStart(
            call_id=call.tool_call_id, name=call.name if call.name is not UNSET else kind,
            input=raw_input if isinstance(raw_input, dict) else {}, meta={"acp": acp})]
        if call.status in _FINISHED:
            state.ended = True
            state.text = text
            out.append(ToolCallEnd(call_id=call.tool_call_id, output=text,
                                   is_error=call.status == "failed"))
        elif text:
            state.text = text
            out.append(ToolCallDelta(call_id=call.tool_call_id, output_chunk=text))
        return out

    def _update(self, update: f.ToolCallUpdate | f.ToolCall, message_id: str = "") -> list[Event]:
        """A ``tool_call_update`` (or a repeated ``tool_call``: the fields are the same)."""
        call_id = update.tool_call_id
        state = self.calls.get(call_id)
        if state is None:  # an update for a call we never saw start: start it now
            title = update.title if isinstance(update.title, str) else ""
            out = self._start(f.ToolCall(
                tool_call_id=call_id, title=title,
                kind=update.kind if isinstance(update.kind, str) else UNSET,
                raw_input=update.raw_input,
                locations=update.locations if isinstance(update.locations, tuple) else UNSET))
            state = self.calls[call_id]
        else:
            out = []
        # each field that is set: into ``_meta.acp`` (keys in _acp_meta's order) and,
        # for what a permission prompt needs, into the call's state
        acp: dict[str, Any] = {}
        value = update.title
        if value is not UNSET and value is not None:
            acp["title"] = state.title = value
        value = update.kind
        if value is not UNSET and value is not None:
            acp["kind"] = state.kind = value
        status = update.status
        if status is not UNSET and status is not None:
            acp["status"] = status
        value = update.locations
        if value is not UNSET and value is not None:
            state.locations = value
            acp["locations"] = list(_to_builtins(value))
        content = update.content
        if content is UNSET or content is None:
            text = state.text
        else:
            text = _content_meta(content, acp) if content else ""
        value = update.raw_output
        if value is not UNSET:
            acp["raw_output"] = value
        value = update.raw_input
        if value is not UNSET and value is not None:
            acp["raw_input"] = state.raw_input = value  # the start may not have had it
        if (status == "completed" or status == "failed") and not state.ended:
            state.ended = True
            state.text = text
            if not text:
                text = _output_text(update.raw_output)
            out.append(ToolCallEnd(call_id=call_id, output=text,
                                   is_error=status == "failed", meta={"acp": acp}))
            return out
        if text.startswith(state.text):
            chunk = text[len(state.text):]
        else:
            chunk = text
            acp["replaced"] = True
        state.text = text
        out.append(ToolCallDelta(call_id=call_id, output_chunk=chunk, meta={"acp": acp}))
        return out

    def _usage(self, update: f.UsageUpdate, message_id: str) -> list[Event]:
        meta: dict[str, Any] = {"used": update.used, "size": update.size}
        cost = 0.0
        spent = update.cost
        if type(spent) is f.Cost:
            total, currency = spent.amount, spent.currency
            meta["cost"] = {"amount": total, "currency": currency}
            if currency == "USD" or currency.upper() == "USD":
                cost = round(max(0.0, total - self.cost_usd), 12)
                self.cost_usd = max(self.cost_usd, total)
        return [Usage(cost_usd_estimate=cost, meta={"acp": meta})]


def _raw_route(reason: str) -> Any:
    """A route for an update kept as ``agent.raw`` with nothing to act on."""
    return lambda mapper, update, message_id: [raw_value(reason, update)]


_ROUTES: dict[type, Any] = {
    f.ToolCallUpdate: UpdateMapper._update,
    f.ToolCall: UpdateMapper._tool_call,
    f.Plan: UpdateMapper._plan,
    f.UsageUpdate: UpdateMapper._usage,
    f.UserMessageChunk: UpdateMapper._user_chunk,
    f.CurrentModeUpdate: UpdateMapper._mode,
    f.AvailableCommandsUpdate: _raw_route("available_commands"),
    f.ConfigOptionUpdate: UpdateMapper._config,
    f.SessionInfoUpdate: _raw_route("session_info"),
    f.UnstableUpdate: lambda mapper, update, message_id: [
        raw_value("unstable_update", update.body)],
    f.UnknownUpdate: UpdateMapper._unknown,
}
"""``map``'s dispatch for every kind but the chunks: update type → ``(mapper, update,
message_id) -> events``."""


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
