"""The ACP client machine, sans-io: agent stdout bytes → CAP events, CAP frames → stdin bytes.

trio-cap as an ACP *client* (the editor's side) of one agent process.  A
machine of the binding kit (:mod:`..base`): no process, pipe, clock, file or
randomness, so the same bytes give the same outputs and a recorded session
replays through it.  Lines are framed by :mod:`..ndjson` (a whole read of
``session/update`` lines decoded in one msgspec call: the hot path), messages
classified and ids matched by :mod:`..jsonrpc` (both sides number their own
requests from 0; ids are echoed exactly), payloads decoded leniently by
:mod:`.frames_lenient`.  What only the shell can do (read and write files,
run terminals) leaves the machine as :class:`Serve`; the shell answers with
:meth:`AcpClient.answer` / :meth:`AcpClient.refuse`.

States::

    NEW ─initialize()─► INITIALIZING ─result─► [AUTHENTICATING] ─► OPENING ─► [CONFIGURING]
        ─► READY (cap.session.ready; prompts flow)         any ─► FAILED | CLOSED

Rules, agent → client (the update mapping itself: :mod:`.machine_updates`):

====  ===========================================  ==============================================
rule  input                                        output
====  ===========================================  ==============================================
A1    ``initialize`` result, version 1             defaults applied; authenticate (a method was
                                                   configured) or open the session
A2    ``initialize`` result, another version;      FAILED (``handshake_error`` says why; the
      an error answer to initialize/new/load       shell raises one ConnectError line)
A3    ``session/new`` answered -32000 (auth)       ``authenticate`` with the configured method,
                                                   then ``session/new`` again; none: FAILED
                                                   naming the agent's methods
A4    ``session/new|load|resume`` result           model (a ``model`` config option) and mode
                                                   applied, then ``cap.session.ready``
A5    ``session/update`` during a turn             the mapped CAP events
A6    ``session/update`` while loading             ``agent.raw`` ``replayed_history``
A7    ``session/update`` outside a turn            usage and raw records as mapped; anything
                                                   else ``agent.raw`` ``update_after_turn``
A8    ``session/update`` for another session       ``agent.raw`` ``other_session``
A9    ``session/prompt`` result                    ``cap.usage`` when it carries usage, then
                                                   ``TurnEnded`` (``stopReason`` mapped; refusal
                                                   and max_turn_requests: ``cap.error`` + error)
A10   ``session/prompt`` error                     -32800: ``TurnEnded(cancelled)``; else
                                                   ``cap.error`` + ``TurnEnded(error)``
A11   ``session/request_permission``               ``cap.permission.request`` (option ids and
                                                   kinds in ``_meta.acp``; risk: the session's)
A12   ``elicitation/create`` form mode             ``cap.ask_user`` with the form
A13   ``elicitation/create`` other mode            -32602 (only form mode is advertised)
A14   ``fs/read_text_file``, ``terminal/*`` but    :class:`Serve` (the shell does it, confined)
      create
A15   ``fs/write_text_file``, ``terminal/create``  ``cap.permission.request`` ``Write`` / ``Bash``
                                                   first (not when the mode is ``none``, or
                                                   the agent's own request for the same path or
                                                   command was allowed this turn), then Serve
A16   a request for what was not advertised        -32601 + ``cap.error``
                                                   ``cap_unsupported_capability``
A17   an unknown request / notification            -32601 + ``agent.raw`` / ``agent.raw``
A18   ``$/cancel_request`` for a pending request   -32800 for it, :class:`Withdraw`,
                                                   ``agent.raw`` ``request_withdrawn``
A19   bad params, another session's id             -32602 + ``agent.raw``
A20   not JSON, not JSON-RPC, overlong line        the JSON-RPC error reply when one is owed,
                                                   ``cap.error`` ``parse_failed``
A21   a response to nothing pending                ``agent.raw`` ``stray_response``
====  ===========================================  ==============================================

Rules, CAP → agent (:meth:`AcpClient.send`):

====  ===========================================  ==============================================
C1    ``cap.user_input.inject``                    ``session/prompt``; one at a time, the rest
                                                   queued until the running prompt answers
C2    ``cap.permission.response``, agent request   the option of the decided kind (allow_once /
                                                   allow_always / reject_once / reject_always);
                                                   none of that kind offered: ``cancelled``
C3    ``cap.permission.response``, our vetting     allow: :class:`Serve`; deny: -32603 error
C4    ``cap.ask_user.answer``                      accept with content valid for the form;
                                                   null: decline; invalid: decline +
                                                   ``cap.error`` ``cap_invalid_answer``
C5    ``cap.cancel`` current_turn, a prompt runs   ``session/cancel``; every pending permission
                                                   answered ``cancelled``, asks ``cancel``,
                                                   vetted effects -32800
C6    anything else                                nothing
====  ===========================================  ==============================================
"""

