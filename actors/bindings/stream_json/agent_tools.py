"""Tool calls, permissions, asks and plans: the part of the agent side that talks
``can_use_tool``.

A mixin of :class:`~actors.bindings.stream_json.agent_side.AgentSide` (it uses
the machine's state and output helpers); kept apart because this is where
Claude Code's permission semantics live — decided locally by mode and rules,
or asked of the client and mapped back onto ``cap.permission.response`` /
``cap.ask_user.answer`` for the core.
"""

from __future__ import annotations

from typing import Any

import msgspec

from trio_cap.actors.bindings.base import UPDATED_INPUT
from trio_cap.actors.bindings.stream_json import agent_policy as policy
from trio_cap.actors.bindings.stream_json import frames as f
from trio_cap.actors.bindings.stream_json.agent_argv import AgentOptions
from trio_cap.actors.bindings.stream_json.agent_effects import (
    Call,
    Deliver,
    Effect,
    Prompt,
    Record,
    Turn,
)
from trio_cap.actors.bindings.stream_json.agent_messages import FrameIds, MessageBuilder
from trio_cap.events.kinds import (
    AskUser,
    AskUserAnswer,
    CapError,
    Event,
    PermissionRequest,
    PermissionResponse,
    Plan,
    SessionConfig,
    ToolCallEnd,
)


