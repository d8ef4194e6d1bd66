"""The publisher's wire: requests in either spelling → neutral values, updates → bytes.

Pure functions around :mod:`.frames`' Structs (the same ones the driver
decodes), so the machine in :mod:`.publisher` never sees a spelling.

Rules (choices marked *):

* W1 The spelling of a call is its method name (slash names are the draft,
  PascalCase names v1; the two sets are disjoint).  *``A2A-Version``, when
  present, must name a version this server offers whose major matches the
  method's (``0.x`` with slash names, ``1.x`` with PascalCase ones), else
  -32009; a missing header is accepted for both (a2a-sdk refuses PascalCase
  without it; a missing header cannot widen anything here).
* W2 Every answer is in the spelling of its request, errors included: v1 error
  ``data`` is a list with one ``google.rpc.ErrorInfo`` (``reason``, domain
  ``a2a-protocol.org``), the draft's a string.  An error before the method is
  known follows the header (``1.x`` → v1, else the draft).
* W3 A caller's message: text parts are joined with newlines into the input;
  data parts are kept (their CAP kind read by ``frames.cap_kind``) for
  answers (P4); file parts are refused (-32005) rather than dropped; an
  ``agent`` role is refused (-32602).
* W4 One update is encoded once per spelling (``Update.rendered``) and framed per
  subscriber: ``{"jsonrpc":"2.0","id":ID,"result":…}`` in one SSE ``data:``
  line, with ``id: N`` (the update's number in its task) so ``Last-Event-ID`` works.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from trio_cap.actors.bindings import jsonrpc
from trio_cap.actors.bindings.a2a import frames
from trio_cap.actors.bindings.a2a.frames import (
    CAP_EXTENSION,
    CURRENT,
    DRAFT,
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    Spelling,
    cap_kind,
    v03,
    v1,
    v1_state,
)
from trio_cap.actors.bindings.a2a.publisher import (
    INVALID_PARAMS,
    A2aArtifact,
    Inbound,
    Message,
    Part,
    RpcFault,
    Status,
    Task,
    TextPart,
    Update,
)

Op = Literal["send", "stream", "get", "cancel", "subscribe", "push", "extended_card",
             "list"]

VERSION_NOT_SUPPORTED = -32009
CONTENT_TYPE_NOT_SUPPORTED = -32005
PUSH_NOT_SUPPORTED = -32003
EXTENDED_CARD_NOT_CONFIGURED = -32007

_OPS: dict[str, tuple[Op, Spelling]] = {}
for _spelling, _methods in frames.METHODS.items():
    for _op in ("send", "stream", "get", "cancel", "resubscribe"):
        _OPS[getattr(_methods, _op)] = ("subscribe" if _op == "resubscribe" else _op,
                                        _spelling)  # type: ignore[assignment]
for _name in ("set", "get", "list", "delete"):
    _OPS[f"tasks/pushNotificationConfig/{_name}"] = ("push", DRAFT)
for _name in ("Create", "Get", "Delete"):
    _OPS[f"{_name}TaskPushNotificationConfig"] = ("push", CURRENT)
_OPS["ListTaskPushNotificationConfigs"] = ("push", CURRENT)
_OPS["agent/getAuthenticatedExtendedCard"] = ("extended_card", DRAFT)
_OPS["agent/authenticatedExtendedCard"] = ("extended_card", DRAFT)
_OPS["GetExtendedAgentCard"] = ("extended_card", CURRENT)
_OPS["ListTasks"] = ("list", CURRENT)

_encoder = msgspec.json.Encoder()
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def header_spelling(version: str | None) -> Spelling:
    """The spelling an error gets when the method could not be read (W2)."""
    return CURRENT if version and version.strip().startswith("1") else DRAFT


def classify(method: str, version: str | None,
             offered: tuple[Spelling, ...]) -> tuple[Op, Spelling] | RpcFault:
    """W1: which operation, in which spelling, or why not."""
    found = _OPS.get(method)
    if found is None or found[1] not in offered:
        return RpcFault(jsonrpc.METHOD_NOT_FOUND, f"method {method!r} is not served here "
                        f"(spellings offered: {', '.join(offered)})", "METHOD_NOT_FOUND")
    op, spelling = found
    if version is not None and version.strip():
        major = version.strip().split(".", 1)[0]
        if major != spelling.split(".", 1)[0] or not any(
                s.split(".", 1)[0] == major for s in offered):
            return RpcFault(VERSION_NOT_SUPPORTED, f"A2A version {version.strip()!r} does not "
                            f"match {method!r} (a {spelling} method); this server offers "
                            f"{', '.join(offered)}", "VERSION_NOT_SUPPORTED")
    return op, spelling


# ---- requests -----------------------------------------------------------------------------


class SendOptions(msgspec.Struct, frozen=True):
    message: Inbound
    blocking: bool = True
    history_length: int | None = None
    include_raw: bool = False


def _params(request: jsonrpc.Request, type_: type) -> Any:
    try:
        return jsonrpc.decode_params(request, type_)
    except jsonrpc.PayloadError as exc:
        raise _Refused(RpcFault(INVALID_PARAMS, f"invalid params: {exc}")) from None


class _Refused(Exception):
    def __init__(self, fault: RpcFault) -> None:
        self.fault = fault


def _include_raw(*metadata: dict[str, Any] | None) -> bool:
    for meta in metadata:
        if isinstance(meta, dict):
            cap = meta.get("cap")
            if meta.get("cap.include_raw") is True or (
                    isinstance(cap, dict) and cap.get("include_raw") is True):
                return True
    return False


def send_options(spelling: Spelling, request: jsonrpc.Request) -> SendOptions | RpcFault:
    """W3: ``message/send``/``SendMessage`` params (and their streaming twins)."""
    try:
        if spelling == DRAFT:
            p3: v03.MessageSendParams = _params(request, v03.MessageSendParams)
            m3 = p3.message
            texts, data = _draft_parts(m3.parts)
            conf3 = p3.configuration
            blocking = conf3.blocking if conf3 and conf3.blocking is not None else True
            return SendOptions(
                Inbound(m3.message_id, "\n".join(texts), tuple(data), m3.task_id or None,
                        m3.context_id or None) if _user(m3.role) else _refuse_role(m3.role),
                blocking=blocking, history_length=conf3.history_length if conf3 else None,
                include_raw=_include_raw(p3.metadata, m3.metadata))
        p1: v1.SendMessageRequest = _params(request, v1.SendMessageRequest)
        m1 = p1.message
        texts, data = _v1_parts(m1.parts)
        conf1 = p1.configuration
        return SendOptions(
            Inbound(m1.message_id, "\n".join(texts), tuple(data), m1.task_id or None,
                    m1.context_id or None) if _user(m1.role) else _refuse_role(m1.role),
            blocking=not (conf1 and conf1.return_immediately),
            history_length=conf1.history_length if conf1 else None,
            include_raw=_include_raw(p1.metadata, m1.metadata))
    except _Refused as refused:
        return refused.fault


def _user(role: str) -> bool:
    return role in ("user", "ROLE_USER")


def _refuse_role(role: str) -> Inbound:
    raise _Refused(RpcFault(INVALID_PARAMS, f"a caller's message has role user, not {role!r}"))


def _file_refused() -> RpcFault:
    return RpcFault(CONTENT_TYPE_NOT_SUPPORTED, "file parts are not supported: send the "
                    "content as text", "CONTENT_TYPE_NOT_SUPPORTED")


def _draft_parts(parts: tuple[v03.AnyPart, ...]
                 ) -> tuple[list[str], list[tuple[dict[str, Any], str | None]]]:
    texts: list[str] = []
    data: list[tuple[dict[str, Any], str | None]] = []
    for part in parts:
        if isinstance(part, v03.TextPart):
            texts.append(part.text)
        elif isinstance(part, v03.DataPart):
            data.append((part.data, cap_kind(part.data, part.metadata, part.meta)))
        else:
            raise _Refused(_file_refused())
    return texts, data


def _v1_parts(parts: tuple[v1.Part, ...]
              ) -> tuple[list[str], list[tuple[dict[str, Any], str | None]]]:
    texts: list[str] = []
    data: list[tuple[dict[str, Any], str | None]] = []
    for part in parts:
        if part.text is not None:
            texts.append(part.text)
        elif part.data is not msgspec.UNSET:
            value = part.data if isinstance(part.data, dict) else {"value": part.data}
            data.append((value, cap_kind(value, part.metadata, part.meta)))
        elif part.raw is not None or part.url is not None:
            raise _Refused(_file_refused())
    return texts, data


class TaskQuery(msgspec.Struct, frozen=True):
    id: str
    history_length: int | None = None


def task_query(spelling: Spelling, request: jsonrpc.Request) -> TaskQuery | RpcFault:
    """``tasks/get``, ``tasks/cancel``, ``tasks/resubscribe`` and their v1 names."""
    type_ = (v03.TaskQueryParams if request.method == "tasks/get" else v03.TaskIdParams) \
        if spelling == DRAFT else (v1.GetTaskRequest if request.method == "GetTask"
                                   else v1.CancelTaskRequest)
    try:
        params = _params(request, type_)
    except _Refused as refused:
        return refused.fault
    return TaskQuery(params.id, getattr(params, "history_length", None))


# ---- responses ----------------------------------------------------------------------------


def _part3(part: Part) -> v03.AnyPart:
    if isinstance(part, TextPart):
        return v03.TextPart(text=part.text)
    return v03.DataPart(data=part.data, metadata=part.metadata)


def _part1(part: Part) -> v1.Part:
    if isinstance(part, TextPart):
        return v1.Part(text=part.text)
    return v1.Part(data=part.data, metadata=part.metadata, media_type="application/json")


def _message3(m: Message) -> v03.Message:
    return v03.Message(message_id=m.message_id, role=m.role,
                       parts=tuple(_part3(p) for p in m.parts),
                       context_id=m.context_id, task_id=m.task_id)


def _message1(m: Message) -> v1.Message:
    return v1.Message(message_id=m.message_id, role="ROLE_USER" if m.role == "user"
                      else "ROLE_AGENT", parts=tuple(_part1(p) for p in m.parts),
                      context_id=m.context_id, task_id=m.task_id)


def _status3(s: Status) -> v03.TaskStatus:
    return v03.TaskStatus(state=s.state, timestamp=s.timestamp,
                          message=_message3(s.message) if s.message else None)


def _status1(s: Status) -> v1.TaskStatus:
    return v1.TaskStatus(state=v1_state(s.state), timestamp=s.timestamp,
                         message=_message1(s.message) if s.message else None)


def _artifact3(a: A2aArtifact) -> v03.Artifact:
    return v03.Artifact(artifact_id=a.artifact_id, name=a.name, description=a.description,
                        parts=tuple(_part3(p) for p in a.parts), metadata=a.metadata)


def _artifact1(a: A2aArtifact) -> v1.Artifact:
    return v1.Artifact(artifact_id=a.artifact_id, name=a.name, description=a.description or "",
                       parts=tuple(_part1(p) for p in a.parts), metadata=a.metadata)


def _history(task: Task, history_length: int | None) -> list[Message]:
    history = task.history
    if history_length is None:
        return history
    return history[-history_length:] if history_length > 0 else []


def task_frame(task: Task, spelling: Spelling, history_length: int | None = None
               ) -> v03.Task | v1.Task:
    history = _history(task, history_length)
    if spelling == DRAFT:
        return v03.Task(id=task.id, context_id=task.context_id, status=_status3(task.status),
                        artifacts=tuple(_artifact3(a) for a in task.all_artifacts()) or None,
                        history=tuple(_message3(m) for m in history) or None)
    return v1.Task(id=task.id, context_id=task.context_id, status=_status1(task.status),
                   artifacts=tuple(_artifact1(a) for a in task.all_artifacts()),
                   history=tuple(_message1(m) for m in history))


def task_result(task: Task, spelling: Spelling, history_length: int | None = None,
                *, wrapped: bool = False) -> bytes:
    """A Task as a ``result``: bare (get, cancel, draft send) or v1's ``{"task": …}`` wrapper
    (``wrapped``: SendMessage's SendMessageResponse, a stream's StreamResponse)."""
    frame = task_frame(task, spelling, history_length)
    if wrapped and spelling == CURRENT:
        return _encoder.encode(v1.StreamResponse(task=frame))  # type: ignore[arg-type]
    return _encoder.encode(frame)


def update_result(update: Update, spelling: Spelling) -> bytes:
    """W4: one update's ``result``, encoded once per spelling."""
    cached = update.rendered.get(spelling)
    if cached is not None:
        return cached
    if spelling == DRAFT:
        frame: Any
        if update.artifact is not None:
            frame = v03.TaskArtifactUpdateEvent(
                task_id=update.task_id, context_id=update.context_id,
                artifact=_artifact3(update.artifact), append=update.append,
                last_chunk=update.last_chunk)
        else:
            assert update.status is not None
            frame = v03.TaskStatusUpdateEvent(task_id=update.task_id,
                                              context_id=update.context_id,
                                              status=_status3(update.status),
                                              final=update.final)
    elif update.artifact is not None:
        frame = v1.StreamResponse(artifact_update=v1.TaskArtifactUpdateEvent(
            task_id=update.task_id, context_id=update.context_id,
            artifact=_artifact1(update.artifact), append=update.append,
            last_chunk=update.last_chunk))
    else:
        assert update.status is not None
        frame = v1.StreamResponse(status_update=v1.TaskStatusUpdateEvent(
            task_id=update.task_id, context_id=update.context_id,
            status=_status1(update.status)))
    data = _encoder.encode(frame)
    update.rendered[spelling] = data
    return data


