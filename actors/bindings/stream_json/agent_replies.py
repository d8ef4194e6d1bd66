"""What the agent side says about itself: ``system/init``, the ``initialize`` answer, the
``result``, and the session's running usage totals.

Pure builders kept apart from the machine (``agent_side.py``), which decides
*when* each goes out; these only decide what Claude Code's clients need in
them (stream-json.md §3.2, §4.5): the required fields, Claude Code's result
subtypes and ``terminal_reason``s, and cumulative ``modelUsage``.
"""

from __future__ import annotations

from typing import Any

from trio_cap.actors.bindings.stream_json import frames as f
from trio_cap.actors.bindings.stream_json.agent_argv import AgentOptions
from trio_cap.actors.bindings.stream_json.agent_effects import Turn
from trio_cap.events.kinds import SessionConfig, StopReason, Usage

COMPAT_VERSION = "2.1.332"
"""The Claude Code version whose stream-json this speaks (``claude_code_version``, ``-v``)."""
EXTENSIONS = ("cap.session.config", "cap.transcript_diff", "cap.artifact", "cap.error",
              "cap.fragment", "cap.transcript")
TOOLS = ("Bash", "Edit", "Write", "TodoWrite")


def cap_block(agent_version: str) -> dict[str, Any]:
    return {"protocol": "cap-protocol/v1", "agent": "cap-agent", "version": agent_version,
            "extensions": list(EXTENSIONS)}


def tool_names(*, asks: bool, available: tuple[str, ...] | None) -> list[str]:
    """The tools ``system/init`` lists: ``AskUserQuestion`` only when asks can reach the
    client, and only those ``--tools`` leaves available."""
    names = [*TOOLS, "AskUserQuestion"] if asks else list(TOOLS)
    return names if available is None else [t for t in names if t in available]


def init_frame(*, session_id: str, uuid: str, cwd: str, model: str, mode: str,
               tools: list[str], agent_version: str) -> f.System:
    return f.System(
        subtype="init", session_id=session_id, uuid=uuid, cwd=cwd, model=model,
        permission_mode=mode, api_key_source="none", claude_code_version=COMPAT_VERSION,
        tools=tools, mcp_servers=[], slash_commands=[], output_style="default", agents=[],
        skills=[], plugins=[], capabilities=[], cap=cap_block(agent_version))


def initialize_info(*, model: str, pid: int | None, mode: str,
                    agent_version: str) -> dict[str, Any]:
    """The ``initialize`` answer (what ``get_server_info()`` returns to an SDK user)."""
    return {
        "commands": [], "agents": [], "output_style": "default",
        "available_output_styles": ["default"],
        "models": [{"value": model, "displayName": model,
                    "description": "trio-cap's scripted brain"}],
        "account": {}, "pid": pid, "claude_code_version": COMPAT_VERSION,
        "current_permission_mode": mode, "hook_on_failure_supported": False,
        "capabilities": [], "cap": cap_block(agent_version),
    }


class UsageTotals:
    """The session's sums: ``result.total_cost_usd``, ``duration_api_ms``, ``modelUsage``."""

    def __init__(self) -> None:
        self.cost = 0.0
        self.api_ms = 0
        self.tokens = 0
        self.models: dict[str, f.ModelUsage] = {}

    def add(self, event: Usage, model: str) -> None:
        self.cost += event.cost_usd_estimate
        self.api_ms += event.duration_ms
        self.tokens += event.input_tokens + event.output_tokens
        mu = self.models.setdefault(event.model_id or model, f.ModelUsage())
        mu.input_tokens += event.input_tokens
        mu.output_tokens += event.output_tokens
        mu.cache_read_input_tokens += event.cache_read_tokens
        mu.cache_creation_input_tokens += event.cache_creation_tokens
        mu.cost_usd += event.cost_usd_estimate


