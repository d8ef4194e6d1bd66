"""The core's events as stream-json frames: text, tool calls, permission prompts, asks,
plans, usage and artifacts, each rendered when it is processed (rule 8 of :mod:`.agent_side`).

Split from :mod:`.agent_side` so the machine module keeps its stdin, turns, control
requests and the output gate, while the one job of turning what the core emits into
Claude-shaped frames (and the core's replies that settle a prompt) lives here.  A mixin
of :class:`.agent_side.AgentSide`: the annotations below are the machine's state it reads
and writes; the methods that raise are the machine's, which it calls to write and record.

Pure: ``events/``, this package's frames and helpers, and ``bindings/base.py`` only (a
machine helper, DESIGN §2a).
"""

from __future__ import annotations

from typing import Any

from trio_cap.actors.bindings.base import CALL_ID, DECIDED_BY, MEMBER
from trio_cap.actors.bindings.stream_json import agent_policy as policy
from trio_cap.actors.bindings.stream_json import agent_replies as replies
from trio_cap.actors.bindings.stream_json import agent_tools as tools
from trio_cap.actors.bindings.stream_json import frames as f
from trio_cap.actors.bindings.stream_json.agent_argv import AgentOptions
from trio_cap.actors.bindings.stream_json.agent_effects import Call, Effect, Prompt, Send, Turn
from trio_cap.actors.bindings.stream_json.agent_messages import (
    MessageBuilder,
    NewId,
    tool_use_id,
)
from trio_cap.events.errors import numeric
from trio_cap.events.kinds import (
    Artifact,
    AskUser,
    AskUserAnswer,
    CapError,
    Event,
    PermissionRequest,
    PermissionResponse,
    Plan,
    SessionConfig,
    TextChunk,
    Thought,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

CLOSED = "stdin closed before the client answered"
"""Why a prompt is denied once stdin has closed (rule 7)."""


class CoreEvents:
    """The core-event half of the agent side (a mixin of :class:`.agent_side.AgentSide`)."""

    options: AgentOptions
    cwd: str
    session_id: str
    new_id: NewId
    mode: str
    builder: MessageBuilder
    config: SessionConfig | None
    totals: replies.UsageTotals
    current_model: str
    _speaker: object
    _allowed: tuple[str, ...]
    _turn: Turn | None
    _prompts: dict[str, Prompt]
    _stdin_closed: bool

    def _send(self, frame: Any) -> list[Effect]:
        raise NotImplementedError

    def _frames(self, frames: list[f.Frame]) -> list[Effect]:
        raise NotImplementedError

    def _control_send(self, frame: f.ControlRequest | f.ControlResponse
                      | f.ControlCancelRequest) -> Send:
        raise NotImplementedError

    def _extension(self, subtype: str, body: Any) -> list[Effect]:
        raise NotImplementedError

    def _reply(self, frame: Event) -> list[Effect]:
        raise NotImplementedError

    def _agent_event(self, event: Event) -> list[Effect]:
        turn = self._turn
        match event:
            case TextChunk():
                speaker = (event.meta or {}).get(MEMBER)
                ended = [] if speaker == self._speaker else self.builder.end_message()
                self._speaker = speaker
                return self._frames(ended + self.builder.text(
                    event.text, thinking=event.channel == "thought"))
            case Thought():
                return self._frames(self.builder.text(event.text, thinking=True))
            case ToolCallStart() if turn is not None:
                wire = policy.to_wire(event.name, event.input, self._turn_cwd)
                call = Call(tool_use_id(self.new_id), event.name, event.input, wire)
                turn.calls[event.call_id] = turn.last_call = call
                return self._frames(self.builder.tool_use(call.tool_use_id, event.name, wire))
            case PermissionRequest() if turn is not None:
                # the call it is about: named when calls of several agents interleave (a
                # fleet face's members), else the turn's last
                named = turn.calls.get(str((event.meta or {}).get(CALL_ID)))
                call = named or turn.last_call or Call(tool_use_id(self.new_id), event.tool,
                                                       event.intent, dict(event.intent))
                return self._permission(event, turn, call)
            case ToolCallEnd() if turn is not None and event.call_id in turn.calls:
                return self._tool_end(event, turn)
            case AskUser() if turn is not None:
                return self._ask(event, turn)
            case Plan() if turn is not None:
                return self._plan(event, turn)
            case Usage():
                return self._usage(event)
            case CapError():
                if turn is not None:
                    turn.errors.append(f"{event.code}: {event.message}")
                body = f.ErrorBody(code=event.code, message=event.message,
                                   numeric=numeric(event.code), retryable=event.retryable)
                return self._extension("cap.error", body)
            case Artifact():
                return self._artifact(event)
        return []

    @property
    def _turn_cwd(self) -> str:
        return self.config.cwd if self.config is not None else self.cwd

    def _permission(self, event: PermissionRequest, turn: Turn, call: Call) -> list[Effect]:
        decision = policy.decide(
            mode=self.mode, tool=event.tool, scope=event.scope, wire=call.wire,
            allowed=self._allowed, disallowed=self.options.disallowed_tools,
            available=self.options.tools, prompts_on_stdio=self.options.prompts_on_stdio)
        if decision.verdict == "allow":
            return self._reply(PermissionResponse(req_id=event.req_id, decision="allow_once",
                                                  meta={DECIDED_BY: decision.reason}))
        if decision.verdict == "deny":
            notice = tools.permission_denied(self.session_id, self.new_id(), call,
                                             decision.reason)
            return self._send(notice) + self._deny(event.req_id, turn, call, decision.reason,
                                                   "policy")
        if self._stdin_closed:  # rule 7: nobody is left to answer a prompt sent now
            return self._deny(event.req_id, turn, call, CLOSED, "client")
        request_id = self.new_id()
        self._prompts[request_id] = Prompt(request_id, "permission", event.req_id, call)
        command = event.intent.get("command")
        member = (event.meta or {}).get(MEMBER)
        return [self._control_send(tools.can_use_tool(
            request_id, call, command if isinstance(command, str) and command else None,
            risk=event.risk_level, agent_id=member if isinstance(member, str) else None))]

    def _deny(self, req_id: str, turn: Turn, call: Call, message: str,
              by: str) -> list[Effect]:
        turn.denials.append(tools.denial(call))
        for call_id, known in turn.calls.items():
            if known is call:
                turn.deny_messages[call_id] = message
        return self._reply(PermissionResponse(req_id=req_id, decision="deny",
                                              meta=tools.deny_meta(by, message)))

    def _tool_end(self, event: ToolCallEnd, turn: Turn) -> list[Effect]:
        call = turn.calls[event.call_id]
        turn.round_trips += 1
        content, detail = tools.tool_result_detail(call, event,
                                                   turn.deny_messages.get(event.call_id))
        return self._send(self.builder.tool_result(call.tool_use_id, content,
                                                   is_error=event.is_error,
                                                   tool_use_result=detail))

    def _plan(self, event: Plan, turn: Turn) -> list[Effect]:
        todos = tools.todos(event.entries)
        call_id = tool_use_id(self.new_id)
        out = self._frames(self.builder.tool_use(call_id, "TodoWrite", {"todos": todos}))
        turn.round_trips += 1
        return out + self._send(self.builder.tool_result(
            call_id, tools.TODO_RESULT, is_error=False, tool_use_result={"newTodos": todos}))

    def _ask(self, event: AskUser, turn: Turn) -> list[Effect]:
        wire = tools.ask_wire(event)
        call = Call(tool_use_id(self.new_id), "AskUserQuestion", {}, wire)
        prompt = Prompt("", "ask", event.ask_id, call, event.prompt)
        out = self._frames(self.builder.tool_use(call.tool_use_id, call.name, wire))
        if not self.options.prompts_on_stdio or self._stdin_closed:
            declined = f.PermissionDeny(message=CLOSED if self.options.prompts_on_stdio else
                                        "no --permission-prompt-tool stdio to ask through")
            return out + self._ask_answered(prompt, declined, turn)
        prompt.request_id = request_id = self.new_id()
        self._prompts[request_id] = prompt
        return [*out, self._control_send(tools.can_use_tool(request_id, call))]

    def _ask_answered(self, prompt: Prompt, result: f.AnyPermissionResult,
                      turn: Turn) -> list[Effect]:
        value, text, is_error = tools.ask_reply(prompt, result)
        turn.round_trips += 1
        frame = self.builder.tool_result(prompt.call.tool_use_id, text, is_error=is_error,
                                         tool_use_result=text)
        return self._send(frame) + self._reply(AskUserAnswer(ask_id=prompt.ref, value=value))

    def _usage(self, event: Usage) -> list[Effect]:
        if self._turn is not None:
            self._turn.usage = event
        self.totals.add(event, self.current_model)
        return []

    def _artifact(self, event: Artifact) -> list[Effect]:
        body = f.ArtifactBody(artifact_id=event.artifact_id, mime_type=event.mime_type,
                              name=event.name, size=event.size, uri=event.uri,
                              content=event.content)
        # the core's artifacts come at the end of a turn: the model's message is over by then
        out = self._frames(self.builder.end_message("end_turn")) if self._turn else []
        return out + self._extension("cap.artifact", body)
