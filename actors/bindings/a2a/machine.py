"""The A2A driver, sans-io: HTTP exchanges in (SSE data, bodies, ends), CAP events and requests out.

A :class:`~trio_cap.actors.bindings.base.FrameMachine` of the binding kit.  The
shell (``connector.py``) fetched the card and chose the interface and spelling
(``machine_card.py``); from then on it only carries out :class:`Post` and
:class:`CloseExchange` outputs with its HTTP client and feeds back what came of
each exchange (:class:`SseData`, :class:`Body`, :class:`HttpStatus`,
:class:`Ended`, :class:`Dropped`), tagged with the JSON-RPC id of the request
it belongs to.  Message ids come from ``new_id``; there is no clock (retry
delays are values in :class:`Post`), so a recorded run replays through it.

A CAP *turn* here is one user input and everything until the agent is done
with it: the A2A stream of the send, plus any follow-up streams (an answer to
a CAP ask, a resubscribe after a drop).  The A2A *task* outlives turns: a task
left ``input-required`` takes the next input as a follow-up (``taskId`` and
``contextId`` both set, ``a2a.md`` §4 quirk 3); a finished one makes the next
input a new task in the same ``contextId``.

Rules, agent → orchestrator (either spelling; states compared in the draft's names):

====  ==========================================  =========================================
rule  input                                       output
====  ==========================================  =========================================
D1    text part of an agent message (a direct      ``cap.text_chunk`` (message_id = the
      reply, a status message, a history entry)    messageId), once per messageId
D2    text part of an artifact update              ``cap.text_chunk`` (message_id = the
                                                   artifactId), or ``cap.tool_call.delta``
                                                   when the artifact is a tool call's
D3    artifact ``lastChunk`` (or the turn's end    ``cap.tool_call.end`` for a tool call's
      for one left open)                           artifact (``metadata["cap.call_id"]``
                                                   or the id of a started call), else
                                                   ``cap.artifact`` (text: size only, the
                                                   text is in D2's chunks; data/file:
                                                   content or uri)
D4    ``append`` artifact update                   its parts added to the artifact; not
                                                   ``append`` on a known id: replaced
D5    CAP data part (``frames.cap_kind``)          that CAP event (agent kinds only; a
                                                   bad one: ``cap.error`` parse_failed +
                                                   ``agent.raw``)
D6    other data / file parts of a message         ``agent.raw`` ``a2a_data_part`` (kept)
D7    ``input-required`` after a CAP ask or        nothing more: the turn waits for the
      permission request                           answer (sent as a follow-up)
D8    ``input-required`` without one               the turn ends (``end_turn``); the task
                                                   takes the next input
D9    ``auth-required``                            ``cap.error`` auth_error; turn ends
                                                   (``error``)
D10   ``completed`` / ``canceled``                 turn ends ``end_turn`` / ``cancelled``
D11   ``failed`` / ``rejected``                    ``cap.error`` agent_error (unless the
                                                   agent sent a CAP error); turn ends
                                                   ``error``
D12   a direct Message with no taskId              turn ends ``end_turn``
D13   Task snapshot (first event, resubscribe,     only what was not seen: agent messages
      GetTask)                                     by messageId, artifact parts past the
                                                   count already taken; then its state
D14   the turn's stream ends cleanly, no end yet   turn ends ``end_turn`` (0.3's ``final``
                                                   is not trusted either way)
D15   the turn's stream drops (transport error)    ``agent.raw`` a2a_stream_dropped and a
      with the task id known                       resubscribe (up to ``max_resubscribes``,
                                                   delays 0.5/1/2 s; ``Last-Event-ID`` =
                                                   the last SSE id taken); then D13
D16   resubscribe refused (-32004: task is         ``GetTask`` / ``tasks/get``: D13 on the
      terminal)                                    final snapshot
D17   JSON-RPC error -32601/-32009 to the first    the same message again in the other
      send, card offers the other spelling         spelling (``agent.raw``
                                                   a2a_spelling_fallback)
D18   any other JSON-RPC error                     ``cap.error`` a2a_rpc_error; a turn's
                                                   request: turn ends ``error``
D19   HTTP 401/403                                 ``cap.error`` auth_error; turn ends
D20   other HTTP status, connection failure,       ``cap.error`` a2a_http_error /
      timeout, drop with no task id or retries     a2a_unreachable / a2a_timeout /
      spent                                        a2a_stream_lost; turn ends ``error``
D21   SSE data that is not the spelling's frame    ``cap.error`` parse_failed and
                                                   ``agent.raw`` with the text; the stream
                                                   goes on
D22   a response for another id, a result with     ``agent.raw`` (a2a_stray_response,
      no member set, an unknown state              a2a_empty_result, a2a_unknown_state)
====  ==========================================  =========================================

Rules, orchestrator → agent (``send``):

====  ==========================================  =========================================
H1    ``cap.session.config``                       ``cap.session.ready`` (the card was the
                                                   handshake); kept for the first message
H2    ``cap.user_input.inject``, no turn open      a streaming send (``message/stream`` /
                                                   ``SendStreamingMessage``): a new task in
                                                   the context, or the follow-up of one
                                                   waiting for input
H3    ``cap.ask_user.answer`` /                    a follow-up streaming send on the task,
      ``cap.permission.response`` to a pending     a CAP data part carrying the answer
      CAP ask
H4    ``cap.cancel`` while a turn is open          ``tasks/cancel`` / ``CancelTask`` (held
                                                   until the task id is known)
H5    an inject while a turn is open, an answer    ``cap.error`` invalid_state /
      to nothing                                   unknown_ask; nothing is sent
H6    the first inject of a resumed session       ``tasks/resubscribe`` / ``SubscribeToTask``
      whose recorded task was active               on it (the input is not sent again; the
      (``machine_resume.py``)                      snapshot gives what was not taken)
====  ==========================================  =========================================

Exchange states: a request id is *live* from its :class:`Post` until its
:class:`Ended` / :class:`Dropped` / :class:`HttpStatus`, or until the machine
closes it (:class:`CloseExchange`); input for an id that is not live is ignored.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.actors.bindings.a2a.machine_artifacts import ArtifactRules
from trio_cap.actors.bindings.a2a.machine_card import Choice
from trio_cap.actors.bindings.a2a.machine_failures import FailureRules
from trio_cap.actors.bindings.a2a.machine_hot import HotPath
from trio_cap.actors.bindings.a2a.machine_io import (
    CANCEL,
    GET,
    RESUBSCRIBE,
    SEND,
    ArtifactState,
    Body,
    CloseExchange,
    Dropped,
    Ended,
    Exchange,
    HttpStatus,
    Incoming,
    Post,
    SseBatch,
    SseData,
)
from trio_cap.actors.bindings.a2a.machine_parts import (
    DATA,
    FILE,
    TEXT,
    cap_event,
    capped,
    is_agent,
    json_text,
    part_cap_kind,
    part_view,
    raw,
)
from trio_cap.actors.bindings.a2a.machine_resume import ResumeRules
from trio_cap.actors.bindings.base import AGENT_RISK, Output, TurnEnded
from trio_cap.actors.bindings.jsonrpc import JsonRpc
from trio_cap.events.kinds import (
    AskUser,
    AskUserAnswer,
    Cancel,
    CapError,
    CapSessionReady,
    Event,
    PermissionRequest,
    PermissionResponse,
    SessionConfig,
    StopReason,
    TextChunk,
    ToolCallEnd,
    ToolCallStart,
    UserInputInject,
)

__all__ = ["A2aDriver", "Body", "CloseExchange", "Dropped", "Ended", "HttpStatus", "Incoming",
           "Post", "SseBatch", "SseData"]

_STOP = {"completed": "end_turn", "canceled": "cancelled", "failed": "error",
         "rejected": "error"}


class A2aDriver(HotPath, ArtifactRules, FailureRules, ResumeRules):
    """One CAP session over one A2A context; see the module rules."""

    def __init__(self, choice: Choice, *, new_id: Callable[[], str],
                 metadata: dict[str, Any] | None = None, max_resubscribes: int = 3,
                 first_id: int = 1, fast: bool = True) -> None:
        self.fast = fast
        self.spelling: f.Spelling = choice.spelling
        self.url = choice.url
        self.tenant = choice.tenant
        self.other = choice.other
        self.other_url = choice.other_url
        self.cap_peer = choice.cap_extension
        self.new_id = new_id
        self.metadata = dict(metadata or {})
        self.max_resubscribes = max_resubscribes
        self.rpc = JsonRpc(first_id=first_id)
        self.config: SessionConfig | None = None
        self.context_id: str | None = None
        self.task_id: str | None = None
        self.state: str | None = None
        """The task's last state, draft spelling."""
        self.turn_open = False
        self.stream_id: int | None = None
        self.live: dict[int, Exchange] = {}
        self.asks: dict[str, str] = {}
        """Pending CAP asks/permission requests: id → kind."""
        self.calls: set[str] = set()
        self.seen: set[str] = set()
        self.artifacts: dict[str, ArtifactState] = {}
        self.cancel_wanted = False
        self.resubscribes = 0
        self.last_event_id: str | None = None
        """The SSE id of the last event taken for the current task (D15's Last-Event-ID)."""
        self.turn_text: list[str] = []
        """The agent-message text this turn streamed (to spot an artifact repeating it)."""
        self._pinned = {}
        self.sent_messages = 0
        self.closed = False
        self.reattach = False

    # ---- orchestrator → agent --------------------------------------------------------------

    def send(self, frames: Sequence[Event]) -> list[Output]:
        out: list[Output] = []
        for frame in frames:
            out += self._send_one(frame)
        return out

    def _send_one(self, frame: Event) -> list[Output]:
        if self.closed:
            return []
        kind = type(frame)
        if kind is SessionConfig:
            self.config = frame  # type: ignore[assignment]
            self._resume_from(frame)  # type: ignore[arg-type]
            return [CapSessionReady()]
        if kind is UserInputInject:
            if self.turn_open:
                return [CapError(code="invalid_state", message="an A2A turn is still running; "
                                 "input is sent when it ends")]
            self._begin_turn()
            if self.reattach:  # H6: the re-run input is the recorded task's, still running
                self.reattach = False
                return [self._task_request(RESUBSCRIBE)]
            task = self.task_id if self.state in ("input-required", "auth-required") else None
            if task is None:  # a new task in the same context: its id comes with its events
                self.task_id = self.state = None
            return self._post_message(frame.text, (), task)  # type: ignore[attr-defined]
        if kind is AskUserAnswer or kind is PermissionResponse:
            ref = frame.ask_id if kind is AskUserAnswer else frame.req_id  # type: ignore[attr-defined]
            if self.asks.pop(ref, None) is None or self.task_id is None:
                return [CapError(code="unknown_ask", message=f"no A2A ask or permission request "
                                 f"{ref!r} is waiting for an answer")]
            if kind is AskUserAnswer:
                body: dict[str, Any] = {"kind": "cap.ask_user.answer", "ask_id": ref,
                                        "value": frame.value}  # type: ignore[attr-defined]
            else:
                body = {"kind": "cap.permission.response", "req_id": ref,
                        "decision": frame.decision}  # type: ignore[attr-defined]
            if frame.meta:
                body["_meta"] = frame.meta
            self.turn_open = True
            return self._post_message(None, (body,), self.task_id)
        if kind is Cancel:
            return self._cancel(session=frame.scope == "session")  # type: ignore[attr-defined]
        return []

    def _begin_turn(self) -> None:
        self.turn_text = []
        self.turn_open = True
        self.cancel_wanted = False
        self.resubscribes = 0

    def _message(self, spelling: f.Spelling, text: str | None, data: tuple[dict[str, Any], ...],
                 task_id: str | None) -> Any:
        meta = dict(self.metadata)
        if self.cap_peer and self.sent_messages == 0 and self.config is not None:
            meta["cap.session.config"] = _config_wire(self.config)
        mid = self.new_id()
        if spelling == f.CURRENT:
            parts = [f.v1.Part(text=text)] if text is not None else []
            parts += [f.v1.Part(data=d, metadata=f.cap_part_metadata(d["kind"]),
                                media_type="application/json") for d in data]
            msg = f.v1.Message(message_id=mid, role=f.v1.ROLE_USER, parts=tuple(parts),
                               context_id=self.context_id or "", task_id=task_id or "",
                               metadata=meta or None)
            return f.v1.SendMessageRequest(message=msg, tenant=self.tenant)
        dparts: list[Any] = [f.v03.TextPart(text=text)] if text is not None else []
        dparts += [f.v03.DataPart(data=d, metadata=f.cap_part_metadata(d["kind"])) for d in data]
        dmsg = f.v03.Message(message_id=mid, role="user", parts=tuple(dparts),
                             context_id=self.context_id, task_id=task_id, metadata=meta or None)
        return f.v03.MessageSendParams(message=dmsg)

    def _post_message(self, text: str | None, data: tuple[dict[str, Any], ...],
                      task_id: str | None, spelling: f.Spelling | None = None) -> list[Output]:
        spelling = spelling or self.spelling
        params = self._message(spelling, text, data, task_id)
        self.sent_messages += 1
        ex = Exchange(SEND, spelling, turn=True, resend=(text, data, task_id))
        post = self._post(f.METHODS[spelling].stream, params, ex, streaming=True)
        self.stream_id = post.request_id
        return [post]

    def _post(self, method: str, params: Any, ex: Exchange, *, streaming: bool,
              delay: float = 0.0) -> Post:
        rid, body = self.rpc.request(method, params, context=ex.purpose, streaming=streaming)
        self.live[rid] = ex
        url = self.url if ex.spelling == self.spelling else (self.other_url or self.url)
        return Post(rid, method, body, url, ex.spelling, streaming, delay)

    def _task_params(self, kind: str) -> Any:
        assert self.task_id is not None
        if self.spelling == f.CURRENT:
            if kind == CANCEL:
                return f.v1.CancelTaskRequest(id=self.task_id, tenant=self.tenant)
            if kind == GET:
                return f.v1.GetTaskRequest(id=self.task_id, tenant=self.tenant)
            return f.v1.SubscribeToTaskRequest(id=self.task_id, tenant=self.tenant)
        if kind == GET:
            return f.v03.TaskQueryParams(id=self.task_id)
        return f.v03.TaskIdParams(id=self.task_id)

    def _task_request(self, kind: str, *, delay: float = 0.0) -> Post:
        methods = f.METHODS[self.spelling]
        method = {CANCEL: methods.cancel, GET: methods.get, RESUBSCRIBE: methods.resubscribe}[kind]
        ex = Exchange(kind, self.spelling, turn=kind != CANCEL)
        post = self._post(method, self._task_params(kind), ex, streaming=kind == RESUBSCRIBE,
                          delay=delay)
        if kind == RESUBSCRIBE and self.last_event_id is not None:
            post = Post(post.request_id, post.method, post.body, post.url, post.spelling,
                        post.streaming, post.delay, self.last_event_id)
        if kind != CANCEL:
            self.stream_id = post.request_id
        return post

    def _cancel(self, *, session: bool) -> list[Output]:
        out: list[Output] = []
        if self.turn_open and self.task_id is None:
            self.cancel_wanted = True  # sent as soon as an event names the task
        elif self.turn_open:
            out.append(self._task_request(CANCEL))
            if self.stream_id not in self.live:  # waiting on an answer: no stream to end it
                self.asks.clear()
                self._end_turn("cancelled", out)
        if session:
            out += self.close()
        return out

    def close(self) -> list[Output]:
        """The session ends: stop every exchange; a cancel already posted still goes out."""
        self.closed = True
        out: list[Output] = [CloseExchange(rid) for rid, ex in self.live.items()
                             if ex.purpose != CANCEL]
        for item in out:
            self._forget(item.request_id)  # type: ignore[union-attr]
        return out

    # ---- agent → orchestrator ----------------------------------------------------------------

    def receive_frame(self, frame: object) -> list[Output]:
        if self.closed:  # the session is over: a late answer (the last cancel's) says nothing
            rid = getattr(frame, "request_id", None)
            if rid is not None:
                self._forget(rid)
            return []
        kind = type(frame)
        if kind is SseBatch:
            live = frame.request_id in self.live  # type: ignore[attr-defined]
            out = self._events(frame.request_id, frame.datas)  # type: ignore[attr-defined]
            if live and frame.last_event_id is not None:  # type: ignore[attr-defined]
                self.last_event_id = frame.last_event_id  # type: ignore[attr-defined]
            return out
        if kind is SseData:
            return self._data(frame)  # type: ignore[arg-type]
        if kind is Ended:
            return self._ended(frame.request_id)  # type: ignore[attr-defined]
        if kind is Body:
            ex = self.live.get(frame.request_id)  # type: ignore[attr-defined]
            if ex is None:
                return []
            if ex.purpose in (CANCEL, GET):
                return self._reply(frame, ex)  # type: ignore[arg-type]
            out = self._data(SseData(frame.request_id, frame.data))  # type: ignore[attr-defined]
            return out + self._ended(frame.request_id)  # type: ignore[attr-defined]
        if kind is HttpStatus:
            return self._http_status(frame)  # type: ignore[arg-type]
        if kind is Dropped:
            return self._dropped(frame)  # type: ignore[arg-type]
        return [raw("a2a_unknown_input", repr(frame))]

    def _data(self, frame: SseData) -> list[Output]:
        return self._events(frame.request_id, [frame.data])

    def _one(self, rid: int, ex: Exchange, data: bytes, env: Any, out: list[Output]) -> None:
        if type(env) is f.FrameError:
            text = data.decode("utf-8", "replace")
            kept, _ = capped(text)
            out += [CapError(code="parse_failed", message=str(env), details={"data": kept}),
                    raw("a2a_malformed_sse_data", text)]
            return
        if env.error is not None:
            out += self._rpc_error(rid, ex, env.error)
            return
        if env.id != rid:
            out.append(raw("a2a_stray_response", data.decode("utf-8", "replace")))
            return
        result = env.result
        if result is None:
            out.append(raw("a2a_empty_result", data.decode("utf-8", "replace")))
            return
        ex.got_event = True
        self._read(result, ex, data, out, rid)

    def _read(self, result: Any, ex: Exchange, data: bytes, out: list[Output],
              rid: int) -> None:
        if ex.spelling == f.CURRENT:
            if result.artifact_update is not None:  # type: ignore[union-attr]
                self._artifact_update(result.artifact_update, out)  # type: ignore[union-attr]
            elif result.status_update is not None:  # type: ignore[union-attr]
                u = result.status_update  # type: ignore[union-attr]
                self._learn(u.task_id, u.context_id)
                self._status(u.status, rid, out)
            elif result.task is not None:  # type: ignore[union-attr]
                self._snapshot(result.task, rid, out)  # type: ignore[union-attr]
            elif result.message is not None:  # type: ignore[union-attr]
                self._direct(result.message, rid, out)  # type: ignore[union-attr]
            else:
                out.append(raw("a2a_empty_result", data.decode("utf-8", "replace")))
            return
        rtype = type(result)
        if rtype is f.v03.TaskArtifactUpdateEvent:
            self._artifact_update(result, out)
        elif rtype is f.v03.TaskStatusUpdateEvent:
            self._learn(result.task_id, result.context_id)  # type: ignore[union-attr]
            self._status(result.status, rid, out)  # type: ignore[union-attr]
        elif rtype is f.v03.Task:
            self._snapshot(result, rid, out)
        else:
            self._direct(result, rid, out)

    def _learn(self, task_id: str, context_id: str | None) -> None:
        if context_id:
            self.context_id = context_id
        if task_id and task_id != self.task_id:
            if self.task_id is not None:  # a new task: the last one's ids cannot come back
                self.seen.clear()
                self.artifacts = {k: v for k, v in self.artifacts.items() if not v.closed}
            self.task_id = task_id
            self.state = None
            self.last_event_id = None

    # -- messages and parts --

    def _agent_message(self, msg: Any, out: list[Output]) -> bool:
        """D1/D5/D6 for one message, once per messageId; True if it raised a CAP ask."""
        if msg is None or not is_agent(msg.role) or msg.message_id in self.seen:
            return False
        self.seen.add(msg.message_id)
        asked = False
        for part in msg.parts:
            kind, value = part_view(part)
            if kind == TEXT:
                if value:
                    self.turn_text.append(value)
                    out.append(TextChunk(message_id=msg.message_id, text=value))
            elif kind == DATA:
                cap = part_cap_kind(part, value)
                if cap is None:
                    out.append(raw("a2a_data_part", json_text(value)))
                else:
                    asked |= self._cap_part(cap, value, out)
            elif kind == FILE:
                out.append(raw("a2a_file_part", json_text(list(value))))
        return asked

    def _cap_part(self, cap: str, value: Any, out: list[Output]) -> bool:
        asked = False
        for event in cap_event(cap, value):
            etype = type(event)
            if etype is AskUser:
                self.asks[event.ask_id] = cap  # type: ignore[attr-defined]
                asked = True
            elif etype is PermissionRequest:
                self.asks[event.req_id] = cap  # type: ignore[attr-defined]
                meta = dict(event.meta or {})
                meta.setdefault(AGENT_RISK, event.risk_level)  # type: ignore[attr-defined]
                event = _with_meta(event, meta)
                asked = True
            elif etype is ToolCallStart:
                self.calls.add(event.call_id)  # type: ignore[attr-defined]
            elif etype is ToolCallEnd:
                self.calls.discard(event.call_id)  # type: ignore[attr-defined]
            out.append(event)
        return asked

    def _direct(self, msg: Any, rid: int, out: list[Output]) -> None:
        """D12: a direct reply; it ends the turn unless it belongs to a task."""
        if msg.context_id:
            self.context_id = msg.context_id
        self._agent_message(msg, out)
        if not msg.task_id and rid == self.stream_id:
            self._end_turn("end_turn", out)

    # -- status and snapshots --

    def _snapshot(self, task: Any, rid: int, out: list[Output]) -> None:
        """D13: a whole task; only what has not been taken yet is new."""
        self._learn(task.id, task.context_id)
        for msg in task.history or ():
            self._agent_message(msg, out)
        for art in task.artifacts or ():
            state = self.artifacts.get(art.artifact_id)
            if state is None:
                state = self._new_artifact(art)
                state.parts = ()
            if len(art.parts) > state.count:
                self._artifact_parts(art.artifact_id, state, art.parts[state.count:], out)
        self._status(task.status, rid, out)

    def _status(self, status: Any, rid: int, out: list[Output]) -> None:
        asked = self._agent_message(status.message, out)
        state = f.draft_state(status.state)
        self.state = state
        cls = f.state_class(state)
        if cls == "active":
            return
        if cls == "unknown":
            out.append(raw("a2a_unknown_state", status.state))
            return
        if not self.turn_open:
            return
        if state == "input-required":
            if not (asked or self.asks):
                self._end_turn("end_turn", out)  # D8
            return  # D7
        if state == "auth-required":
            out.append(CapError(code="auth_error", message="the A2A agent needs authentication "
                                "(task state auth-required)" + _said(status.message)))
            self._end_turn("error", out)
            return
        stop: StopReason = _STOP[state]  # type: ignore[assignment]
        if stop == "error" and not any(type(e) is CapError for e in out):
            out.append(CapError(code="agent_error",
                                message=f"the A2A task {state}" + _said(status.message)))
        self._end_turn(stop, out)

    def _end_turn(self, stop: StopReason, out: list[Output]) -> None:
        if not self.turn_open:
            return
        for aid, state in self.artifacts.items():
            if not state.closed and state.count:
                self._close_artifact(aid, state, out)
        self.turn_open = False
        self.cancel_wanted = False
        for rid, ex in list(self.live.items()):
            if ex.turn:
                self._forget(rid)
                out.append(CloseExchange(rid))
        self.stream_id = None
        out.append(TurnEnded(stop))

    # -- ends and failures --

    def _forget(self, rid: int) -> Exchange | None:
        self.rpc.forget(rid)
        return self.live.pop(rid, None)


def _said(message: Any) -> str:
    if message is None:
        return ""
    texts = [v for k, v in map(part_view, message.parts) if k == TEXT and v]
    return (": " + capped(" ".join(texts))[0]) if texts else ""


def _with_meta(event: Event, meta: dict[str, Any]) -> Event:
    return msgspec.structs.replace(event, meta=meta)


def _config_wire(config: SessionConfig) -> dict[str, Any]:
    return msgspec.to_builtins(config)