class ToolFlow:
    options: AgentOptions
    session_id: str
    mode: str
    ids: FrameIds
    builder: MessageBuilder
    config: SessionConfig | None
    _allowed: tuple[str, ...]
    _prompts: dict[str, Prompt]
    _turn: Turn | None

    def _send(self, frame: Any) -> Effect:
        raise NotImplementedError

    def _frames(self, frames: list[f.Frame]) -> list[Effect]:
        raise NotImplementedError

    def _interrupt_turn(self, turn: Turn) -> list[Effect]:
        raise NotImplementedError

    def _permission(self, event: PermissionRequest, turn: Turn, call: Call) -> list[Effect]:
        decision = policy.decide(
            mode=self.mode, tool=event.tool, scope=event.scope, wire=call.wire,
            allowed=self._allowed, disallowed=self.options.disallowed_tools,
            available=self.options.tools, prompts_on_stdio=self.options.prompts_on_stdio)
        if decision.verdict == "allow":
            return self._reply(PermissionResponse(req_id=event.req_id, decision="allow_once",
                                                  meta={"cap.decided_by": decision.reason}))
        if decision.verdict == "deny":
            out = [self._send(f.System(subtype="permission_denied", session_id=self.session_id,
                                       uuid=self.ids.uuid(), tool_name=call.name,
                                       tool_use_id=call.tool_use_id, message=decision.reason))]
            return out + self._deny(event.req_id, turn, call, decision.reason, "policy")
        request_id = self.ids.uuid()
        self._prompts[request_id] = Prompt(request_id, "permission", event.req_id, call)
        request = f.CanUseTool(tool_name=call.name, display_name=call.name, input=call.wire,
                               tool_use_id=call.tool_use_id, permission_suggestions=[],
                               blocked_path=policy.blocked_path(call.name, call.wire),
                               description=event.intent.get("command") or None)
        return [self._send(f.ControlRequest(request_id=request_id, request=request))]

    def _deny(self, req_id: str, turn: Turn, call: Call, message: str,
              by: str) -> list[Effect]:
        turn.denials.append(f.PermissionDenial(tool_name=call.name, tool_use_id=call.tool_use_id,
                                               tool_input=call.wire))
        for call_id, known in turn.calls.items():
            if known is call:
                turn.deny_messages[call_id] = message
        return self._reply(PermissionResponse(
            req_id=req_id, decision="deny", meta={"cap.decided_by": by, "cap.message": message}))

    def _reply(self, frame: Event) -> list[Effect]:
        return [Record((frame,)), Deliver((frame,))]

    def _answer(self, body: f.ResponseBody) -> list[Effect]:
        prompt = self._prompts.pop(body.request_id, None)
        if prompt is None:
            error = CapError(code="cap_unknown_permission",
                             message=f"no permission prompt is waiting on {body.request_id!r}")
            return [Record((error,))]
        turn = self._turn
        assert turn is not None
        result: f.AnyPermissionResult
        if body.subtype == "error":
            result = f.PermissionDeny(message=body.error or "the client's callback failed")
        else:
            try:
                result = msgspec.convert(body.response, f.AnyPermissionResult)
            except msgspec.ValidationError as exc:
                result = f.PermissionDeny(message=f"unreadable permission answer: {exc}")
        if prompt.kind == "ask":
            return self._ask_answered(prompt, result, turn)
        call = prompt.call
        if isinstance(result, f.PermissionDeny):
            out = self._deny(prompt.ref, turn, call, result.message or "denied", "client")
            if result.interrupt:
                out += self._interrupt_turn(turn)
            return out
        meta: dict[str, Any] = {"cap.decided_by": "client"}
        if result.updated_input is not None:
            assert self.config is not None
            updated = policy.from_wire(call.name, result.updated_input, self.config.cwd)
            if updated != call.intent:
                meta[UPDATED_INPUT] = updated
        decision = "allow_always" if result.updated_permissions else "allow_once"
        if result.updated_permissions:
            self._allowed += (call.name,)
        return self._reply(PermissionResponse(req_id=prompt.ref, decision=decision, meta=meta))

    def _tool_end(self, event: ToolCallEnd, turn: Turn) -> list[Effect]:
        call = turn.calls[event.call_id]
        turn.round_trips += 1
        denied = turn.deny_messages.get(event.call_id)
        content = denied if denied is not None else event.output
        if denied is not None:
            detail: Any = f"Error: {denied}"
        elif call.name == "Bash":
            detail = {"stdout": event.output, "stderr": "", "interrupted": False,
                      "isImage": False}
        else:
            detail = event.output
        frame = self.builder.tool_result(call.tool_use_id, content, is_error=event.is_error,
                                         tool_use_result=detail)
        return [self._send(frame)]

    def _plan(self, event: Plan, turn: Turn) -> list[Effect]:
        status = {"in_progress": "in_progress", "completed": "completed",
                  "cancelled": "completed"}
        todos = [{"content": e.content, "status": status.get(e.status, "pending"),
                  "activeForm": e.content} for e in event.entries]
        tool_use_id = self.ids.tool_use()
        out = self._frames(self.builder.tool_use(tool_use_id, "TodoWrite", {"todos": todos}))
        turn.round_trips += 1
        text = ("Todos have been modified successfully. Ensure that you continue to use the "
                "todo list to track your progress.")
        out.append(self._send(self.builder.tool_result(
            tool_use_id, text, is_error=False, tool_use_result={"newTodos": todos})))
        return out

    def _ask(self, event: AskUser, turn: Turn) -> list[Effect]:
        options = [o.get("const") for o in (event.form or {}).get("oneOf", [])
                   if isinstance(o, dict) and isinstance(o.get("const"), str)]
        wire = {"questions": [{"question": event.prompt, "header": event.prompt[:12],
                               "options": [{"label": o, "description": ""} for o in options],
                               "multiSelect": False}]}
        call = Call(self.ids.tool_use(), "AskUserQuestion", {}, wire)
        out = self._frames(self.builder.tool_use(call.tool_use_id, call.name, wire))
        if not self.options.prompts_on_stdio:
            return out + self._ask_answered(
                Prompt("", "ask", event.ask_id, call, event.prompt),
                f.PermissionDeny(message="no --permission-prompt-tool stdio to ask through"),
                turn)
        request_id = self.ids.uuid()
        self._prompts[request_id] = Prompt(request_id, "ask", event.ask_id, call, event.prompt)
        request = f.CanUseTool(tool_name=call.name, display_name=call.name, input=wire,
                               tool_use_id=call.tool_use_id, permission_suggestions=[])
        return [*out, self._send(f.ControlRequest(request_id=request_id, request=request))]

    def _ask_answered(self, prompt: Prompt, result: f.AnyPermissionResult,
                      turn: Turn) -> list[Effect]:
        value: Any = None
        if isinstance(result, f.PermissionAllow):
            answers = (result.updated_input or {}).get("answers") or {}
            if isinstance(answers, dict) and answers:
                value = answers.get(prompt.question, next(iter(answers.values())))
        if value is None:
            text, is_error = f"User declined to answer: {getattr(result, 'message', '')}", True
        else:
            text = (f'User has answered your questions: "{prompt.question}"="{value}". '
                    "You can now continue with the user's answers in mind.")
            is_error = False
        turn.round_trips += 1
        frame = self.builder.tool_result(prompt.call.tool_use_id, text, is_error=is_error,
                                         tool_use_result=text)
        answer = AskUserAnswer(ask_id=prompt.ref, value=value)
        return [self._send(frame), *self._reply(answer)]
