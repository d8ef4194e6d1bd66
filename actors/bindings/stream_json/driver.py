"""The stream-json driver, sans-io: CLI stdout bytes → CAP events, CAP frames → stdin bytes.

A machine of the binding kit (:mod:`trio_cap.actors.bindings.base`): no
processes, pipes, clocks or randomness (prompt uuids come from an injected
factory), so the same bytes always give the same events and a recorded
session replays through it.  Lines are framed and decoded by the kit's
:class:`~trio_cap.actors.bindings.ndjson.NdjsonReader` (a whole read in one
msgspec call); the Trio shell (:mod:`.connector`) only moves bytes.

States: ``NEW --initialize()--> INITIALIZING --answer--> READY | FAILED``;
``receive_eof()`` or ``close()`` → ``CLOSED`` from any state.

Rules, agent → host (each a trap real Claude Code sets; stream-json.md §3, §7):

====  =========================================  ==========================================
rule  input                                      output
====  =========================================  ==========================================
R1    control_response to ``initialize``         ``cap.session.ready`` (READY); an error
                                                 answer: ``cap.error``
                                                 ``cap_binding_unavailable`` (FAILED)
R2    text / thinking deltas of a started block  ``cap.text_chunk`` / ``cap.thought``; the
                                                 consecutive deltas of one block in one
                                                 read are one event (text boundaries carry
                                                 no meaning; the text is the same)
R3    ``assistant`` text / thinking              only what the deltas did not give (it
                                                 arrives before its block's stop: never
                                                 doubled)
R4    ``assistant`` tool_use, or the stop of a   ``cap.tool_call.start``, once per call id
      streamed tool block no assistant confirmed
R5    ``user`` tool_result                       ``cap.tool_call.end``
R6    ``user`` text that is not our prompt       ``cap.text_chunk`` on channel ``system``
R7    ``result`` closing prompts still running   ``cap.error`` (failed turn), ``cap.usage``
                                                 (cost = delta of the running total), one
                                                 ``TurnEnded`` per closed prompt
R8    ``result`` closing nothing (a repeat)      ``agent.raw`` ``duplicate_result``
R9    ``system/init`` (re-sent every turn)       ``agent.raw`` ``init`` once, then only
                                                 ``init_changed`` when it changes
R10   ``system/api_retry``                       retryable ``cap.error``
R11   ``system/cap.error`` / ``cap.artifact``    that CAP event (trio-cap's own agent)
R12   ``can_use_tool`` for AskUserQuestion       ``cap.ask_user`` with a choice form
R13   ``can_use_tool`` for any other tool        ``cap.permission.request``, risk_level
                                                 ``medium`` (CAP's default: the session
                                                 machine rates risk, never a binding); the
                                                 agent's own rating, when the wire has one,
                                                 under ``_meta[cap.agent_risk]``
R14   any other control_request                  ``agent.raw`` + an error answer
                                                 (``ToAgent``)
R15   control_cancel_request for a pending ask   ``agent.raw`` ``permission_withdrawn``
R16   ``rate_limit_event`` status rejected       ``cap.error`` ``rate_limit``
R17   keep_alive, command_lifecycle, quiet       nothing
      ``system`` subtypes
R18   unknown frame type or system subtype       ``agent.raw`` with the reason
R19   a line that is not JSON, overlong, or      ``cap.error`` ``parse_failed`` (decoding
      broken and never completed                 goes on with the next line)
====  =========================================  ==========================================

Rules, host → agent (``send`` returns the bytes to write, ``b""`` when none):

====  =========================================  ==========================================
H1    ``cap.user_input.inject``                  a user frame with a fresh uuid
H2    ``cap.permission.response`` for a pending  allow (the decider's rewritten input, or
      request                                    the call's own; "always" kept to the
                                                 session) or deny with the reason
H3    ``cap.ask_user.answer`` for a pending ask  allow with ``answers`` filled, or deny
H4    ``cap.cancel`` current_turn, a turn runs   one ``interrupt`` request per turn
H5    anything else, or an answer to nothing     ``b""``
====  =========================================  ==========================================

Outputs are the kit's values (events, :class:`TurnEnded`, :class:`ToAgent`);
the driver never raises on agent input.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from itertools import count
from typing import Any

import msgspec

from trio_cap.actors.bindings.base import AGENT_RISK, Output, ToAgent, TurnEnded
from trio_cap.actors.bindings.ndjson import BadLine, Lines, Unknown
from trio_cap.actors.bindings.stream_json import frames as f
from trio_cap.actors.bindings.stream_json.driver_asks import ASK_TOOL, ask_from_tool
from trio_cap.actors.bindings.stream_json.driver_blocks import (
    PendingPermission,
    StreamedBlock,
    raw_event,
    result_text,
)
from trio_cap.actors.bindings.stream_json.driver_lines import MAX_LINE, new_reader
from trio_cap.actors.bindings.stream_json.driver_replies import (
    ask_line,
    permission_line,
    prompt_line,
    refusal_line,
    request_line,
)
from trio_cap.actors.bindings.stream_json.driver_rules import (
    RUN_JSON,
    RUN_TEXT,
    api_error,
    cap_extension,
    delta_piece,
    error_code,
    rate_limited,
    result_error,
    tool_scope,
    unreadable,
    usage_of,
)
from trio_cap.actors.bindings.stream_json.driver_turns import Turns
from trio_cap.events.kinds import (
    AskUserAnswer,
    Cancel,
    CapError,
    CapSessionReady,
    Event,
    PermissionRequest,
    PermissionResponse,
    TextChunk,
    Thought,
    ToolCallEnd,
    ToolCallStart,
    UserInputInject,
)

__all__ = ["DriverState", "Output", "StreamJsonDriver", "ToAgent", "TurnEnded"]


class DriverState(enum.Enum):
    NEW = "new"
    INITIALIZING = "initializing"
    READY = "ready"
    FAILED = "failed"
    CLOSED = "closed"


_QUIET_SYSTEM = frozenset({
    "status", "thinking_tokens", "session_state_changed", "permission_denied", "hook_started",
    "hook_response", "task_started", "task_progress", "task_notification", "task_updated",
    "compact_boundary", "cap.transcript_diff",
})
"""Known ``system`` subtypes with nothing for CAP (R17): dropped, not kept raw."""
_RISKS = frozenset({"low", "medium", "high"})

_HOT = (f.StreamEventIn, f.StreamEvent, f.ContentBlockDelta, f.TextDelta, f.ThinkingDelta,
        f.MessageDelta, f.MessageStop)
"""The hot loop compares types by identity, with these bound to locals."""
_TEXT, _JSON = RUN_TEXT, RUN_JSON
_BlockStart, _BlockStop = f.ContentBlockStart, f.ContentBlockStop
_VIEWS = frozenset(f.BATCH_VIEWS.values())
_TOOL_BLOCKS = (f.ToolUseBlock, f.ServerToolUseBlock)
_BLOCK_TYPES = {cls: cls.__struct_config__.tag for cls in f.ContentBlock.__args__}  # type: ignore[attr-defined]


class StreamJsonDriver:
    """One driven stream-json agent process, as a state machine.

    ``session_id`` is the agent session the shell asked for (``--session-id``
    / ``--resume``), reported in ``cap.session.ready``; ``new_uuid`` stamps
    prompts.  ``cwd`` is accepted for the shell's sake and kept: the driver
    itself judges no paths (risk is the session machine's).
    """

    def __init__(self, *, new_uuid: Callable[[], str], session_id: str | None = None,
                 cwd: str | None = None, max_line: int = MAX_LINE) -> None:
        self.state = DriverState.NEW
        self.session_id = session_id
        self.cwd = cwd
        self.model: str | None = None
        self.agent_version: str | None = None
        self.handshake_error: str | None = None
        self._new_uuid = new_uuid
        self._request_ids = count(1)
        self._init_request: str | None = None
        self._reader = new_reader(max_line)
        self._turns = Turns()
        self._turn_error_reported = False
        self._last_total_cost = 0.0
        self._init_key: tuple[Any, ...] | None = None
        self._blocks: dict[str, list[StreamedBlock]] = {}  # message id → streamed blocks, in order
        self._by_index: dict[tuple[str, int], StreamedBlock] = {}
        self._confirmed: dict[str, int] = {}  # message id → assistant blocks seen
        self._current_message: str | None = None
        self._tools_started: set[str] = set()
        self._permissions: dict[str, PendingPermission] = {}
        self._asks: dict[str, dict[str, Any]] = {}  # AskUserQuestion prompts: request id → input
        self._handlers = self._handler_table()

    # ---- state ------------------------------------------------------------
    @property
    def turn_running(self) -> bool:
        return bool(self._turns.pending)

    @property
    def pending_permissions(self) -> frozenset[str]:
        return frozenset(self._permissions)

    def _request_id(self, what: str) -> str:
        return f"req_{next(self._request_ids)}_{what}"

    # ---- host → agent -----------------------------------------------------
    def initialize(self) -> bytes:
        """The first frame: the ``initialize`` control request whose answer means ready."""
        if self.state is not DriverState.NEW:
            raise RuntimeError(f"initialize sent twice (state {self.state.value})")
        self.state = DriverState.INITIALIZING
        self._init_request = self._request_id("init")
        return request_line(self._init_request, "initialize", hooks=None)

    def send(self, frame: Event) -> bytes:
        """Encode one orchestrator → agent CAP frame (``b""`` when it needs no bytes)."""
        if isinstance(frame, UserInputInject):
            return self._user(frame)
        if isinstance(frame, PermissionResponse):
            return self._permission_response(frame)
        if isinstance(frame, Cancel):
            return self._interrupt() if frame.scope == "current_turn" else b""
        if isinstance(frame, AskUserAnswer):
            return self._ask_answer(frame)
        return b""  # cap.session.config went into the argv at spawn

    def _user(self, frame: UserInputInject) -> bytes:
        uuid = self._new_uuid()
        self._turns.prompt(uuid)
        return prompt_line(frame, uuid)

    def _permission_response(self, frame: PermissionResponse) -> bytes:
        pending = self._permissions.pop(frame.req_id, None)
        # withdrawn by the agent, or never ours: answering would confuse it (H5)
        return b"" if pending is None else permission_line(frame, pending)

    def _ask_answer(self, frame: AskUserAnswer) -> bytes:
        asked = self._asks.pop(frame.ask_id, None)
        return b"" if asked is None else ask_line(frame, asked)

    def _interrupt(self) -> bytes:
        if not self._turns.interrupt():
            return b""
        return request_line(self._request_id("interrupt"), "interrupt")

    def close(self) -> None:
        self.state = DriverState.CLOSED

    # ---- agent → host -----------------------------------------------------
    def receive_data(self, data: bytes) -> list[Output]:
        """Bytes exactly as read; a partial last line waits for the next call."""
        return self._translate(self._reader.feed(data))

    def receive_eof(self) -> list[Output]:
        """The agent closed stdout: a last line without newline still counts."""
        out = self._translate(self._reader.eof())
        self.state = DriverState.CLOSED
        return out

    def _translate(self, lines: Lines[f.AnyFrame]) -> list[Output]:
        """The hot loop: one pass over a read's frames, content deltas handled inline.

        A *run* is consecutive deltas of one kind for one block (text or
        thinking pieces: R2; a tool call's input pieces): the block is looked
        up once, and the pieces are joined when anything else comes or the
        read ends.  Everything that is not a delta goes to :meth:`_frame`.
        """
        out: list[Output] = []
        handlers = self._handlers
        stream_event, stream_event_full, delta_t, text_t, thinking_t, msg_delta, msg_stop = _HOT
        run = 0  # 0: no run, _TEXT: text/thinking pieces, _JSON: tool input pieces
        run_type: type | None = None  # the delta type the run collected last (fastest check)
        run_block: StreamedBlock | None = None
        run_parts: list[str] = []
        append = run_parts.append
        run_index = -1
        run_parent: str | None = None
        for i, frame in enumerate(lines.items):
            kind = type(frame)
            if kind is stream_event or kind is stream_event_full:
                ev = frame.event  # type: ignore[union-attr]
                ev_type = type(ev)
                if ev_type is delta_t:
                    delta = ev.delta
                    dtype = type(delta)
                    if (dtype is run_type and ev.index == run_index
                            and frame.parent_tool_use_id is run_parent):  # type: ignore[union-attr]
                        if dtype is text_t:
                            append(delta.text)  # type: ignore[union-attr]
                        elif dtype is thinking_t:
                            append(delta.thinking)  # type: ignore[union-attr]
                        else:
                            append(delta.partial_json)  # type: ignore[union-attr]
                        continue
                    piece, want = delta_piece(delta)
                    if not want:
                        continue  # a thinking block's signature: nothing for CAP
                    parent = frame.parent_tool_use_id  # type: ignore[union-attr]
                    if (run == want and ev.index == run_index
                            and (parent is run_parent or parent == run_parent)):
                        append(piece)
                        run_type = dtype if parent is run_parent else None
                        continue
                    if run:
                        self._flush(run, run_block, run_parts, run_parent, out)
                    run, run_index, run_parent, run_parts = want, ev.index, parent, [piece]
                    append = run_parts.append
                    run_type = dtype
                    msg = self._current_message
                    run_block = None if msg is None else self._by_index.get((msg, run_index))
                    continue
                if ev_type is msg_delta or ev_type is msg_stop:
                    continue  # nothing for CAP, and no reason to end a run of text
            if run:
                self._flush(run, run_block, run_parts, run_parent, out)
                run, run_type = 0, None
            handler = handlers.get(kind)
            if handler is not None:
                handler(frame, lines, i, out)
            else:  # a frame only the other direction sends (cap.session.config)
                out.append(raw_event("unhandled_frame", lines.raw(i)))
        if run:
            self._flush(run, run_block, run_parts, run_parent, out)
        return out

    def _flush(self, run: int, block: StreamedBlock | None, parts: list[str],
               parent: str | None, out: list[Output]) -> None:
        if block is None:
            return  # deltas for a block that never started: nothing to add them to
        if run == _JSON:
            block.json_parts += parts
            return
        piece = parts[0] if len(parts) == 1 else "".join(parts)
        before = block.length
        block.parts.append(piece)
        block.length = before + len(piece)
        if block.emitted < before:  # something earlier was never emitted: it goes out now
            piece = block.text[block.emitted:]
        block.emitted = block.length
        event = Thought if block.type == "thinking" else TextChunk
        out.append(event(message_id=self._current_message or "", text=piece,
                         meta=None if parent is None else _sub_meta(parent)))

    def _handler_table(self) -> dict[type, Callable[[Any, Lines[Any], int, list[Output]], None]]:
        """Frame type → handler: one dict lookup per frame instead of a chain of tests."""
        def quiet(frame: Any, lines: Lines[Any], i: int, out: list[Output]) -> None:
            pass  # R17

        table: dict[type, Callable[[Any, Lines[Any], int, list[Output]], None]] = {
            f.StreamEvent: self._stream_event, f.Assistant: self._assistant,
            f.User: self._user_frame, f.Result: self._result, f.System: self._system,
            f.ControlRequest: self._control_request, f.ControlResponse: self._control_response,
            f.ControlCancelRequest: self._cancel_request,
            f.RateLimitEvent: lambda frame, lines, i, out: out.extend(rate_limited(frame)),
            BadLine: lambda frame, lines, i, out: out.append(unreadable(frame)),
            Unknown: lambda frame, lines, i, out: out.append(raw_event(frame.reason, frame.raw)),
            f.CommandLifecycle: quiet, f.KeepAlive: quiet,
        }
        for full, view in f.BATCH_VIEWS.items():  # the batch decoder's narrower views
            table[view] = table[full]
        return table

    def _cancel_request(self, frame: f.ControlCancelRequest, lines: Lines[Any], i: int,
                        out: list[Output]) -> None:
        withdrawn = self._asks.pop(frame.request_id, None) is not None
        if self._permissions.pop(frame.request_id, None) is not None or withdrawn:
            out.append(raw_event("permission_withdrawn", lines.raw(i)))

    # -- text, thinking and tool calls --
    def _stream_event(self, frame: f.StreamEvent | f.StreamEventIn, lines: Lines[Any], i: int,
                      out: list[Output]) -> None:
        ev = frame.event
        kind = type(ev)
        msg = self._current_message
        if kind is _BlockStart and msg is not None:
            cb = ev.content_block
            if isinstance(cb, _TOOL_BLOCKS):
                block = StreamedBlock("tool_use", cb.id, cb.name)
            else:
                block = StreamedBlock(_BLOCK_TYPES.get(type(cb), "other"))
            self._blocks.setdefault(msg, []).append(block)
            self._by_index[(msg, ev.index)] = block
        elif kind is _BlockStop and msg is not None:
            block = self._by_index.get((msg, ev.index))
            if block is not None and block.tool_id and block.tool_id not in self._tools_started:
                # No assistant frame confirmed it (an older CLI): start from the streamed input.
                streamed = block.partial_json
                try:
                    args = msgspec.json.decode(streamed or "{}")
                except msgspec.DecodeError:
                    args = None
                if not isinstance(args, dict):
                    args = {"_partial_json": streamed}
                self._start_tool(block.tool_id, block.tool_name or "", args, out,
                                 _sub_meta(frame.parent_tool_use_id))
        elif kind is f.MessageStart:
            self._current_message = ev.message.id
            self._blocks.setdefault(ev.message.id, [])

    def _emit_block(self, msg: str, block: StreamedBlock, out: list[Output],
                    meta: dict[str, Any] | None) -> None:
        if block.length <= block.emitted:
            return
        piece = block.unemitted()
        if block.type == "thinking":
            out.append(Thought(message_id=msg, text=piece, meta=meta))
        else:
            out.append(TextChunk(message_id=msg, text=piece, meta=meta))

    def _assistant(self, frame: f.Assistant, lines: Lines[Any], i: int,
                   out: list[Output]) -> None:
        message = frame.message
        if frame.is_api_error_message or frame.error:
            self._turn_error_reported = True
            out.append(api_error(frame))
            return
        if message.model and message.model != "<synthetic>":
            self.model = message.model
        msg = message.id
        streamed = self._blocks.get(msg, ())
        parent = frame.parent_tool_use_id
        meta = None if parent is None else _sub_meta(parent)
        k = self._confirmed.get(msg, 0)
        for content in message.content:
            known = streamed[k] if k < len(streamed) else None
            k += 1
            kind_t = type(content)
            if kind_t is f.TextBlock or kind_t is f.ThinkingBlock:
                text_block = kind_t is f.TextBlock
                full = content.text if text_block else content.thinking  # type: ignore[union-attr]
                kind = "text" if text_block else "thinking"
                same = known is not None and known.type == kind
                block = known if same else StreamedBlock(kind)  # type: ignore[assignment]
                # Complete what the deltas missed; never repeat what they gave (R3).
                given = block.text
                if full.startswith(given if block.emitted == len(given) else
                                   given[:block.emitted]):
                    block.replace(full)
                    self._emit_block(msg, block, out, meta)  # type: ignore[arg-type]
            elif kind_t is f.ToolUseBlock or kind_t is f.ServerToolUseBlock:
                self._start_tool(content.id, content.name, content.input, out, meta)  # type: ignore[union-attr]
        self._confirmed[msg] = k

    def _start_tool(self, call_id: str, name: str, args: dict[str, Any], out: list[Output],
                    meta: dict[str, Any] | None) -> None:
        if call_id in self._tools_started:
            return
        self._tools_started.add(call_id)
        out.append(ToolCallStart(call_id=call_id, name=name, input=args, meta=meta))

    def _user_frame(self, frame: f.User, lines: Lines[Any], i: int, out: list[Output]) -> None:
        content = frame.message.content
        meta = _sub_meta(frame.parent_tool_use_id)
        if isinstance(content, str):
            notices = [content]
        else:
            notices = []
            for block in content:
                if isinstance(block, f.ToolResultBlock):
                    out.append(ToolCallEnd(call_id=block.tool_use_id,
                                           output=result_text(block.content),
                                           is_error=bool(block.is_error), meta=meta))
                elif isinstance(block, f.TextBlock):
                    notices.append(block.text)
        if notices and frame.uuid not in self._turns.sent:
            # Interrupt notices, local command output: the agent speaking as the system (R6).
            out.append(TextChunk(message_id=frame.uuid or "user", text="\n".join(notices),
                                 channel="system", meta=meta))

    # -- end of turn --
    def _result(self, frame: f.Result, lines: Lines[Any], i: int, out: list[Output]) -> None:
        turns = self._turns
        stop = turns.stop_reason(frame)  # before close: it reads the interrupt
        live = turns.close(frame)
        if not live:
            out.append(raw_event("duplicate_result", lines.raw(i)))
            return
        if stop == "error":
            error = result_error(frame, self._turn_error_reported)
            if error is not None:
                out.append(error)
        model = self.model or (next(iter(frame.model_usage)) if frame.model_usage else None)
        usage, self._last_total_cost = usage_of(frame, stop, model, self._last_total_cost)
        out.append(usage)
        if turns.idle():
            self._end_of_turns()
        self._turn_error_reported = False
        out.extend(TurnEnded(stop) for _ in live)

    def _end_of_turns(self) -> None:
        """No turn runs: forget the streaming bookkeeping (it is per API message)."""
        self._blocks.clear()
        self._by_index.clear()
        self._confirmed.clear()
        self._tools_started.clear()
        self._current_message = None
        self._permissions.clear()

    # -- system and control --
    def _system(self, frame: f.System, lines: Lines[Any], i: int, out: list[Output]) -> None:
        sub = frame.subtype
        if sub == "init":
            self.model = frame.model or self.model
            self.agent_version = frame.claude_code_version or self.agent_version
            if frame.session_id:
                self.session_id = frame.session_id
            key = (frame.session_id, frame.model, frame.cwd, frame.permission_mode,
                   tuple(frame.tools or ()), tuple(frame.slash_commands or ()))
            if key != self._init_key:
                near = frame.uuid.encode() if frame.uuid and len(frame.uuid) >= 8 else b""
                raw = lines.raw(i, near, lambda line: _same_frame(line, frame))
                out.append(raw_event("init" if self._init_key is None else "init_changed", raw))
                self._init_key = key
        elif sub == "api_retry":
            status = frame.error_status
            code = error_code(status, str(frame.error or ""))
            out.append(CapError(
                code=code, retryable=True,
                message=f"API error {status}: retry {frame.attempt}/{frame.max_retries} "
                        f"in {frame.retry_delay_ms} ms",
                details={"status": status, "attempt": frame.attempt, "error": frame.error}))
        elif sub in ("cap.error", "cap.artifact"):
            try:
                event = cap_extension(sub, frame.cap)
            except msgspec.ValidationError as exc:
                out.append(raw_event(f"unreadable {sub}: {exc}", lines.raw(i)))
                return
            if type(event) is CapError:
                self._turn_error_reported = self.turn_running  # its result repeats it
            out.append(event)
        elif sub not in _QUIET_SYSTEM:
            out.append(raw_event("unknown_system_frame", lines.raw(i)))

    def _control_request(self, frame: f.ControlRequest, lines: Lines[Any], i: int,
                         out: list[Output]) -> None:
        request = frame.request if isinstance(frame.request, dict) else {}
        try:
            decoded = f.decode_request(request)
        except msgspec.ValidationError:
            decoded = str(request.get("subtype", ""))
        if isinstance(decoded, f.CanUseTool):
            self._can_use_tool(frame.request_id, decoded, out)
            return
        # Hooks, SDK MCP servers, anything else: trio-cap registered none of them (R14).
        subtype = decoded if isinstance(decoded, str) else decoded.__struct_config__.tag
        out.append(raw_event("unsupported_control_request", lines.raw(i)))
        out.append(ToAgent(refusal_line(frame.request_id, subtype)))

    def _can_use_tool(self, req_id: str, req: f.CanUseTool, out: list[Output]) -> None:
        if req.tool_name == ASK_TOOL and (ask := ask_from_tool(req_id, req.input)) is not None:
            # Claude Code asks the user through a tool: to CAP that is an ask (R12)
            self._asks[req_id] = req.input
            out.append(ask)
            return
        self._permissions[req_id] = PendingPermission(req.input, req.permission_suggestions)
        details = {k: v for k, v in (("tool_use_id", req.tool_use_id),
                                     ("description", req.description),
                                     ("blocked_path", req.blocked_path),
                                     ("decision_reason", req.decision_reason),
                                     ("title", req.title)) if v}
        meta: dict[str, Any] = {"stream_json": details} if details else {}
        claimed = (req.meta or {}).get(AGENT_RISK)
        if claimed in _RISKS:
            meta[AGENT_RISK] = claimed  # passed through untouched; the session rates (R13)
        out.append(PermissionRequest(req_id=req_id, tool=req.tool_name, intent=req.input,
                                     scope=tool_scope(req.tool_name), meta=meta or None))

    def _control_response(self, frame: f.ControlResponse, lines: Lines[Any], i: int,
                          out: list[Output]) -> None:
        body = frame.response
        if body.request_id != self._init_request or self.state is not DriverState.INITIALIZING:
            if body.subtype == "error":
                out.append(raw_event("control_error", lines.raw(i)))
            return
        if body.subtype == "error":
            self.state = DriverState.FAILED
            self.handshake_error = body.error or "initialize failed"
            out.append(CapError(code="cap_binding_unavailable",
                                message=f"the agent refused initialize: {self.handshake_error}"))
            return
        self.state = DriverState.READY
        info = body.response if isinstance(body.response, dict) else {}
        version = info.get("claude_code_version")
        if isinstance(version, str):
            self.agent_version = version
        meta = {k: info[k] for k in ("claude_code_version", "pid", "current_permission_mode")
                if k in info}
        out.append(CapSessionReady(session_id=self.session_id,
                                   meta={"stream_json": meta} if meta else None))


def _sub_meta(parent_tool_use_id: str | None) -> dict[str, Any] | None:
    """Sub-agent output (inside a Task tool call) is marked with the call it belongs to."""
    return {"stream_json": {"parent_tool_use_id": parent_tool_use_id}} if parent_tool_use_id \
        else None


def _same_frame(line: bytes, frame: Any) -> bool:
    """Is ``line`` the line ``frame`` was decoded from (or a twin of it)?"""
    try:
        if type(frame) in _VIEWS:  # it came from the batch decoder
            return f.decode_frames(b"[" + line + b"]") == [frame]
        return f.decode_frame(line) == frame
    except (msgspec.DecodeError, f.UnknownFrame):
        return False


