"""The agent side of ACP as a sans-io machine: an ACP client's JSON-RPC in, the cores'
CAP events out as ``session/update``s, permission requests and prompt responses.

``cap agent --cap-speak acp`` puts this between stdio and one core per ACP
session (the scripted brain, or the bridge to a driven agent).  No I/O,
clock, randomness or ids of its own: the shell feeds it stdin bytes
(:meth:`AcpAgentSide.receive_data` / :meth:`~AcpAgentSide.receive_eof`),
each core's logged events (:meth:`~AcpAgentSide.core_events`), turn ends, a
session's history read from the log (:meth:`~AcpAgentSide.history`) and the
tool host's reverse requests (:meth:`~AcpAgentSide.client_call`), and
carries out the effects each call returns, in order (``agent_effects.py``).
Session ids come from the injected ``new_session_id``.

Rules
-----
1. **A turn ends with its prompt response.**  Every ``session/update``,
   permission request and reverse request of a turn is written before the
   ``session/prompt`` response (``stopReason``), and nothing of that turn
   after it: a core event that arrives once its turn has been answered is
   logged (the shell appended it) and not shown.
2. One turn per session at a time: a ``session/prompt`` while the session's
   turn runs is refused (-32602), as is a prompt for a session this
   connection does not have.
3. Permission: a core's ``cap.permission.request`` is decided by the
   session's mode and the command line's rules (Claude Code's order,
   ``agent_policy.decide``), then by the client's "always" answers; what is
   left goes to the client as ``session/request_permission`` with the four
   option kinds, *before* the tool runs.  High risk is never allowed without
   the client (or ``--allow-high-risk``).  A permission that cannot be
   settled — an error reply, an unknown option, the turn cancelled — is
   denied, never allowed.
4. ``session/cancel``: the core is told (``cap.cancel``), the turn's open
   permission requests and reverse requests are resolved at once (the tool
   waiting on one fails, a late client answer is ignored), and the prompt
   response is ``cancelled`` when the core's turn ends, whatever it reports.
5. Tools go through the client only when it advertised the capability
   (``fs.readTextFile`` / ``fs.writeTextFile``, ``terminal``) and only while
   the session's turn runs (the releases of terminals excepted); otherwise
   the core's own tools run, confined to the workspace.
6. ``session/new`` and ``session/load`` need ``mcpServers`` (-32602 without,
   as the SDK agents) and an absolute ``cwd``.  A load replays the session's
   logged conversation as ``session/update``s, then answers, then the
   session takes prompts again (a fresh core, its config logged).
7. Bad input never raises: a malformed line is a -32700/-32600 reply (when
   JSON-RPC owes one) and a logged ``cap.error`` ``parse_failed``; an unknown
   method is -32601; bad params -32602; a response to nothing a Note.
8. stdin EOF: running turns are answered ``cancelled``, every core is
   stopped, ``Finish(0)``.  After that, nothing.

Transition table (per session; ``running`` = a prompt is unanswered)

=========  =======================================  ================================  =======
state      input                                    outputs                           next
=========  =======================================  ================================  =======
—          ``session/new``                          config logged, StartCore, result  idle
—          ``session/load`` (logged session)        ReadHistory → replay, result,     idle
                                                    StartCore
idle       ``session/prompt``                       inject logged + delivered         running
running    ``session/prompt``                       -32602                            running
running    core event                               its ``session/update`` (rule 1)   running
running    ``cap.permission.request``               decided, or request_permission    running
running    client's permission answer               ``cap.permission.response``       running
running    ``session/cancel``                       ``cap.cancel``; pending resolved  running
running    turn ended                               prompt response                   idle
idle       core event                               nothing shown (rule 1)            idle
any        ``session/close``                        running: response ``cancelled``;  closed
                                                    StopCore; ``{}``
any        stdin EOF                                running: ``cancelled``; StopCore  ended
=========  =======================================  ================================  =======
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
from msgspec import UNSET

from trio_cap.actors.bindings import jsonrpc as rpc
from trio_cap.actors.bindings.acp import agent_render as render
from trio_cap.actors.bindings.acp import frames as f
from trio_cap.actors.bindings.acp.agent_effects import (
    ClientError,
    Deliver,
    Effect,
    Finish,
    Note,
    ReadHistory,
    Record,
    Resolve,
    Send,
    StartCore,
    StopCore,
)
from trio_cap.actors.bindings.acp.agent_sessions import (
    ANSWER_KEY,
    MODES,
    OPTIONS,
    STOPS,
    AgentSettings,
    Session,
    Turn,
    Verdict,
    answered,
    decide,
    elicitation_params,
    prompt_text,
    question_params,
    turn_meta,
    yes_no,
    yes_no_answer,
)
from trio_cap.actors.bindings.acp.frames_lenient import decode_payload
from trio_cap.actors.bindings.base import DECIDED_BY, REFUSAL_MESSAGE
from trio_cap.actors.bindings.ndjson import LineFramer, Overlong
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    AskUser,
    AskUserAnswer,
    Cancel,
    CapError,
    ContentBlock,
    Event,
    PermissionRequest,
    PermissionResponse,
    SessionConfig,
    StopReason,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UserInputInject,
)

__all__ = ["MODES", "AcpAgentSide", "AgentSettings", "Effect"]

_CLEANUP = (f.TERMINAL_KILL, f.TERMINAL_RELEASE)


class _NeedsMcp(msgspec.Struct):
    """``mcpServers`` present, as both SDK agents require (frames give it a default)."""

    mcpServers: list[Any]


class AcpAgentSide:
    def __init__(self, settings: AgentSettings, *, new_session_id: Callable[[], str],
                 max_line: int = f.MAX_LINE) -> None:
        self.settings = settings
        self.new_session_id = new_session_id
        self.rpc = rpc.JsonRpc()
        self.client = f.ClientCapabilities()
        self.sessions: dict[str, Session] = {}
        self._framer = LineFramer(max_line)
        self._loading: dict[rpc.Id | None, f.LoadSessionParams] = {}
        self._ended = False

    # ---- stdin ----------------------------------------------
    def receive_data(self, data: bytes) -> list[Effect]:
        if self._ended:
            return []
        return self._pieces(self._framer.feed(data))

    def receive_eof(self) -> list[Effect]:
        """Rule 8: the client is gone; every running turn ends ``cancelled``."""
        if self._ended:
            return []
        out = self._pieces(self._framer.eof())
        for session in list(self.sessions.values()):
            out += self._close(session, "stdin closed")
        self._ended = True
        return [*out, Finish(0)]

    def _pieces(self, pieces: list[bytes | Overlong]) -> list[Effect]:
        out: list[Effect] = []
        for piece in pieces:
            if isinstance(piece, Overlong):
                out += self._bad(f"dropped an input line of {piece.size} bytes (longer than "
                                 f"{self._framer.max_line})", piece.head)
                continue
            for line in piece.split(b"\n"):
                if line.strip():
                    out += self._message(line)
        return out

    def _message(self, line: bytes) -> list[Effect]:
        msg = self.rpc.receive(line)
        match msg:
            case rpc.Request():
                return self._request(msg)
            case rpc.Notification():
                return self._notification(msg)
            case rpc.Response() | rpc.ErrorResponse():
                return self._response(msg)
            case rpc.StrayResponse():
                return [Note(f"ignored a response to no open request (id {msg.id!r})")]
            case rpc.Invalid():
                out = [Send(msg.reply + b"\n")] if msg.reply else []
                if msg.context is not None:
                    self._forget_ask(msg.context, msg.id)
                    out += self._resolved(msg.context, ClientError(rpc.INVALID_REQUEST,
                                                                   msg.detail))
                return out + self._bad(msg.detail, line)
        return []

    def _bad(self, detail: str, line: bytes) -> list[Effect]:
        error = CapError(code="parse_failed", message=f"bad ACP input: {detail}",
                         details={"line": line[:500].decode(errors="replace")})
        return [Record(None, (error,)), Note(error.message)]

    # ---- client → agent requests ----------------------------------------------
    def _request(self, req: rpc.Request) -> list[Effect]:
        params_type = f.AGENT_REQUESTS.get(req.method)
        if params_type is None or req.method == f.SESSION_RESUME:
            return [self._send(self.rpc.method_not_found(req))]
        try:
            params = decode_payload(bytes(req.params) if req.params else b"{}", params_type)
            if req.method in (f.SESSION_NEW, f.SESSION_LOAD):
                msgspec.json.decode(bytes(req.params or b"{}"), type=_NeedsMcp)
        except (rpc.PayloadError, msgspec.ValidationError, msgspec.DecodeError) as exc:
            return [self._send(self.rpc.invalid_params(req, str(exc)))]
        match params:
            case f.InitializeParams():
                return self._initialize(req, params)
            case f.AuthenticateParams():
                return [self._reply(req, f.Empty())]
            case f.NewSessionParams():
                return self._new(req, params)
            case f.LoadSessionParams():
                return self._load(req, params)
            case f.PromptParams():
                return self._prompt(req, params)
            case f.SetModeParams():
                return self._set_mode(req, params)
            case f.SessionIdParams() if req.method == f.SESSION_CLOSE:
                session = self.sessions.get(params.session_id)
                if session is None:
                    return [self._invalid(req, f"no session {params.session_id!r}")]
                return [*self._close(session, "session/close"), self._reply(req, f.Empty())]
        return [self._send(self.rpc.method_not_found(req))]

    def _initialize(self, req: rpc.Request, params: f.InitializeParams) -> list[Effect]:
        if isinstance(params.client_capabilities, f.ClientCapabilities):
            self.client = params.client_capabilities
        name = "cap-agent" if self.settings.bridged is None else \
            f"cap-agent --bridge {self.settings.bridged}"
        result = f.InitializeResult(
            protocol_version=f.PROTOCOL_VERSION,
            agent_capabilities=f.AgentCapabilities(
                load_session=True,
                prompt_capabilities=f.PromptCapabilities(embedded_context=True),
                mcp_capabilities=f.McpCapabilities(),
                session_capabilities={"close": {}}),
            auth_methods=(),
            agent_info=f.Implementation(name=name, title="trio-cap",
                                        version=self.settings.agent_version or "0"))
        return [self._reply(req, result)]

    def _absolute_cwd(self, req: rpc.Request, cwd: str) -> Effect | None:
        if not posixpath.isabs(cwd):
            return self._invalid(req, f"cwd must be an absolute path, not {cwd!r}")
        return None

    def _new(self, req: rpc.Request, params: f.NewSessionParams) -> list[Effect]:
        if (bad := self._absolute_cwd(req, params.cwd)) is not None:
            return [bad]
        session_id = self.new_session_id()
        session = self.sessions[session_id] = Session(session_id, params.cwd,
                                                       self.settings.mode)
        result = f.NewSessionResult(session_id=session_id, modes=self._modes(session))
        return [*self._start(session, None), self._reply(req, result)]

    def _start(self, session: Session, resumed: str | None) -> list[Effect]:
        s = self.settings
        config = SessionConfig(cwd=session.cwd, model=s.model, system_prompt=s.system_prompt,
                               max_turns=s.max_turns, budget_usd=s.budget_usd,
                               permission_mode="interactive", session_resume_id=resumed)
        return [Record(session.id, (config,)), StartCore(session.id, config, self.client)]

    def _modes(self, session: Session) -> f.SessionModeState:
        return f.SessionModeState(current_mode_id=session.mode, available_modes=tuple(
            f.SessionMode(id=mode, name=name, description=text)
            for mode, (name, text) in MODES.items()))

    def _load(self, req: rpc.Request, params: f.LoadSessionParams) -> list[Effect]:
        if (bad := self._absolute_cwd(req, params.cwd)) is not None:
            return [bad]
        live = self.sessions.get(params.session_id)
        if live is not None and live.turn is not None:
            return [self._invalid(req, f"session {params.session_id!r} is running a turn")]
        self._loading[req.id] = params
        return [ReadHistory(req.id, params.session_id, params.cwd)]

    def history(self, request_id: rpc.Id | None, envs: Sequence[Envelope]) -> list[Effect]:
        """The logged events of the session a ``session/load`` names: replay, then answer."""
        params = self._loading.pop(request_id, None)
        if params is None or self._ended:
            return []
        sid = params.session_id
        if not any(isinstance(e.event, SessionConfig) for e in envs):
            return [self._send(self.rpc.reply_error(
                request_id, f.RESOURCE_NOT_FOUND,
                f"no session {sid!r} in this agent's log (give cap agent --log FILE to keep "
                "sessions between runs)"))]
        calls: dict[str, render.CallView] = {}
        out: list[Effect] = []
        cwd = params.cwd
        for env in envs:
            if isinstance(env.event, SessionConfig):
                cwd = env.event.cwd
            shown = render.update(env.event, cwd, calls, replay=True)
            if shown is not None:
                out.append(self._update(sid, shown))
        session = self.sessions.get(sid)
        if session is None:
            session = self.sessions[sid] = Session(sid, params.cwd, self.settings.mode)
            out += self._start(session, sid)
        result = f.LoadSessionResult(modes=self._modes(session))
        return [*out, self._send(self.rpc.reply(request_id, result))]

    def _prompt(self, req: rpc.Request, params: f.PromptParams) -> list[Effect]:
        session = self.sessions.get(params.session_id)
        if session is None:
            return [self._invalid(req, f"no session {params.session_id!r}")]
        if session.turn is not None:
            return [self._invalid(req, f"session {session.id!r} is already running a prompt; "
                                       "wait for its response or send session/cancel")]
        text = prompt_text(params.prompt)
        session.turn = Turn(req.id)
        inject = UserInputInject(content=(ContentBlock(text=text),))
        return [Record(session.id, (inject,)), Deliver(session.id, (inject,))]

    def _set_mode(self, req: rpc.Request, params: f.SetModeParams) -> list[Effect]:
        session = self.sessions.get(params.session_id)
        if session is None:
            return [self._invalid(req, f"no session {params.session_id!r}")]
        if params.mode_id not in MODES:
            return [self._invalid(req, f"unknown mode {params.mode_id!r} (modes: "
                                       f"{', '.join(MODES)})")]
        session.mode = params.mode_id
        return [self._reply(req, f.Empty())]

    # ---- client → agent notifications ----------------------------------------------
    def _notification(self, msg: rpc.Notification) -> list[Effect]:
        if msg.method != f.SESSION_CANCEL:
            return []  # $/cancel_request (we answer fast), extensions, anything newer
        try:
            params = decode_payload(bytes(msg.params or b"{}"), f.SessionIdParams)
        except rpc.PayloadError as exc:
            return [Note(f"ignored a session/cancel with bad params: {exc}")]
        session = self.sessions.get(params.session_id)
        if session is None or session.turn is None or session.turn.cancelled:
            return []
        return self._cancel(session, session.turn, "session/cancel")

    def _cancel(self, session: Session, turn: Turn, reason: str) -> list[Effect]:
        """Rule 4: the core is told; what the turn waits on is resolved now."""
        turn.cancelled = True
        cancel = Cancel(scope="current_turn", reason=reason)
        out: list[Effect] = [Record(session.id, (cancel,)), Deliver(session.id, (cancel,))]
        return out + self._drop_asks(turn, "the turn was cancelled")

    def _drop_asks(self, turn: Turn, why: str) -> list[Effect]:
        """Our open requests of ``turn`` are given up on: a late answer becomes a stray, and a
        tool host waiting on one is told at once."""
        out: list[Effect] = []
        for request_id in sorted(turn.asks, key=str):
            entry = self.rpc.pending.get(request_id)
            self.rpc.forget(request_id)
            if entry is not None and entry[1][0] == "tool":
                out.append(Resolve(entry[1][2], ClientError(f.REQUEST_CANCELLED, why)))
        turn.asks.clear()
        return out

    def _close(self, session: Session, reason: str) -> list[Effect]:
        out: list[Effect] = []
        turn = session.turn
        if turn is not None:
            out += self._drop_asks(turn, reason)
            session.turn = None
            out.append(self._send(self.rpc.reply(turn.prompt_id,
                                                 f.PromptResult(stop_reason="cancelled"))))
        cancel = Cancel(scope="session", reason=reason)
        del self.sessions[session.id]
        return [*out, Record(session.id, (cancel,)), StopCore(session.id)]

    # ---- the cores' side ----------------------------------------------
    def core_events(self, session_id: str, events: Sequence[Event]) -> list[Effect]:
        """A core's events, already logged: shown while its turn runs (rule 1)."""
        session = self.sessions.get(session_id)
        if session is None or session.turn is None or self._ended:
            return []
        turn = session.turn
        out: list[Effect] = []
        for event in events:
            match event:
                case PermissionRequest() if turn.cancelled:  # nothing is asked once cancelled
                    out += self._decided(session, event.req_id, Verdict(
                        "deny", "the turn was cancelled", "client"))
                case AskUser() if turn.cancelled:
                    answer = AskUserAnswer(ask_id=event.ask_id, value=None)
                    out += [Record(session.id, (answer,)), Deliver(session.id, (answer,))]
                case PermissionRequest():
                    out += self._permission(session, turn, event)
                case AskUser():
                    out += self._ask(session, turn, event)
                case Usage():
                    turn.usage = event
                case CapError():
                    turn.errors.append(f"{event.code}: {event.message}")
                case _:
                    if isinstance(event, ToolCallStart):
                        turn.current = event.call_id
                    elif isinstance(event, ToolCallEnd) and turn.current == event.call_id:
                        turn.current = None
                    shown = render.update(event, session.cwd, turn.calls)
                    if shown is not None:
                        out.append(self._update(session.id, shown))
        return out

    def turn_ended(self, session_id: str, stop: StopReason) -> list[Effect]:
        """The core finished the turn: its prompt response, last (rule 1)."""
        session = self.sessions.get(session_id)
        if session is None or session.turn is None or self._ended:
            return []
        turn, session.turn = session.turn, None
        out = self._drop_asks(turn, "the turn ended")
        meta = turn_meta(turn)
        if turn.cancelled or stop != "error":
            result = f.PromptResult(stop_reason=STOPS.get(stop, "end_turn")
                                    if not turn.cancelled else "cancelled", meta=meta or UNSET)
            return [*out, self._send(self.rpc.reply(turn.prompt_id, result))]
        message = "; ".join(turn.errors) or "the turn failed"
        return [*out, self._send(self.rpc.reply_error(turn.prompt_id, rpc.INTERNAL_ERROR,
                                                      message, data=meta or UNSET))]

    def core_failed(self, session_id: str, message: str) -> list[Effect]:
        """The core cannot go on (a bridged agent died): the open turn fails, the session
        is gone (later prompts get -32602)."""
        session = self.sessions.get(session_id)
        if session is None or self._ended:
            return []
        out: list[Effect] = [Record(session_id, (CapError(code="internal_error",
                                                          message=message),)), Note(message)]
        turn, session.turn = session.turn, None
        if turn is not None:
            out += self._drop_asks(turn, message)
            out.append(self._send(self.rpc.reply_error(turn.prompt_id, rpc.INTERNAL_ERROR,
                                                       message)))
        del self.sessions[session_id]
        return [*out, StopCore(session_id)]

    # ---- permissions and asks ----------------------------------------------
    def _permission(self, session: Session, turn: Turn,
                    event: PermissionRequest) -> list[Effect]:
        verdict = decide(session, self.settings, event)
        if verdict.decision is not None:
            return self._decided(session, event.req_id, verdict)
        params = f.RequestPermissionParams(
            session_id=session.id, options=OPTIONS,
            tool_call=render.permission_call(turn.current or event.req_id, event, session.cwd,
                                             turn.calls.get(turn.current or "")),
            meta={"cap.risk_level": event.risk_level})
        request_id, data = self.rpc.request(f.REQUEST_PERMISSION, params,
                                            context=("permission", session.id, event.req_id,
                                                     event.tool, event.risk_level))
        turn.asks.add(request_id)
        return [Send(data + b"\n")]

    def _decided(self, session: Session, req_id: str, verdict: Verdict) -> list[Effect]:
        assert verdict.decision is not None
        meta = {DECIDED_BY: verdict.by, REFUSAL_MESSAGE: verdict.reason} \
            if verdict.decision == "deny" else \
            {DECIDED_BY: f"{verdict.by}: {verdict.reason}" if verdict.reason else verdict.by}
        response = PermissionResponse(req_id=req_id, decision=verdict.decision, meta=meta)
        return [Record(session.id, (response,)), Deliver(session.id, (response,))]

    def _ask(self, session: Session, turn: Turn, event: AskUser) -> list[Effect]:
        if "form" not in self.client.elicitation_modes() and yes_no(event.form) is not None:
            # a y/n question (a PTY agent's permission prompt): every client can answer that
            params = question_params(session.id, turn.current or event.ask_id, event.prompt)
            request_id, data = self.rpc.request(f.REQUEST_PERMISSION, params, context=(
                "yes_no", session.id, event.ask_id, yes_no(event.form)))
            turn.asks.add(request_id)
            return [Send(data + b"\n")]
        if "form" not in self.client.elicitation_modes():
            answer = AskUserAnswer(ask_id=event.ask_id, value=None,
                                   meta={DECIDED_BY: "the client has no form elicitation"})
            return [Record(session.id, (answer,)), Deliver(session.id, (answer,))]
        params = elicitation_params(session.id, turn.current, event)
        request_id, data = self.rpc.request(f.ELICITATION_CREATE, params,
                                            context=("ask", session.id, event.ask_id))
        turn.asks.add(request_id)
        return [Send(data + b"\n")]

    # ---- the tool hosts' reverse requests ----------------------------------------------
    def client_call(self, ticket: int, session_id: str, method: str,
                    params: Any) -> list[Effect]:
        """A tool host asks the client (``fs/*``, ``terminal/*``): sent while the session's turn
        runs (rule 5); the answer comes back as ``Resolve(ticket, …)``."""
        session = self.sessions.get(session_id)
        turn = session.turn if session is not None else None
        if self._ended or ((turn is None or turn.cancelled) and method not in _CLEANUP):
            return [Resolve(ticket, ClientError(f.REQUEST_CANCELLED,
                                                "the turn is over; nothing was sent"))]
        request_id, data = self.rpc.request(method, params,
                                            context=("tool", session_id, ticket, method))
        if turn is not None:
            turn.asks.add(request_id)
        return [Send(data + b"\n")]

    def file_changed(self, session_id: str, path: str, old: str | None,
                     new: str) -> list[Effect]:
        """A tool host wrote ``path``: the running call shows the real change as a diff."""
        return self._call_content(session_id, diff=f.Diff(path=path, new_text=new,
                                                          old_text=old))

    def terminal_started(self, session_id: str, terminal_id: str) -> list[Effect]:
        """A tool host's command runs in the client's terminal: the call embeds it."""
        return self._call_content(session_id, terminal=terminal_id)

    def _call_content(self, session_id: str, *, diff: f.Diff | None = None,
                      terminal: str | None = None) -> list[Effect]:
        session = self.sessions.get(session_id)
        turn = session.turn if session is not None else None
        if session is None or turn is None or turn.current is None:
            return []
        view = turn.calls.get(turn.current)
        if view is None:
            return []
        if diff is not None:
            view.diffs.append(diff)
        if terminal is not None:
            view.terminals.append(terminal)
        content: tuple[f.ToolCallContent, ...] = (
            *view.diffs, *(f.TerminalRef(terminal_id=t) for t in view.terminals))
        update = f.ToolCallUpdate(tool_call_id=turn.current, status="in_progress",
                                  content=content)
        return [self._update(session.id, update)]

    # ---- the client's answers ----------------------------------------------
    def _response(self, msg: rpc.Response | rpc.ErrorResponse) -> list[Effect]:
        context = msg.context
        if context is None:
            return [Note(f"ignored an error response with no id: {msg.error.message}")] \
                if isinstance(msg, rpc.ErrorResponse) else []
        self._forget_ask(context, msg.id)
        if isinstance(msg, rpc.ErrorResponse):
            value: Any = ClientError(msg.error.code, msg.error.message)
        else:
            try:
                value = decode_payload(bytes(msg.result), f.CLIENT_RESULTS[msg.method])
            except (rpc.PayloadError, KeyError) as exc:
                value = ClientError(rpc.INVALID_PARAMS, f"unreadable {msg.method} result: {exc}")
        return self._resolved(context, value)

    def _forget_ask(self, context: tuple[Any, ...], request_id: rpc.Id | None) -> None:
        session = self.sessions.get(context[1])
        if session is not None and session.turn is not None:
            session.turn.asks.discard(request_id)  # type: ignore[arg-type]

    def _resolved(self, context: tuple[Any, ...], value: Any) -> list[Effect]:
        kind = context[0]
        if kind == "tool":
            return [Resolve(context[2], value)]
        session = self.sessions.get(context[1])
        if session is None or session.turn is None:
            return [Note(f"ignored a late answer to a {kind} request")]
        if kind == "permission":
            return self._permission_answer(session, context, value)
        if kind == "yes_no":
            event = AskUserAnswer(ask_id=context[2], value=yes_no_answer(value, context[3]))
            return [Record(session.id, (event,)), Deliver(session.id, (event,))]
        return self._ask_answer(session, context, value)

    def _permission_answer(self, session: Session, context: tuple[Any, ...],
                           value: Any) -> list[Effect]:
        _, _, req_id, tool, risk = context
        return self._decided(session, req_id, answered(session, value, tool, risk))

    def _ask_answer(self, session: Session, context: tuple[Any, ...],
                    value: Any) -> list[Effect]:
        answer: Any = None
        if isinstance(value, f.ElicitationResult) and value.action == "accept" and \
                isinstance(value.content, dict):
            answer = value.content.get(ANSWER_KEY)
        event = AskUserAnswer(ask_id=context[2], value=answer)
        return [Record(session.id, (event,)), Deliver(session.id, (event,))]

    # ---- output ----------------------------------------------
    def _update(self, session_id: str, update: f.SessionUpdate) -> Send:
        notification = f.SessionNotification(session_id=session_id, update=update)
        return Send(self.rpc.notify(f.SESSION_UPDATE, notification) + b"\n")

    def _reply(self, req: rpc.Request, result: Any) -> Send:
        return self._send(self.rpc.reply(req.id, result))

    def _invalid(self, req: rpc.Request, detail: str) -> Send:
        return self._send(self.rpc.reply_error(req.id, rpc.INVALID_PARAMS, detail))

    @staticmethod
    def _send(data: bytes) -> Send:
        return Send(data + b"\n")
