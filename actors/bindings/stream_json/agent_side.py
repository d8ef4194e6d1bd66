"""The agent side of stream-json as a sans-io machine: what an SDK client sends → core frames,
what the core emits → stream-json bytes.

This is the binding kit's machine (``bindings/base.py``) in the mirror role:
its peer on the byte stream is the *client* (an SDK, a driver), and the
agent behind it is trio-cap's core.  No I/O, clock, randomness or ids of its
own: the shell feeds it stdin bytes (:meth:`AgentSide.receive_data`,
:meth:`AgentSide.receive_eof`), the envelopes it appended to the event log
(:meth:`AgentSide.logged` — the core's events and the machine's own records
alike), turn ends (:meth:`AgentSide.turn_ended`) and timer ticks
(:meth:`AgentSide.tick`), and carries out the effects each call returns, in
order (``agent_effects.py``).  Frame uuids come from the injected ``new_id``.
How the core's events become frames (text, tools, prompts, asks, plans, usage,
artifacts) lives in the mixin ``agent_events.py``; this module keeps stdin, turns,
control requests and the output gate.
Because the machine sees what was logged only through :meth:`logged`, the
transcript diffs it sends are the log, by construction.

Rules
-----
1. One turn per ``user`` frame, one at a time (the core gets one prompt at a
   time; the others queue), and exactly one ``result`` per turn.
2. **A turn ends with its result.**  Everything a turn produces — assistant,
   user and stream_event frames, ``system/cap.error``, ``system/cap.artifact``,
   withdrawn prompts, the interrupt notice, the transcript diff — is written
   before its ``result``.
3. **Nothing is written between a result and the next turn's** ``system/init``
   except ``control_response``s (replies to the client's own requests, which
   SDKs route to the request, not into the message stream).  A stream frame
   that comes up while no turn runs (a ``cap.error`` for a bad line, the
   ``status`` of a ``set_permission_mode``, a late core event) is *held* and
   written right after the next turn's ``system/init``; at session end held
   frames are dropped (they stay in the log).
4. Transcript diffs are taken only while a turn runs (cadence, timer, and one
   before every result), so at each ``result`` the client's copy holds the
   whole log and ``_meta["cap.transcript_seq"]`` is its last seq.  A diff is
   ``final`` when no turn can follow (stdin had closed, or the core failed).
5. Session end (stdin closed with no turn left, or the core failed) writes
   nothing: the shell exits (``Finish``) and writes ``--transcript-file``.
6. Bad input never raises: a broken frame is a logged ``cap.error``
   ``parse_failed``, a non-JSON line or unknown type a stderr ``Note``, a
   control request we cannot read an ``error`` control response.
7. A permission the machine cannot settle is denied, never allowed: an
   unreadable answer, an error answer, stdin closing on an open prompt.
8. Effects run after the call that returned them, when later lines of the
   same read may already have moved the state on; so every frame is decided
   when its cause is processed.  The machine's own records (a ``cap.error``
   for a bad line, a refusal) are shown as they are made, and
   :meth:`AgentSide.logged` renders only the core's events.  The one step that
   must wait for the log — a budget-refused turn, whose diff and ``result``
   need its ``cap.error``'s seq — pauses the reading of further buffered lines
   (and EOF) until that record comes back; then reading resumes.

Transition table (``running`` = a turn is open; ``draining`` = stdin closed)

=========  ==============================  ==============================================  ========
state      input                           outputs                                         next
=========  ==============================  ==============================================  ========
waiting    ``user``                        [config], init, held frames, inject             running
running    ``user``                        — (queued)                                      running
running    core event                      its frames (rule 2)                             running
running    ``turn_ended`` / budget refusal  close, withdrawals, notice, diff, ``result``;  waiting |
                                           the next queued turn starts                     running
any        ``control_request``             its ``control_response`` at once                same
waiting    anything to show                held (rule 3)                                   waiting
waiting    EOF                             ``Finish(0)``                                   ended
running    EOF                             open prompts denied                             draining
draining   last turn ends                  … final diff, ``result``, ``Finish(0)``         ended
any        core failed                     the open turn's error ``result``; ``Finish(1)`` ended
ended      anything                        nothing                                         ended
=========  ==============================  ==============================================  ========
"""