from __future__ import annotations

import posixpath
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
from msgspec import UNSET

from trio_cap.actors.bindings import jsonrpc as rpc
from trio_cap.actors.bindings.acp import frames as f
from trio_cap.actors.bindings.acp.frames_lenient import decode_notification, decode_payload
from trio_cap.actors.bindings.acp.machine_handshake import ClientOptions, ClientState, Handshake
from trio_cap.actors.bindings.acp.machine_hot import HotPath
from trio_cap.actors.bindings.acp.machine_reverse import (
    CANCELLED,
    ask_for,
    choose_option,
    command_text,
    elicitation_result,
    permission_request,
    permission_result,
    terminal_request,
    write_request,
)
from trio_cap.actors.bindings.acp.machine_updates import (
    UpdateMapper,
    prompt_error_code,
    prompt_usage,
    raw,
    raw_value,
)
from trio_cap.actors.bindings.base import Output, ToAgent, TurnEnded
from trio_cap.actors.bindings.ndjson import BadLine, NdjsonReader, NoRecovery
from trio_cap.events.kinds import (
    AgentRaw,
    AskUserAnswer,
    Cancel,
    CapError,
    Event,
    PermissionResponse,
    StopReason,
    Usage,
    UserInputInject,
)

__all__ = ["AcpClient", "ClientOptions", "ClientState", "Serve", "Withdraw"]

PERMISSION_DENIED = rpc.INTERNAL_ERROR
"""The error a vetted write or terminal gets when trio-cap's policy or a person refused it."""

_STOPS: dict[str, StopReason] = {"end_turn": "end_turn", "max_tokens": "max_tokens",
                                 "cancelled": "cancelled"}
_TERMINAL_METHODS = frozenset({f.TERMINAL_CREATE, f.TERMINAL_OUTPUT, f.TERMINAL_WAIT,
                               f.TERMINAL_KILL, f.TERMINAL_RELEASE})


@dataclass(frozen=True, slots=True)
class Serve:
    """A reverse request only the shell can carry out; answer it with ``answer``/``refuse``."""

    rpc_id: rpc.Id | None
    method: str
    params: Any


@dataclass(frozen=True, slots=True)
class Withdraw:
    """The agent withdrew a request being served (``$/cancel_request``): stop serving it."""

    rpc_id: rpc.Id | None


@dataclass
class _Pending:
    """A reverse request waiting for a CAP decision or answer."""

    rpc_id: rpc.Id | None
    kind: str  # "agent" permission, "vet" (a write or terminal), "ask"
    method: str
    params: Any
    form: dict[str, Any] = field(default_factory=dict)