def result_fields(turn: Turn, stop: StopReason, *, max_turns: int | None,
                  final_text: str) -> dict[str, Any]:
    """Claude Code's result subtype for how the turn ended, with its errors or text."""
    if turn.refused:
        return {"subtype": "error_max_budget_usd", "errors": [turn.refused],
                "terminal_reason": "max_budget_usd"}
    if stop == "cancelled":
        return {"subtype": "error_during_execution",
                "errors": ["[cap] interrupted by the client"],
                "terminal_reason": "aborted_tools" if turn.aborted_tools
                else "aborted_streaming"}
    if stop == "tool_use":
        return {"subtype": "error_max_turns", "stop_reason": "tool_use",
                "errors": [f"Reached maximum number of turns ({max_turns})"],
                "terminal_reason": "max_turns"}
    if stop == "error":
        return {"subtype": "error_during_execution", "terminal_reason": "error",
                "errors": turn.errors or ["the turn failed"]}
    return {"subtype": "success", "result": final_text, "stop_reason": stop,
            "terminal_reason": "completed"}


def result_frame(turn: Turn, stop: StopReason, totals: UsageTotals, *, session_id: str,
                 uuid: str, max_turns: int | None, final_text: str,
                 transcript_seq: int) -> f.Result:
    usage = turn.usage or Usage()
    fields = result_fields(turn, stop, max_turns=max_turns, final_text=final_text)
    return f.Result(
        is_error=fields["subtype"] != "success", duration_ms=usage.duration_ms,
        duration_api_ms=totals.api_ms, num_turns=0 if turn.refused else turn.round_trips,
        session_id=session_id, total_cost_usd=round(totals.cost, 10),
        usage=f.MessageUsage(input_tokens=usage.input_tokens,
                             output_tokens=usage.output_tokens,
                             cache_creation_input_tokens=usage.cache_creation_tokens,
                             cache_read_input_tokens=usage.cache_read_tokens),
        model_usage=dict(totals.models), permission_denials=list(turn.denials),
        uuid=uuid, user_message_uuid=turn.user_uuid,
        meta={"cap.transcript_seq": transcript_seq}, **fields,
    )


def session_config(frame: f.CapSessionConfig | None, options: AgentOptions, cwd: str, *,
                   init_prompt: str | None, init_append: str | None) -> SessionConfig:
    """The session's ``cap.session.config``: a client's own config frame as given, else one
    built from the command line and ``initialize`` (whose system prompt wins over argv's;
    ``permission_mode`` ``interactive``, since the agent side applies Claude Code's mode)."""
    if frame is not None:
        return SessionConfig(cwd=frame.cwd, model=frame.model or options.model,
                             system_prompt=frame.system_prompt, max_turns=frame.max_turns,
                             budget_usd=frame.budget_usd, permission_mode=frame.permission_mode,
                             session_resume_id=frame.session_resume_id,
                             profile_config=frame.profile_config, meta=frame.meta)
    prompt = init_prompt if init_prompt is not None else options.system_prompt
    append = init_append or options.append_system_prompt
    if append:
        prompt = f"{prompt}\n{append}" if prompt else append
    return SessionConfig(cwd=cwd, model=options.model, system_prompt=prompt or None,
                         max_turns=options.max_turns, budget_usd=options.budget_usd,
                         permission_mode="interactive", session_resume_id=options.resume)


def static_reply(request: f.Request, *, tokens: int, model: str) -> tuple[bool, Any]:
    """``(ok, body)`` for the control requests whose answer depends on nothing but totals:
    the scripted agent has no MCP servers, checkpoints or background tasks."""
    match request:
        case f.McpStatus():
            return True, {"mcpServers": []}
        case f.GetContextUsage():
            return True, {"categories": [], "totalTokens": tokens, "maxTokens": 200_000,
                          "rawMaxTokens": 200_000, "percentage": tokens / 2000,
                          "model": model, "memoryFiles": [], "mcpTools": []}
        case f.RewindFiles():
            return False, "cap-agent keeps no file checkpoints to rewind to"
        case f.McpReconnect() | f.McpToggle():
            return False, f"no MCP server named {request.server_name!r}"
        case f.StopTask():
            return False, f"no task {request.task_id!r} is running"
    return False, f"{request.__struct_config__.tag} has no static answer"