from __future__ import annotations

from collections import deque
from typing import Any

import msgspec

from trio_cap.actors.bindings.base import RAW_LINE
from trio_cap.actors.bindings.stream_json import agent_replies as replies
from trio_cap.actors.bindings.stream_json import agent_tools as tools
from trio_cap.actors.bindings.stream_json import frames as f
from trio_cap.actors.bindings.stream_json.agent_argv import PERMISSION_MODES, AgentOptions
from trio_cap.actors.bindings.stream_json.agent_effects import (
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
from trio_cap.actors.bindings.stream_json.agent_events import CLOSED, CoreEvents
from trio_cap.actors.bindings.stream_json.agent_messages import (
    MessageBuilder,
    NewId,
)
from trio_cap.actors.bindings.stream_json.agent_replies import COMPAT_VERSION
from trio_cap.actors.bindings.stream_json.agent_transcript import (
    TRANSCRIPT_MIME,
    TranscriptDiffs,
    extension_lines,
    transcript_document,
)
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    AgentRaw,
    Artifact,
    Cancel,
    CapError,
    ContentBlock,
    Event,
    PermissionResponse,
    SessionConfig,
    StopReason,
    UserInputInject,
)

__all__ = [
    "COMPAT_VERSION", "AgentSide", "Deliver", "Effect", "Finish", "Note", "ReadTranscript",
    "Record", "Send", "SetModel",
]

MAX_INPUT_LINE = 64 << 20
_CONTROL = (f.ControlRequest, f.ControlResponse, f.ControlCancelRequest)