class AcpClient(HotPath, Handshake):
    """One ACP agent session, as a state machine (see the module rules)."""

    def __init__(self, options: ClientOptions, *, max_line: int = f.MAX_LINE) -> None:
        self.options = options
        self.state = ClientState.NEW
        self.handshake_error: str | None = None
        self.session_id: str | None = None
        self.agent: f.InitializeResult | None = None
        self.modes: f.SessionModeState | None = None
        self.rpc = rpc.JsonRpc()
        self.updates = UpdateMapper()
        self._reader: NdjsonReader[Any] = NdjsonReader(
            self.rpc.receive, self._decode_block, max_line=max_line, recovery=NoRecovery())
        self._session_decoder: tuple[str, type, Any, Any] | None = None
        self._authenticated = False
        self._loading = False
        self._context_due = False
        self._steps: deque[tuple[str, Any]] = deque()
        self._prompts: deque[UserInputInject] = deque()
        self._prompt: rpc.Id | None = None
        self._cancelling = False
        self._turn = 0
        self._pending: dict[str, _Pending] = {}
        self._counter = 0
        self._allowed_paths: set[str] = set()
        self._allowed_commands: set[str] = set()
        self._mode_asked: str | None = None

    # ---- state --------------------------------------------------------------------------
    @property
    def turn_running(self) -> bool:
        return self._prompt is not None

    @property
    def pending_requests(self) -> frozenset[str]:
        return frozenset(self._pending)

    def _new_ref(self, what: str) -> str:
        self._counter += 1
        return f"acp_{what}_{self._counter}"

    # ---- CAP → agent --------------------------------------------------------------------------
    def send(self, frame: Event) -> list[Output]:
        kind = type(frame)
        if kind is UserInputInject:
            self._prompts.append(frame)  # type: ignore[arg-type]
            return self._next_prompt()
        if kind is PermissionResponse:
            return self._decided(frame)  # type: ignore[arg-type]
        if kind is AskUserAnswer:
            return self._answered(frame)  # type: ignore[arg-type]
        if kind is Cancel and frame.scope == "current_turn":  # type: ignore[attr-defined]
            return self.cancel()
        return []  # cap.session.config went into initialize and session/new

    def _next_prompt(self) -> list[Output]:
        if self.state is not ClientState.READY or self._prompt is not None or not self._prompts:
            return []
        frame = self._prompts.popleft()
        blocks = tuple(f.TextContent(text=b.text) for b in frame.content if b.type == "text")
        if self._context_due and self.options.context:
            self._context_due = False  # once: the new session's first prompt
            blocks = (f.TextContent(text=self.options.context), *blocks)
        self._turn += 1
        self._cancelling = False
        self._allowed_paths.clear()
        self._allowed_commands.clear()
        prompt_id, data = self.rpc.request(f.SESSION_PROMPT, f.PromptParams(
            session_id=self.session_id or "", prompt=blocks or (f.TextContent(text=""),)))
        self._prompt = prompt_id
        return [ToAgent(data + b"\n")]

    def cancel(self) -> list[Output]:
        """C5: the turn is cancelled; every request the agent is waiting on is answered now."""
        if self._prompt is None or self._cancelling:
            return []
        self._cancelling = True
        out: list[Output] = [ToAgent(self.rpc.notify(
            f.SESSION_CANCEL, f.SessionIdParams(session_id=self.session_id or "")) + b"\n")]
        for ref, pending in list(self._pending.items()):
            del self._pending[ref]
            if pending.kind == "agent":
                out.append(self._reply(pending.rpc_id, CANCELLED))
            elif pending.kind == "ask":
                out.append(self._reply(pending.rpc_id, f.ElicitationResult(action="cancel")))
            else:
                out.append(self._error(pending.rpc_id, f.REQUEST_CANCELLED,
                                       "the turn was cancelled"))
            out.append(raw("cancelled_pending", f"{ref}: answered as cancelled ({pending.method})"))
        return out

    def _decided(self, frame: PermissionResponse) -> list[Output]:
        pending = self._pending.get(frame.req_id)
        if pending is None or pending.kind == "ask":
            return []  # withdrawn, cancelled or not ours (C6)
        del self._pending[frame.req_id]
        allowed = frame.decision != "deny"
        if pending.kind == "agent":
            params: f.RequestPermissionParams = pending.params
            option = choose_option(params.options, frame.decision)
            if allowed and option is not None:
                self._remember_allowed(params)
            return [self._reply(pending.rpc_id, permission_result(option))]
        if allowed:
            return [Serve(pending.rpc_id, pending.method, pending.params)]
        why = (frame.meta or {}).get("cap.message") or "refused by trio-cap's permission policy"
        return [self._error(pending.rpc_id, PERMISSION_DENIED, f"permission denied: {why}")]

    def _remember_allowed(self, params: f.RequestPermissionParams) -> None:
        call = params.tool_call
        known = self.updates.calls.get(call.tool_call_id)
        raw_input = call.raw_input if call.raw_input not in (UNSET, None) else (
            known.raw_input if known else None)
        locations = call.locations if isinstance(call.locations, tuple) else (
            known.locations if known else ())
        for loc in locations:
            self._allowed_paths.add(posixpath.normpath(loc.path))
        if isinstance(raw_input, dict):
            for key in ("path", "file_path", "filePath", "abs_path"):
                if isinstance(raw_input.get(key), str):
                    self._allowed_paths.add(posixpath.normpath(raw_input[key]))
            command = raw_input.get("command")
            if isinstance(command, list) and all(isinstance(c, str) for c in command):
                self._allowed_commands.add(" ".join(command))
            elif isinstance(command, str):
                self._allowed_commands.add(command)

    def _answered(self, frame: AskUserAnswer) -> list[Output]:
        pending = self._pending.get(frame.ask_id)
        if pending is None or pending.kind != "ask":
            return []
        del self._pending[frame.ask_id]
        result, problem = elicitation_result(pending.form, frame.value)
        out: list[Output] = []
        if problem:
            out.append(CapError(code="cap_invalid_answer",
                                message=f"answer to {frame.ask_id} declined: {problem}"))
        out.append(self._reply(pending.rpc_id, result))
        return out

    # ---- the shell's answers ---------------------------------------------------------------------
    def answer(self, rpc_id: rpc.Id | None, result: Any) -> list[Output]:
        """A :class:`Serve` done: its result (``{}`` for the empty ones)."""
        if rpc_id not in self.rpc.unanswered:
            return []  # withdrawn meanwhile: the agent no longer waits
        return [self._reply(rpc_id, result)]

    def refuse(self, rpc_id: rpc.Id | None, code: int, message: str,
               data: Any = UNSET) -> list[Output]:
        if rpc_id not in self.rpc.unanswered:
            return []
        return [self._error(rpc_id, code, message, data)]

    def _reply(self, rpc_id: rpc.Id | None, result: Any) -> ToAgent:
        return ToAgent(self.rpc.reply(rpc_id, result) + b"\n")

    def _error(self, rpc_id: rpc.Id | None, code: int, message: str,
               data: Any = UNSET) -> ToAgent:
        return ToAgent(self.rpc.reply_error(rpc_id, code, message, data) + b"\n")

    # ---- agent → client ------------------------------------------------------------------------
    def receive_data(self, data: bytes) -> list[Output]:
        return self._translate(self._reader.feed(data))

    def receive_eof(self) -> list[Output]:
        out = self._translate(self._reader.eof())
        if self.state not in (ClientState.READY, ClientState.FAILED):
            self.handshake_error = self.handshake_error or "the agent closed its output"
        self.state = ClientState.CLOSED
        self.rpc.abandon()
        self._pending.clear()
        return out

    def close(self) -> None:
        self.state = ClientState.CLOSED

    def _handle(self, kind: type, item: Any, out: list[Output]) -> None:
        """Anything but a notification of the hot loop: the handler table (or a bad line)."""
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, item, out)
        elif kind is BadLine:
            out.append(_unreadable(item.reason, item.raw, item.size))

    def _update(self, params: f.SessionNotification | f.LooseNotification | f.NotificationView,
                out: list[Output]) -> None:
        if self.session_id is not None and params.session_id != self.session_id:
            out.append(raw_value("other_session", params))
            return
        if self._loading:
            out.append(raw_value("replayed_history", params.update))
            return
        events = self.updates.map(params.update, f"turn_{self._turn}")
        if self._prompt is not None:
            out += events
            return
        kept = [e for e in events if type(e) is Usage or type(e) is AgentRaw]
        out += kept
        if len(kept) < len(events):
            out.append(raw_value("update_after_turn", params.update))

    def _notification(self, note: rpc.Notification, out: list[Output]) -> None:
        method = note.method
        if method == f.SESSION_UPDATE:
            try:
                params = decode_notification(bytes(note.params or b"{}"))
            except rpc.PayloadError as exc:
                out.append(raw("invalid_update", f"{exc}: {bytes(note.params or b'')[:4096]!r}"))
                return
            self._update(params, out)
        elif method == f.CANCEL_REQUEST:
            self._withdraw(note, out)
        elif method == f.ELICITATION_COMPLETE:
            out.append(raw("elicitation_complete", bytes(note.params or b"").decode(
                "utf-8", errors="replace")))
        else:
            out.append(raw("unknown_notification", method))

    def _withdraw(self, note: rpc.Notification, out: list[Output]) -> None:
        try:
            params = decode_payload(bytes(note.params or b"{}"), f.CancelRequestParams)
        except rpc.PayloadError:
            return
        target = params.request_id
        if target not in self.rpc.unanswered:
            return
        for ref, pending in list(self._pending.items()):
            if pending.rpc_id == target and type(pending.rpc_id) is type(target):
                del self._pending[ref]
        out.append(Withdraw(target))
        out.append(self._error(target, f.REQUEST_CANCELLED, "request cancelled by the agent"))
        out.append(raw("request_withdrawn", f"the agent withdrew its request {target!r}"))

    def _incoming(self, request: rpc.Request, out: list[Output]) -> None:
        method = request.method
        params_type = f.CLIENT_REQUESTS.get(method)
        if params_type is None:
            out.append(ToAgent(self.rpc.method_not_found(request) + b"\n"))
            out.append(raw("unknown_request", method))
            return
        if not self._advertised(method):
            out.append(ToAgent(self.rpc.method_not_found(request) + b"\n"))
            out.append(CapError(code="cap_unsupported_capability",
                                message=f"the agent called {method}, which trio-cap did not "
                                        "advertise for this session"))
            return
        try:
            params = decode_payload(bytes(request.params or b"{}"), params_type)
        except rpc.PayloadError as exc:
            out.append(ToAgent(self.rpc.invalid_params(request, str(exc)) + b"\n"))
            out.append(raw("invalid_params", f"{method}: {exc}"))
            return
        sid = getattr(params, "session_id", None)
        if isinstance(sid, str) and self.session_id is not None and sid != self.session_id:
            out.append(self._error(request.id, rpc.INVALID_PARAMS, f"unknown session {sid!r}"))
            out.append(raw("other_session", f"{method} for session {sid!r}"))
            return
        if method == f.REQUEST_PERMISSION:
            ref = self._new_ref("perm")
            self._pending[ref] = _Pending(request.id, "agent", method, params)
            out.append(permission_request(ref, params, self.updates.calls.get(
                params.tool_call.tool_call_id)))
        elif method == f.ELICITATION_CREATE:
            if params.mode != "form" or not isinstance(params.requested_schema, dict):
                out.append(self._error(request.id, rpc.INVALID_PARAMS,
                                       f"elicitation mode {params.mode!r} is not supported "
                                       "(trio-cap advertises form mode only)"))
                out.append(raw("elicitation_refused", params.mode))
                return
            ref = self._new_ref("ask")
            ask = ask_for(ref, params)
            self._pending[ref] = _Pending(request.id, "ask", method, params, ask.form or {})
            out.append(ask)
        elif method in (f.FS_WRITE, f.TERMINAL_CREATE) and self._needs_vetting(method, params):
            ref = self._new_ref("write" if method == f.FS_WRITE else "terminal")
            self._pending[ref] = _Pending(request.id, "vet", method, params)
            out.append(write_request(ref, params) if method == f.FS_WRITE
                       else terminal_request(ref, params))
        else:
            out.append(Serve(request.id, method, params))

    def _advertised(self, method: str) -> bool:
        o = self.options
        if method == f.FS_READ:
            return o.fs_read
        if method == f.FS_WRITE:
            return o.fs_write
        if method in _TERMINAL_METHODS:
            return o.terminal
        if method == f.ELICITATION_CREATE:
            return o.elicitation
        return True

    def _needs_vetting(self, method: str, params: Any) -> bool:
        if self.options.permission_mode == "none":
            return False  # bypass: the agent runs in its own no-prompt mode
        if method == f.FS_WRITE:
            return posixpath.normpath(params.path) not in self._allowed_paths
        return command_text(params) not in self._allowed_commands

    def _response(self, response: rpc.Response, out: list[Output]) -> None:
        method = response.method
        result_type = f.AGENT_RESULTS.get(method, f.Empty)
        try:
            if response.result == msgspec.Raw(b"null"):
                result = msgspec.convert({}, result_type)
            else:
                result = decode_payload(bytes(response.result), result_type)
        except (rpc.PayloadError, msgspec.ValidationError) as exc:
            self._failed(method, f"unreadable {method} result: {exc}", None, out)
            return
        if method == f.SESSION_PROMPT:
            self._prompt_done(response.id, result, out)
        elif method == f.INITIALIZE:
            out += self._initialized(result)
        elif method == f.AUTHENTICATE:
            out += self._open()
        elif method == f.SESSION_NEW:
            self.session_id = result.session_id
            out += self._opened(result.modes, result.config_options)
        elif method in (f.SESSION_LOAD, f.SESSION_RESUME):
            out += self._opened(result.modes, result.config_options)
        elif method == f.SESSION_SET_CONFIG:
            if result.config_options:
                self.updates.config_options = result.config_options
            out += self._next_step()
        elif method == f.SESSION_SET_MODE:
            if self.modes is not None and self._mode_asked is not None:
                self.modes = msgspec.structs.replace(self.modes, current_mode_id=self._mode_asked)
                self.updates.mode = self._mode_asked
            out += self._next_step()

    def _error_response(self, response: rpc.ErrorResponse, out: list[Output]) -> None:
        error = response.error
        if response.method is None:
            out.append(raw("error_without_id", f"{error.code}: {error.message}"))
            return
        self._failed(response.method, error.message, error.code, out, response.id)

    def _failed(self, method: str, message: str, code: int | None, out: list[Output],
                rpc_id: rpc.Id | None = None) -> None:
        """One of our requests failed (an error answer, or a result we cannot read)."""
        if method == f.SESSION_PROMPT:
            if rpc_id is not None and rpc_id != self._prompt:
                return
            self._prompt = None
            if code == f.REQUEST_CANCELLED or self._cancelling:
                out.append(TurnEnded("cancelled"))
            else:
                out.append(CapError(code=prompt_error_code(code, message), message=message,
                                    details={"acp_code": code} if code is not None else None))
                out.append(TurnEnded("error"))
            self._pending.clear()
            out += self._next_prompt()
            return
        if method == f.SESSION_NEW and code == f.AUTH_REQUIRED and not self._authenticated:
            if self.options.auth_method:
                out += self._authenticate(self.options.auth_method)
                return
            names = ", ".join(m.id for m in (self.agent.methods() if self.agent else ())) or "none"
            out += self._fail(f"the agent requires authentication (methods: {names}); set "
                              "TRIO_CAP_ACP_AUTH_METHOD to one of them, or log in to the agent "
                              "by hand once")
            return
        if method == f.SESSION_LOAD:
            out.append(raw("load_failed", f"session/load failed ({message}); "
                                          "a new session was started" + self._with_context()))
            self._loading = False
            self._context_due = bool(self.options.context)
            self.session_id = None
            out.append(ToAgent(self._request(f.SESSION_NEW, f.NewSessionParams(
                cwd=self.options.cwd, mcp_servers=self.options.mcp_servers))))
            return
        if method in (f.SESSION_SET_CONFIG, f.SESSION_SET_MODE):
            out.append(raw("config_refused", f"{method}: {message}"))
            out += self._next_step()
            return
        if self.state in (ClientState.READY, ClientState.CLOSED, ClientState.FAILED):
            out.append(raw("request_failed", f"{method}: {message}"))
            return
        out += self._fail(f"{method} failed: {message}")

    def _prompt_done(self, rpc_id: rpc.Id, result: f.PromptResult, out: list[Output]) -> None:
        if rpc_id != self._prompt:
            out.append(raw("stray_prompt_result", repr(rpc_id)))
            return
        self._prompt = None
        self._pending.clear()
        reason = result.stop_reason
        stop: StopReason = _STOPS.get(reason, "end_turn")
        if self._cancelling:
            stop = "cancelled"  # agents are told to say so; some answer end_turn anyway
        elif reason == "max_turn_requests":
            out.append(CapError(code="max_turns", message="the agent stopped: it reached its "
                                                          "limit of model requests in one turn"))
            stop = "error"
        elif reason == "refusal":
            out.append(CapError(code="agent_error", message="the agent refused to continue"))
            stop = "error"
        elif reason not in _STOPS:
            out.append(raw("unknown_stop_reason", reason))
        usage = result.usage
        if isinstance(usage, dict):
            out.append(prompt_usage(usage, stop))
        out.append(TurnEnded(stop))
        out += self._next_prompt()

    def _invalid(self, item: rpc.Invalid, out: list[Output]) -> None:
        if item.reply is not None:
            out.append(ToAgent(item.reply + b"\n"))
        if item.method is not None:
            self._failed(item.method, item.detail, None, out, item.id)
        out.append(CapError(code="parse_failed",
                            message=f"unusable message from the agent: {item.detail}",
                            details={"jsonrpc_code": item.code}))

    def _stray(self, item: rpc.StrayResponse, out: list[Output]) -> None:
        out.append(raw("stray_response", f"a response to no pending request: id {item.id!r}"))


def _unreadable(reason: str, data: bytes, size: int = 0) -> CapError:
    return CapError(code="parse_failed", message=f"unreadable line from the agent: {reason}",
                    details={"raw": data[:4096].decode("utf-8", errors="replace"),
                             "size": size or len(data)})


_HANDLERS: dict[type, Any] = {
    rpc.Notification: AcpClient._notification,
    rpc.Request: AcpClient._incoming,
    rpc.Response: AcpClient._response,
    rpc.ErrorResponse: AcpClient._error_response,
    rpc.Invalid: AcpClient._invalid,
    rpc.StrayResponse: AcpClient._stray,
}


def events_of(outputs: Sequence[Output]) -> list[Event]:
    """The events among a step's outputs (tests and the bench)."""
    return [o for o in outputs if isinstance(o, Event)]