def encode_id(request_id: jsonrpc.Id | None) -> bytes:
    return _encoder.encode(request_id)


def envelope(id_json: bytes, result: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + id_json + b',"result":' + result + b"}"


def sse(body: bytes, event_id: int | None = None) -> bytes:
    head = b"id: %d\n" % event_id if event_id is not None else b""
    return head + b"data: " + body + b"\n\n"


def error_body(spelling: Spelling, request_id: jsonrpc.Id | None, fault: RpcFault) -> bytes:
    """W2: a JSON-RPC error in the request's spelling."""
    if spelling == CURRENT:
        info = {"@type": _ERROR_INFO, "reason": fault.reason or _generic(fault.code),
                "domain": "a2a-protocol.org", "metadata": {}}
        return jsonrpc.error_reply(request_id, fault.code, fault.message, [info])
    return jsonrpc.error_reply(request_id, fault.code, fault.message, fault.message)


def _generic(code: int) -> str:
    return {jsonrpc.PARSE_ERROR: "PARSE_ERROR", jsonrpc.INVALID_REQUEST: "INVALID_REQUEST",
            jsonrpc.METHOD_NOT_FOUND: "METHOD_NOT_FOUND", INVALID_PARAMS: "INVALID_PARAMS",
            jsonrpc.INTERNAL_ERROR: "INTERNAL_ERROR"}.get(code, "A2A_ERROR")


# ---- the agent card -------------------------------------------------------------------------


def agent_card(*, name: str, url: str, spellings: tuple[Spelling, ...], bearer: bool,
               profiles: tuple[str, ...] = (), binding: str | None = None,
               version: str = "1.0.0") -> bytes:
    """The card a2a-sdk calls *hybrid* when 0.3 is offered (``a2a.md`` §1): v1's
    ``supportedInterfaces`` (1.0 first, the client's preference order) plus the draft's
    ``url``/``preferredTransport``/``protocolVersion``, so either kind of client reads it."""
    offered = [s for s in (CURRENT, DRAFT) if s in spellings]
    ifaces = tuple(AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=s)
                   for s in offered)
    params: dict[str, Any] = {"agent": name, "profiles": list(profiles),
                              "include_raw": "add ?include_raw=1 to the JSON-RPC URL, or "
                              "metadata {\"cap.include_raw\": true}, for cap.pty.raw_bytes"}
    if binding:
        params["binding"] = binding
    ext = AgentExtension(uri=CAP_EXTENSION, required=False, params=params,
                         description="CAP core v1 over A2A: CAP events without an A2A "
                         "equivalent are data parts with metadata[\"cap.kind\"]")
    draft = DRAFT in offered
    schemes = requirements = security = None
    if bearer:
        scheme: dict[str, Any] = {"httpAuthSecurityScheme": {"scheme": "Bearer"}}
        if draft:
            scheme |= {"type": "http", "scheme": "bearer"}
        schemes = {"bearer": scheme}
        requirements = ({"schemes": {"bearer": {"list": []}}},)
        security = ({"bearer": []},) if draft else None
    card = AgentCard(
        name=name, version=version,
        description=f"{name}, driven by trio-cap and published over A2A (CAP core §11.2)",
        capabilities=AgentCapabilities(streaming=True, push_notifications=False,
                                       extensions=(ext,)),
        default_input_modes=("text/plain", "application/json"),
        default_output_modes=("text/plain", "application/json"),
        skills=(AgentSkill(id=name, name=name, tags=("cap", *profiles),
                           description=f"a session with {name}: one task per turn, "
                           "questions and permissions as input-required"),),
        supported_interfaces=ifaces, security_requirements=requirements,
        protocol_version="0.3.0" if draft else None, url=url if draft else None,
        preferred_transport="JSONRPC" if draft else None,
        additional_interfaces=(AgentInterface(url=url, transport="JSONRPC"),) if draft else None,
        security=security, security_schemes=schemes)
    return _encoder.encode(card)
