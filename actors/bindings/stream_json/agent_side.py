"""The agent side of stream-json as a sans-io machine: what an SDK client sends → core frames,
what the core emits → stream-json bytes.

Modelled on h11: no I/O, no clock, no randomness.  The shell feeds it stdin
bytes (:meth:`AgentSide.receive_data`, :meth:`AgentSide.receive_eof`), the
envelopes it appended to the event log (:meth:`AgentSide.logged` — the core's
events and the machine's own records alike), turn ends
(:meth:`AgentSide.turn_ended`) and timer ticks, and carries out the effects
each call returns, in order: :class:`Send` bytes to stdout, :class:`Record`
events in the log (then hand the envelopes back), :class:`Deliver` frames to
the core, and so on.  Because the machine sees what was logged only through
:meth:`logged`, the transcript diffs it sends are the log, by construction.

It owns the turn queue — the core gets one prompt at a time — because
stream-json needs per-turn bookkeeping the core knows nothing of: a
``system/init`` before each turn, exactly one ``result`` after it, the budget
check before it starts, and which ``can_use_tool`` requests an interrupt
withdraws.  One ``result`` per user frame (Claude Code merges queued prompts;
the SDKs accept either, stream-json.md §4.4).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import msgspec

from trio_cap.actors.agent.core import RAW_LINE
from trio_cap.actors.bindings.stream_json import agent_policy as policy
from trio_cap.actors.bindings.stream_json import frames as f
from trio_cap.actors.bindings.stream_json.agent_argv import PERMISSION_MODES, AgentOptions
from trio_cap.actors.bindings.stream_json.agent_effects import (
    Call,
    Deliver,
    Effect,
    Finish,
    Note,
    Prompt,
    ReadTranscript,
    Record,
    Send,
    SetModel,
    Turn,
)
from trio_cap.actors.bindings.stream_json.agent_messages import FrameIds, MessageBuilder
from trio_cap.actors.bindings.stream_json.agent_tools import ToolFlow
from trio_cap.actors.bindings.stream_json.agent_transcript import (
    TRANSCRIPT_MIME,
    TranscriptDiffs,
    extension_lines,
    transcript_document,
)
from trio_cap.events.envelope import Envelope
from trio_cap.events.errors import numeric
from trio_cap.events.kinds import (
    AgentRaw,
    Artifact,
    AskUser,
    Cancel,
    CapError,
    ContentBlock,
    Event,
    PermissionRequest,
    Plan,
    SessionConfig,
    StopReason,
    TextChunk,
    Thought,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UserInputInject,
)

__all__ = [
    "COMPAT_VERSION", "AgentSide", "Deliver", "Effect", "Finish", "Note", "ReadTranscript",
    "Record", "Send", "SetModel",
]

COMPAT_VERSION = "2.1.332"
"""The Claude Code version whose stream-json this speaks (``claude_code_version``, ``-v``)."""
EXTENSIONS = ("cap.session.config", "cap.transcript_diff", "cap.artifact", "cap.error",
              "cap.fragment", "cap.transcript")
MAX_INPUT_LINE = 64 << 20


class AgentSide(ToolFlow):
    def __init__(self, options: AgentOptions, *, session_id: str, default_model: str,
                 pid: int | None = None, agent_version: str = "") -> None:
        self.options = options
        self.session_id = session_id
        self.default_model = default_model
        self.pid = pid
        self.agent_version = agent_version
        self.mode = options.permission_mode
        self.model = options.model
        self.ids = FrameIds(session_id)
        self.builder = MessageBuilder(self.ids, session_id, partial=options.partial_messages)
        self.diffs = TranscriptDiffs(options.diff_every)
        self.config: SessionConfig | None = None
        self._config_frame: f.CapSessionConfig | None = None
        self._init_prompt: str | None = None
        self._init_append: str | None = None
        self._allowed = options.allowed_tools
        self._buf = bytearray()
        self._queue: deque[tuple[str, str | None]] = deque()
        self._turn: Turn | None = None
        self._prompts: dict[str, Prompt] = {}
        self._eof = False
        self._ending = False
        self._artifacts: dict[str, tuple[str, str | None]] = {}  # id -> (content, request_id)
        self._transcripts = 0
        self.total_cost = 0.0
        self._api_ms = 0
        self._model_usage: dict[str, f.ModelUsage] = {}
        self._tokens = 0

    # ---- stdin ---------------------------------------------------------------------
    def receive_data(self, data: bytes) -> list[Effect]:
        self._buf += data
        out: list[Effect] = []
        while (end := self._buf.find(b"\n")) >= 0:
            line = bytes(self._buf[:end]).strip()
            del self._buf[: end + 1]
            out += self._line(line)
        if len(self._buf) > MAX_INPUT_LINE:
            self._buf.clear()
            out.append(Note(f"dropped an input line longer than {MAX_INPUT_LINE} bytes"))
        return out

    def receive_eof(self) -> list[Effect]:
        """stdin closed: finish the queued turns; prompts nobody can answer now are denied."""
        out = self._line(bytes(self._buf).strip()) if self._buf.strip() else []
        self._buf.clear()
        self._eof = True
        for request_id in list(self._prompts):
            body = f.ResponseBody(subtype="error", request_id=request_id,
                                  error="stdin closed before the client answered")
            out += self._answer(body)
        return out + self._next_turn()

    def core_failed(self, message: str) -> list[Effect]:
        """The brain crashed: the running turn fails, the session ends with exit code 1."""
        self._queue.clear()
        self._ending = True  # no transcript artifact: the log is what is left to read
        return [Record((CapError(code="internal_error", message=message),), after="core-failed")]

    def user_text(self, text: str) -> list[Effect]:
        """A prompt given on the command line (``--input-format text``)."""
        self._queue.append((text, None))
        return self._next_turn()

    def _line(self, line: bytes) -> list[Effect]:
        if not line:
            return []
        if not line.startswith(b"{"):
            return [Note(f"ignored a non-JSON input line: {line[:80]!r}")]
        try:
            frame = f.decode_frame(line)
        except f.UnknownFrame as exc:
            return [Note(f"ignored a frame of unknown type {exc.frame_type!r}")]
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            error = CapError(code="parse_failed", message=f"bad input frame: {exc}",
                             details={"line": line[:500].decode(errors="replace")})
            return [Record((error,))]
        match frame:
            case f.User():
                return self._user(frame)
            case f.ControlRequest():
                return self._control(frame)
            case f.ControlResponse():
                return self._answer(frame.response)
            case f.CapSessionConfig():
                return self._session_config(frame)
            case f.KeepAlive() | f.ControlCancelRequest():
                return []
            case _:
                return [Note(f"ignored a {type(frame).__name__} frame sent to the agent")]

    # ---- prompts and turns -----------------------------------------------------------
    def _user(self, frame: f.User) -> list[Effect]:
        content = frame.message.content
        if isinstance(content, str):
            text = content
        else:
            text = "\n".join(b.text for b in content if isinstance(b, f.TextBlock))
        self._queue.append((text, frame.uuid))
        return self._next_turn()

    def _session_config(self, frame: f.CapSessionConfig) -> list[Effect]:
        if self.config is not None:
            error = CapError(code="cap_session_config_missing",
                             message="cap.session.config must come before the first user "
                                     "message; this one arrived after the session started "
                                     "and was refused")
            return [Record((error,))]
        self._config_frame = frame
        return []

    def _effective_config(self) -> SessionConfig:
        c = self._config_frame
        if c is not None:
            self.model = c.model or self.model
            return SessionConfig(cwd=c.cwd, model=c.model or self.options.model,
                                 system_prompt=c.system_prompt, max_turns=c.max_turns,
                                 budget_usd=c.budget_usd, permission_mode=c.permission_mode,
                                 session_resume_id=c.session_resume_id,
                                 profile_config=c.profile_config, meta=c.meta)
        o = self.options
        prompt = self._init_prompt if self._init_prompt is not None else o.system_prompt
        append = self._init_append or o.append_system_prompt
        if append:
            prompt = f"{prompt}\n{append}" if prompt else append
        return SessionConfig(cwd=o.cwd, model=o.model, system_prompt=prompt or None,
                             max_turns=o.max_turns, budget_usd=o.budget_usd,
                             permission_mode="interactive", session_resume_id=o.resume)

    def _next_turn(self) -> list[Effect]:
        if self._turn is not None:
            return []
        if not self._queue:
            return self._end_session() if self._eof else []
        text, user_uuid = self._queue.popleft()
        out: list[Effect] = []
        if self.config is None:
            self.config = self._effective_config()
            out += [Record((self.config,)), Deliver((self.config,))]
        turn = self._turn = Turn(user_uuid=user_uuid)
        self.builder.model = self.current_model
        self.builder.final_text = ""
        out.append(self._send(self._init_frame()))
        if self.options.partial_messages:
            out.append(self._send(f.System(subtype="status", status="requesting",
                                           session_id=self.session_id, uuid=self.ids.uuid())))
        budget = self.config.budget_usd
        if budget is not None and self.total_cost >= budget:
            turn.refused = (f"cap_budget_exceeded: the session has spent ${self.total_cost:.6f} "
                            f"of its ${budget:.6f} budget; the turn was not started")
            error = CapError(code="cap_budget_exceeded", message=turn.refused,
                             details={"prompt": text})
            return [*out, Record((error,), after="refused")]
        inject = UserInputInject(content=(ContentBlock(text=text),))
        return [*out, Record((inject,), after="inject"), Deliver((inject,))]

    @property
    def current_model(self) -> str:
        return self.model or self.default_model

    @property
    def cause(self) -> int | None:
        """The seq the core's current events point at: their turn's prompt."""
        return self._turn.cause if self._turn else None

    def _init_frame(self) -> f.System:
        assert self.config is not None
        tools = ["Bash", "Edit", "Write", "TodoWrite"]
        if self.options.prompts_on_stdio:
            tools.append("AskUserQuestion")
        if self.options.tools is not None:
            tools = [t for t in tools if t in self.options.tools]
        return f.System(
            subtype="init", session_id=self.session_id, uuid=self.ids.uuid(),
            cwd=self.config.cwd, model=self.current_model, permission_mode=self.mode,
            api_key_source="none", claude_code_version=COMPAT_VERSION, tools=tools,
            mcp_servers=[], slash_commands=[], output_style="default", agents=[], skills=[],
            plugins=[], capabilities=[],
            cap={"protocol": "cap-protocol/v1", "agent": "cap-agent",
                 "version": self.agent_version, "extensions": list(EXTENSIONS)},
        )

    # ---- what was logged ---------------------------------------------------------------
    def logged(self, envs: list[Envelope], after: str | None = None) -> list[Effect]:
        self.diffs.add(envs)
        out: list[Effect] = []
        for env in envs:
            event = env.event
            if after == "inject" and isinstance(event, UserInputInject) and self._turn:
                self._turn.cause = env.seq
            elif isinstance(event, AgentRaw) and event.reason == RAW_LINE:
                out.append(Send(event.text.encode() + b"\n"))  # malformed on purpose
            elif type(event).direction == "in":
                out += self._agent_event(event)
        if after == "refused":
            out += self._finish_turn("error")
        elif after == "core-failed":
            if self._turn is not None:
                out += self._finish_turn("error")
            out += [*self._diff(final=True), Finish(1)]
        elif after == "transcript-final":
            out += self._diff(final=True)
            out.append(Finish(0))
        elif self.diffs.due:
            out += self._diff()
        return out

    def turn_ended(self, stop: StopReason) -> list[Effect]:
        if self._turn is None:
            return [Note("the core ended a turn that was not running")]
        return self._finish_turn(stop)

    def tick(self) -> list[Effect]:
        """The shell's timer: send what is pending of the transcript (long turns)."""
        return self._diff()

    def _agent_event(self, event: Event) -> list[Effect]:
        turn = self._turn
        match event:
            case TextChunk():
                return self._frames(self.builder.text(event.text,
                                                      thinking=event.channel == "thought"))
            case Thought():
                return self._frames(self.builder.text(event.text, thinking=True))
            case ToolCallStart() if turn is not None:
                assert self.config is not None
                wire = policy.to_wire(event.name, event.input, self.config.cwd)
                call = Call(self.ids.tool_use(), event.name, event.input, wire)
                turn.calls[event.call_id] = turn.last_call = call
                return self._frames(self.builder.tool_use(call.tool_use_id, event.name, wire))
            case PermissionRequest() if turn is not None:
                call = turn.last_call or Call(self.ids.tool_use(), event.tool, event.intent,
                                               dict(event.intent))
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

    # ---- usage, artifacts, results ----------------------------------------------------
    def _usage(self, event: Usage) -> list[Effect]:
        if self._turn is not None:
            self._turn.usage = event
        self.total_cost += event.cost_usd_estimate
        self._api_ms += event.duration_ms
        self._tokens += event.input_tokens + event.output_tokens
        model = event.model_id or self.current_model
        mu = self._model_usage.setdefault(model, f.ModelUsage())
        mu.input_tokens += event.input_tokens
        mu.output_tokens += event.output_tokens
        mu.cache_read_input_tokens += event.cache_read_tokens
        mu.cache_creation_input_tokens += event.cache_creation_tokens
        mu.cost_usd += event.cost_usd_estimate
        return []

    def _artifact(self, event: Artifact) -> list[Effect]:
        ours = self._artifacts.pop(event.artifact_id, None)
        # the core's artifacts come at the end of a turn: the model's message is over by then
        out = self._frames(self.builder.end_message("end_turn")) if ours is None else []
        content, request_id = ours or (event.content, None)
        body = f.ArtifactBody(artifact_id=event.artifact_id, mime_type=event.mime_type,
                              name=event.name, size=event.size, uri=event.uri, content=content)
        if request_id is not None:
            return [*out, self._send(f.ControlResponse(response=f.ResponseBody(
                subtype="success", request_id=request_id, response={"artifact": body})))]
        return out + self._extension("cap.artifact", body)

    def _finish_turn(self, stop: StopReason) -> list[Effect]:
        turn = self._turn
        assert turn is not None
        out = self._frames(self.builder.end_message("end_turn"))
        for request_id in [r for r, p in self._prompts.items()]:
            del self._prompts[request_id]
            turn.aborted_tools = True
            out.append(self._send(f.ControlCancelRequest(request_id=request_id)))
        if stop == "cancelled":
            suffix = " for tool use" if turn.aborted_tools else ""
            out.append(self._send(self.builder.notice(f"[Request interrupted by user{suffix}]")))
        out += self._diff()
        out.append(self._send(self._result(turn, stop)))
        self._turn = None
        return out + self._next_turn()

    def _result(self, turn: Turn, stop: StopReason) -> f.Result:
        usage = turn.usage or Usage()
        fields: dict[str, Any] = {}
        if turn.refused:
            fields = {"subtype": "error_max_budget_usd", "errors": [turn.refused],
                      "terminal_reason": "max_budget_usd"}
        elif stop == "cancelled":
            fields = {"subtype": "error_during_execution", "errors": ["[cap] interrupted by the "
                      "client"], "terminal_reason": "aborted_tools" if turn.aborted_tools
                      else "aborted_streaming"}
        elif stop == "tool_use":
            limit = self.config.max_turns if self.config else None
            fields = {"subtype": "error_max_turns", "stop_reason": "tool_use",
                      "errors": [f"Reached maximum number of turns ({limit})"],
                      "terminal_reason": "max_turns"}
        elif stop == "error":
            fields = {"subtype": "error_during_execution", "terminal_reason": "error",
                      "errors": turn.errors or ["the turn failed"]}
        else:
            fields = {"subtype": "success", "result": self.builder.final_text,
                      "stop_reason": stop, "terminal_reason": "completed"}
        return f.Result(
            is_error=fields["subtype"] != "success", duration_ms=usage.duration_ms,
            duration_api_ms=self._api_ms, num_turns=0 if turn.refused else turn.round_trips,
            session_id=self.session_id, total_cost_usd=round(self.total_cost, 10),
            usage=f.MessageUsage(input_tokens=usage.input_tokens,
                                 output_tokens=usage.output_tokens,
                                 cache_creation_input_tokens=usage.cache_creation_tokens,
                                 cache_read_input_tokens=usage.cache_read_tokens),
            model_usage=dict(self._model_usage), permission_denials=list(turn.denials),
            uuid=self.ids.uuid(), user_message_uuid=turn.user_uuid,
            meta={"cap.transcript_seq": self.diffs.last_seq}, **fields,
        )

    # ---- control requests ---------------------------------------------------------------
    def _control(self, frame: f.ControlRequest) -> list[Effect]:
        request = f.decode_request(frame.request)
        rid = frame.request_id
        match request:
            case f.Initialize():
                return self._initialize(rid, request)
            case f.Interrupt():
                queued = [u for _, u in self._queue if u]
                out = [self._ok(rid, {"still_queued": queued})]
                if self._turn is not None:
                    out += self._interrupt_turn(self._turn)
                return out
            case f.SetPermissionMode():
                if request.mode not in PERMISSION_MODES:
                    return [self._error(rid, f"unknown permission mode {request.mode!r}")]
                self.mode = request.mode
                status = f.System(subtype="status", session_id=self.session_id,
                                  uuid=self.ids.uuid(), permission_mode=self.mode)
                return [self._ok(rid, {"mode": self.mode}), self._send(status)]
            case f.SetModel():
                self.model = request.model
                return [self._ok(rid, {"model": self.current_model}), SetModel(request.model)]
            case f.McpStatus():
                return [self._ok(rid, {"mcpServers": []})]
            case f.GetContextUsage():
                return [self._ok(rid, {"categories": [], "totalTokens": self._tokens,
                                       "maxTokens": 200_000, "rawMaxTokens": 200_000,
                                       "percentage": self._tokens / 2000, "model":
                                       self.current_model, "memoryFiles": [], "mcpTools": []})]
            case f.RewindFiles():
                return [self._error(rid, "cap-agent keeps no file checkpoints to rewind to")]
            case f.McpReconnect() | f.McpToggle():
                return [self._error(rid, f"no MCP server named {request.server_name!r}")]
            case f.StopTask():
                return [self._error(rid, f"no task {request.task_id!r} is running")]
            case f.CapTranscriptRequest():
                self._transcripts += 1
                artifact_id = f"transcript_{self._transcripts}"
                self._artifacts[artifact_id] = ("", rid)
                return [ReadTranscript(artifact_id)]
            case str():
                return [self._error(rid, f"Unsupported control request subtype: {request}",
                                    code="unsupported_request")]
        return [self._error(rid, f"{request.__struct_config__.tag} is sent by the agent, "
                                 "not to it", code="unsupported_request")]

    def _initialize(self, rid: str, request: f.Initialize) -> list[Effect]:
        out: list[Effect] = []
        if self.config is None:
            prompt = request.system_prompt
            if isinstance(prompt, list):
                prompt = "\n".join(p for p in prompt if p)
            if prompt is not None:
                self._init_prompt = prompt or None
            self._init_append = request.append_system_prompt or None
        elif request.system_prompt or request.append_system_prompt:
            out.append(Note("initialize after the first prompt: its system prompt is ignored"))
        info = {
            "commands": [], "agents": [], "output_style": "default",
            "available_output_styles": ["default"],
            "models": [{"value": self.current_model, "displayName": self.current_model,
                        "description": "trio-cap's scripted brain"}],
            "account": {}, "pid": self.pid, "claude_code_version": COMPAT_VERSION,
            "current_permission_mode": self.mode, "hook_on_failure_supported": False,
            "capabilities": [],
            "cap": {"protocol": "cap-protocol/v1", "agent": "cap-agent",
                    "version": self.agent_version, "extensions": list(EXTENSIONS)},
        }
        return [self._ok(rid, info), *out]

    def _interrupt_turn(self, turn: Turn) -> list[Effect]:
        if turn.interrupted or turn.refused:
            return []
        turn.interrupted = True
        out: list[Effect] = []
        for request_id in list(self._prompts):
            del self._prompts[request_id]
            turn.aborted_tools = True
            out.append(self._send(f.ControlCancelRequest(request_id=request_id)))
        return out + self._reply(Cancel(scope="current_turn", reason="interrupt"))

    # ---- session end and transcripts --------------------------------------------------
    def _end_session(self) -> list[Effect]:
        if self._ending:
            return []
        self._ending = True
        self._transcripts += 1
        artifact_id = f"transcript_{self._transcripts}"
        self._artifacts[artifact_id] = ("", None)
        return [ReadTranscript(artifact_id)]

    def transcript_ready(self, envs: list[Envelope], artifact_id: str) -> list[Effect]:
        """The session's envelopes so far, for the transcript artifact ``artifact_id``."""
        model = self.config.model if self.config else None
        content = transcript_document(self.session_id, model or self.current_model, envs)
        _, request_id = self._artifacts.get(artifact_id, ("", None))
        self._artifacts[artifact_id] = (content, request_id)
        size = len(content.encode())
        event = Artifact(artifact_id=artifact_id, mime_type=TRANSCRIPT_MIME,
                         name="transcript.json", size=size,
                         meta={"cap.to_seq": envs[-1].seq if envs else 0})
        final = request_id is None and self._ending
        return [Record((event,), after="transcript-final" if final else None)]

    # ---- output helpers ---------------------------------------------------------------
    def _diff(self, *, final: bool = False) -> list[Effect]:
        diff = self.diffs.take(final=final)
        return self._extension("cap.transcript_diff", diff) if diff is not None else []

    def _extension(self, subtype: str, body: Any) -> list[Effect]:
        frame = f.System(subtype=subtype, session_id=self.session_id, uuid=self.ids.uuid(),
                         cap=body)
        return [Send(line) for line in extension_lines(frame, self.options.max_line,
                                                       self.ids.uuid)]

    def _send(self, frame: Any) -> Send:
        return Send(f.encode_line(frame))

    def _frames(self, frames: list[f.Frame]) -> list[Effect]:
        return [self._send(frame) for frame in frames]

    def _ok(self, request_id: str, response: Any) -> Send:
        return self._send(f.ControlResponse(response=f.ResponseBody(
            subtype="success", request_id=request_id, response=response)))

    def _error(self, request_id: str, message: str, *, code: str | None = None) -> Send:
        return self._send(f.ControlResponse(response=f.ResponseBody(
            subtype="error", request_id=request_id, error=message, error_code=code)))