class AgentSide(CoreEvents):
    def __init__(self, options: AgentOptions, *, session_id: str, default_model: str,
                 new_id: NewId, pid: int | None = None, agent_version: str = "") -> None:
        if options.cwd is None:
            raise ValueError("AgentOptions.cwd must be set (the shell fills in its own)")
        self.options = options
        self.cwd: str = options.cwd
        self.session_id = session_id
        self.default_model = default_model
        self.new_id = new_id
        self.pid = pid
        self.agent_version = agent_version
        self.mode = options.permission_mode
        self.model = options.model
        self.builder = MessageBuilder(new_id, session_id, partial=options.partial_messages)
        self._speaker: object = None
        """Who the last text came from (``_meta`` ``cap.member`` of a fleet face's member;
        None: the agent itself): another speaker's text starts a new API message, so each
        member's words are messages of their own and the face's answer is the result's."""
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
        self._held: list[bytes] = []  # stream frames waiting for the next turn (rule 3)
        self._stdin_closed = False
        self._eof = False  # stdin closed and every line before the close handled
        self._paused = False
        self._ended = False
        self._artifacts: dict[str, str] = {}  # transcript artifact id -> control request id
        self._transcripts = 0
        self.totals = replies.UsageTotals()

    # ---- stdin ---------------------------------------------------------------------
    def receive_data(self, data: bytes) -> list[Effect]:
        """stdin bytes as read; a partial last line waits for the next call."""
        if self._ended or self._stdin_closed:
            return []
        self._buf += data
        return self._drain()

    def receive_eof(self) -> list[Effect]:
        """stdin closed: finish the queued turns; prompts nobody can answer now are denied."""
        if self._ended or self._stdin_closed:
            return []
        self._stdin_closed = True
        if self._buf.strip():
            self._buf += b"\n"  # the unterminated last line is a line
        return self._drain()

    def _drain(self) -> list[Effect]:
        """Handle the complete lines buffered, then EOF once they are done.  Stops while a
        refused turn waits for its record (rule 8): later lines must see it finished."""
        out: list[Effect] = []
        start = 0
        while not self._paused and (end := self._buf.find(b"\n", start)) >= 0:
            out += self._line(bytes(self._buf[start:end]).strip())
            start = end + 1
        del self._buf[:start]
        if self._paused:
            return out
        if len(self._buf) > MAX_INPUT_LINE:
            self._buf.clear()
            out.append(Note(f"dropped an input line longer than {MAX_INPUT_LINE} bytes"))
        if self._stdin_closed and not self._eof and not self._ended:
            self._buf.clear()
            self._eof = True
            for request_id in list(self._prompts):
                body = f.ResponseBody(subtype="error", request_id=request_id, error=CLOSED)
                out += self._answer(body)
            out += self._next_turn()
        return out

    def core_failed(self, message: str) -> list[Effect]:
        """The brain crashed or its bridged agent died: the open turn fails, the session ends
        with exit code 1."""
        if self._ended:
            return []
        self._queue.clear()
        error = CapError(code="internal_error", message=message)
        return self._record(error, after="core-failed")

    def user_text(self, text: str) -> list[Effect]:
        """A prompt given on the command line (``--input-format text``)."""
        if self._ended:
            return []
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
            return self._record(error)
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
            return self._record(error)
        self._config_frame = frame
        return []

    def _effective_config(self) -> SessionConfig:
        if self._config_frame is not None:
            self.model = self._config_frame.model or self.model
        return replies.session_config(self._config_frame, self.options, self.cwd,
                                      init_prompt=self._init_prompt,
                                      init_append=self._init_append)

    def _next_turn(self) -> list[Effect]:
        if self._turn is not None or self._ended:
            return []
        if not self._queue:
            return self._end_session(0) if self._eof else []
        text, user_uuid = self._queue.popleft()
        out: list[Effect] = []
        if self.config is None:
            self.config = self._effective_config()
            out += [*self._record(self.config), Deliver((self.config,))]
        turn = self._turn = Turn(user_uuid=user_uuid)
        self.builder.model = self.current_model
        self.builder.final_text = ""
        out += self._send(self._init_frame())
        if self.options.partial_messages:
            out += self._send(f.System(subtype="status", status="requesting",
                                       session_id=self.session_id, uuid=self.new_id()))
        out += [Send(line) for line in self._held]
        self._held.clear()
        budget = self.config.budget_usd
        if budget is not None and self.totals.cost >= budget:
            turn.refused = (f"cap_budget_exceeded: the session has spent ${self.totals.cost:.6f} "
                            f"of its ${budget:.6f} budget; the turn was not started")
            error = CapError(code="cap_budget_exceeded", message=turn.refused,
                             details={"prompt": text})
            self._paused = True  # until the refusal is logged and the turn finished
            return [*out, *self._record(error, after="refused")]
        inject = UserInputInject(content=(ContentBlock(text=text),))
        return [*out, Record((inject,), after="inject"), Deliver((inject,))]

    def _end_session(self, code: int) -> list[Effect]:
        """Rule 5: nothing more is written; frames still held are dropped."""
        if self._ended:
            return []
        self._ended = True
        self._held.clear()
        return [Finish(code)]

    @property
    def current_model(self) -> str:
        return self.model or self.default_model

    @property
    def cause(self) -> int | None:
        """The seq the core's current events point at: their turn's prompt."""
        return self._turn.cause if self._turn else None

    def _init_frame(self) -> f.System:
        assert self.config is not None
        tools = replies.tool_names(asks=self.options.prompts_on_stdio,
                                   available=self.options.tools)
        return replies.init_frame(session_id=self.session_id, uuid=self.new_id(),
                                  cwd=self.config.cwd, model=self.current_model, mode=self.mode,
                                  tools=tools, agent_version=self.agent_version)

    # ---- what was logged ---------------------------------------------------------------
    def logged(self, envs: list[Envelope], after: str | None = None) -> list[Effect]:
        """Envelopes just appended to the log (by a ``Record`` or for the core)."""
        self.diffs.add(envs)
        out: list[Effect] = []
        for env in envs:
            event = env.event
            if after == "inject" and isinstance(event, UserInputInject) and self._turn:
                self._turn.cause = env.seq
            elif after is not None:
                continue  # the machine's own record: shown when it was made (rule 8)
            elif isinstance(event, AgentRaw) and event.reason == RAW_LINE:
                out += self._write(event.text.encode() + b"\n")  # malformed on purpose
            elif type(event).direction == "in":
                out += self._agent_event(event)
        if after == "refused" and self._turn is not None:
            self._paused = False
            out += self._finish_turn("error")
            if not self._paused:  # the next turn may be refused too
                out += self._drain()
        elif after == "core-failed":
            message = next((e.event.message for e in envs if isinstance(e.event, CapError)), "")
            if self._turn is not None:
                out += self._finish_turn("error", last=True)
            out.append(Note(message))  # a person at a terminal sees why, result or not
            out += self._end_session(1)
        elif self.diffs.due and self._turn is not None and after is None:
            out += self._diff()  # on core events only: for own records the state may be later
        return out

    def _record(self, event: Event, *, after: str = "own") -> list[Effect]:
        """Log one of the machine's own events, showing it to the client *now*: effects run
        after the call returns, when later input of the same read may have moved the state
        on, so what a record shows is decided here, never in :meth:`logged` (rule 8)."""
        shown = self._agent_event(event) if type(event).direction == "in" else []
        return [*shown, Record((event,), after=after)]

    def turn_ended(self, stop: StopReason) -> list[Effect]:
        if self._turn is None or self._ended:
            return [Note("the core ended a turn that was not running")]
        return self._finish_turn(stop)

    def tick(self, now: float | None = None) -> list[Effect]:
        """The shell's timer: a running turn sends what is pending of its transcript."""
        return self._diff() if self._turn is not None and not self._ended else []

    # ---- the client's answers to prompts -----------------------------------------------
    def _reply(self, frame: Event) -> list[Effect]:
        return [*self._record(frame), Deliver((frame,))]

    def _answer(self, body: f.ResponseBody) -> list[Effect]:
        prompt = self._prompts.pop(body.request_id, None)
        turn = self._turn
        if prompt is None or turn is None:
            error = CapError(code="cap_unknown_permission",
                             message=f"no permission prompt is waiting on {body.request_id!r}")
            return self._record(error)
        result = tools.read_answer(body)
        if prompt.kind == "ask":
            return self._ask_answered(prompt, result, turn)
        call = prompt.call
        if isinstance(result, f.PermissionDeny):
            out = self._deny(prompt.ref, turn, call, result.message or "denied", "client")
            if result.interrupt:
                out += self._interrupt_turn(turn)
            return out
        meta = tools.allow_meta(call, result, self._turn_cwd)
        decision = "allow_always" if result.updated_permissions else "allow_once"
        if result.updated_permissions:
            self._allowed += (call.name,)
        return self._reply(PermissionResponse(req_id=prompt.ref, decision=decision, meta=meta))

    # ---- results ---------------------------------------------------------------------
    def _finish_turn(self, stop: StopReason, *, last: bool = False) -> list[Effect]:
        """Rule 2: everything of the turn, then its result, then the next turn may start."""
        turn = self._turn
        assert turn is not None
        out = self._frames(self.builder.end_message("end_turn"))
        for request_id in list(self._prompts):
            del self._prompts[request_id]
            turn.aborted_tools = True
            out.append(self._control_send(f.ControlCancelRequest(request_id=request_id)))
        if stop == "cancelled":
            suffix = " for tool use" if turn.aborted_tools else ""
            out += self._send(self.builder.notice(f"[Request interrupted by user{suffix}]"))
        out += self._diff(final=last or (self._eof and not self._queue))
        out += self._send(self._result(turn, stop))
        self._turn = None
        return out if last else out + self._next_turn()

    def _result(self, turn: Turn, stop: StopReason) -> f.Result:
        return replies.result_frame(
            turn, stop, self.totals, session_id=self.session_id, uuid=self.new_id(),
            max_turns=self.config.max_turns if self.config else None,
            final_text=self.builder.final_text, transcript_seq=self.diffs.last_seq)

    # ---- control requests ---------------------------------------------------------------
    def _control(self, frame: f.ControlRequest) -> list[Effect]:
        rid = frame.request_id
        try:
            request = f.decode_request(frame.request)
        except msgspec.ValidationError as exc:
            return [self._error(rid, f"bad control request: {exc}")]
        match request:
            case f.Initialize():
                return self._initialize(rid, request)
            case f.Interrupt():
                queued = [u for _, u in self._queue if u]
                out: list[Effect] = [self._ok(rid, {"still_queued": queued})]
                if self._turn is not None:
                    out += self._interrupt_turn(self._turn)
                return out
            case f.SetPermissionMode():
                if request.mode not in PERMISSION_MODES:
                    return [self._error(rid, f"unknown permission mode {request.mode!r}")]
                self.mode = request.mode
                status = f.System(subtype="status", session_id=self.session_id,
                                  uuid=self.new_id(), permission_mode=self.mode)
                return [self._ok(rid, {"mode": self.mode}), *self._send(status)]
            case f.SetModel():
                self.model = request.model
                return [self._ok(rid, {"model": self.current_model}), SetModel(request.model)]
            case f.McpStatus() | f.GetContextUsage() | f.RewindFiles() | f.McpReconnect() \
                    | f.McpToggle() | f.StopTask():
                ok, body = replies.static_reply(request, tokens=self.totals.tokens,
                                                model=self.current_model)
                return [self._ok(rid, body) if ok else self._error(rid, body)]
            case f.CapTranscriptRequest():
                self._transcripts += 1
                artifact_id = f"transcript_{self._transcripts}"
                self._artifacts[artifact_id] = rid
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
        info = replies.initialize_info(model=self.current_model, pid=self.pid, mode=self.mode,
                                       agent_version=self.agent_version)
        return [self._ok(rid, info), *out]

    def _interrupt_turn(self, turn: Turn) -> list[Effect]:
        if turn.interrupted or turn.refused:
            return []
        turn.interrupted = True
        out: list[Effect] = []
        for request_id in list(self._prompts):
            del self._prompts[request_id]
            turn.aborted_tools = True
            out.append(self._control_send(f.ControlCancelRequest(request_id=request_id)))
        return out + self._reply(Cancel(scope="current_turn", reason="interrupt"))

    def transcript_ready(self, envs: list[Envelope], artifact_id: str) -> list[Effect]:
        """The session's envelopes so far, for the requested transcript ``artifact_id``: the
        artifact is logged (without its content) and answers the client's request."""
        request_id = self._artifacts.pop(artifact_id, None)
        model = self.config.model if self.config else None
        content = transcript_document(self.session_id, model or self.current_model, envs)
        event = Artifact(artifact_id=artifact_id, mime_type=TRANSCRIPT_MIME,
                         name="transcript.json", size=len(content.encode()),
                         meta={"cap.to_seq": envs[-1].seq if envs else 0})
        out: list[Effect] = [Record((event,), after="own")]
        if request_id is not None:
            body = f.ArtifactBody(artifact_id=artifact_id, mime_type=TRANSCRIPT_MIME,
                                  name="transcript.json", size=event.size, content=content)
            out.append(self._control_send(f.ControlResponse(response=f.ResponseBody(
                subtype="success", request_id=request_id, response={"artifact": body}))))
        return out

    # ---- output: the one gate (rules 2 and 3) ------------------------------------------
    def _write(self, line: bytes) -> list[Effect]:
        """A stream line goes out while a turn runs; otherwise it waits for the next one."""
        if self._turn is None:
            if not self._ended:
                self._held.append(line)
            return []
        return [Send(line)]

    def _send(self, frame: Any) -> list[Effect]:
        return self._write(f.encode_line(frame))

    def _frames(self, frames: list[f.Frame]) -> list[Effect]:
        return [effect for frame in frames for effect in self._send(frame)]

    def _control_send(self, frame: f.ControlRequest | f.ControlResponse
                      | f.ControlCancelRequest) -> Send:
        """Control frames are replies and requests, not stream messages: never held."""
        assert isinstance(frame, _CONTROL)
        return Send(f.encode_line(frame))

    def _diff(self, *, final: bool = False) -> list[Effect]:
        diff = self.diffs.take(final=final)
        return self._extension("cap.transcript_diff", diff) if diff is not None else []

    def _extension(self, subtype: str, body: Any) -> list[Effect]:
        frame = f.System(subtype=subtype, session_id=self.session_id, uuid=self.new_id(),
                         cap=body)
        lines = extension_lines(frame, self.options.max_line, self.new_id)
        return [effect for line in lines for effect in self._write(line)]

    def _ok(self, request_id: str, response: Any) -> Send:
        return self._control_send(f.ControlResponse(response=f.ResponseBody(
            subtype="success", request_id=request_id, response=response)))

    def _error(self, request_id: str, message: str, *, code: str | None = None) -> Send:
        return self._control_send(f.ControlResponse(response=f.ResponseBody(
            subtype="error", request_id=request_id, error=message, error_code=code)))
