"""Sans-io JSON-RPC 2.0: one message in, one typed value out; Python values in, bytes out.

ACP (over ndjson) and A2A (over HTTP) both speak JSON-RPC 2.0, and both need the
same three things done exactly once: tell requests, notifications and responses
apart by their shape, match a response to the request it answers, and build
the replies the specification prescribes.  Framing is not done here (one call
is one message: ``ndjson.py`` or an HTTP body delimits it), nor is any I/O.

Rules (JSON-RPC 2.0, https://www.jsonrpc.org/specification; choices marked *):

* ``"jsonrpc": "2.0"`` is required on every input; missing or another value is an
  invalid request.
* An ``id`` is an integer, a string or null.  It is kept as decoded and echoed
  exactly: ``1`` and ``"1"`` are different ids and are never converted into one
  another.  *Fractional and boolean ids are refused as invalid requests (the
  specification discourages the first, forbids the second); a reply to such a
  message carries ``"id": null`` because the id could not be read.
* ``params`` is an object or an array, or absent; anything else is an invalid request.
* A message with ``method`` is a *request* when it has an ``id`` member (even
  ``null``) and a *notification* when it has none.  It must not also carry
  ``result`` or ``error``.  *A peer request whose id equals one of its own still
  unanswered requests is refused (reply id null: answering with that id would
  resolve the first request).
* A message without ``method`` and with exactly one of ``result`` / ``error`` is a
  *response*.  ``result`` may be anything, ``null`` and ``{}`` included.  An error
  response's ``id`` may be null (the peer could not read our id).  A response
  whose id matches no request of ours still pending (never sent, already
  answered, or the same digits with the other type) is a :class:`StrayResponse`
  value, never an exception.
* *A request sent with ``streaming=True`` (A2A's ``message/stream`` answers one
  request with many responses, one per SSE event) stays pending through its
  results; an error response, :meth:`JsonRpc.forget` or ``abandon`` ends it.
* Responses are never answered: a malformed response becomes an
  :class:`Invalid` without a reply; if its id names a pending request, that
  request is consumed (``Invalid.method`` says which) so no caller waits forever.
* Everything else gets a reply: invalid JSON (including invalid UTF-8 and nesting
  too deep to decode) is ``-32700`` with id null; a valid JSON value that is not a
  usable message is ``-32600``, echoing the id when one could be read.
* *Batches (a top-level array) are not supported: any batch, empty or not, gets
  ONE ``-32600`` reply with id null and nothing in it is processed.
* ``params`` and ``result`` stay :class:`msgspec.Raw` (undecoded bytes) so the
  binding decodes them into its own Structs (:func:`decode_params`); their
  strings are checked for UTF-8 only then, so bad bytes inside them surface as
  invalid params rather than a parse error.

Transition table of one :class:`JsonRpc` endpoint (``pending``: our requests not
yet answered; ``unanswered``: the peer's requests we have not replied to yet):

=============================  ==========================  ===============================
input                          state change                value out
=============================  ==========================  ===============================
``request(m, p)``              pending += {next_id: m}     (id, bytes)
``request(…, streaming)``      pending += {next_id: m}     (id, bytes); results keep it
``notify(m, p)``               —                           bytes
bytes: request, new id         unanswered += {id: m}       Request
bytes: request, id unanswered  —                           Invalid(-32600, reply id null)
bytes: notification            —                           Notification
bytes: response, id pending    pending -= id               Response / ErrorResponse
bytes: response, other id      —                           StrayResponse
bytes: error response, id null —                           ErrorResponse(method None)
bytes: broken response         pending -= id (if pending)  Invalid(reply None)
bytes: not JSON / too deep     —                           Invalid(-32700, reply id null)
bytes: batch / not a message   —                           Invalid(-32600, reply)
``reply*(id, …)``, id unanswd  unanswered -= id            bytes
``reply*(id, …)``, other id    —                           ValueError (caller's bug)
``forget(id)``                 pending -= id               the method, or None
``abandon()``                  pending, unanswered = {}    [(id, method, context), …]
=============================  ==========================  ===============================
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET, Raw, UnsetType

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

MESSAGES = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid Request",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params",
    INTERNAL_ERROR: "Internal error",
}
"""The specification's own wording; the detail goes into the error's ``data``."""

Id = int | str
T = TypeVar("T")


# ---- typed values out of ``receive`` ------------------------------------------------


class ErrorObject(msgspec.Struct, frozen=True):
    """A JSON-RPC error object; ``data`` stays undecoded (its shape is the peer's)."""

    code: int
    message: str
    data: Raw | None = None


class Request(msgspec.Struct, frozen=True):
    """The peer calls us and waits: answer with :meth:`JsonRpc.reply` and friends."""

    id: Id | None
    method: str
    params: Raw | None = None


class Notification(msgspec.Struct, frozen=True):
    """The peer tells us something and wants no answer."""

    method: str
    params: Raw | None = None


class Response(msgspec.Struct, frozen=True):
    """A result for one of our requests; ``method``/``context`` are what we sent it with."""

    id: Id
    result: Raw
    method: str
    context: Any = None


class ErrorResponse(msgspec.Struct, frozen=True):
    """An error for one of our requests, or (id null, method None) for one it could not read."""

    id: Id | None
    error: ErrorObject
    method: str | None = None
    context: Any = None


class StrayResponse(msgspec.Struct, frozen=True):
    """A well-formed response to no request of ours that is pending; nothing is resolved."""

    id: Id
    result: Raw | None = None
    error: ErrorObject | None = None


class Invalid(msgspec.Struct, frozen=True):
    """Input that is not a usable message: why, and the reply owed to the peer (if any).

    ``method`` is set when a broken response consumed the pending request of that
    method (its caller must be told it failed).
    """

    code: int
    detail: str
    id: Id | None = None
    reply: bytes | None = None
    method: str | None = None
    context: Any = None


Incoming = Request | Notification | Response | ErrorResponse | StrayResponse | Invalid


class PayloadError(ValueError):
    """``params`` or ``result`` did not decode into the binding's type."""


# ---- wire shapes ---------------------------------------------------------------------


class _Envelope(msgspec.Struct):
    """Every member a message may have; an empty Raw means the member was absent."""

    jsonrpc: str | UnsetType = UNSET
    id: int | str | UnsetType | None = UNSET
    method: str | UnsetType = UNSET
    params: Raw = Raw()
    result: Raw = Raw()
    error: Raw = Raw()


class _Loose(msgspec.Struct):
    """The same members untyped: used only to explain what the strict decode refused."""

    jsonrpc: Raw = Raw()
    id: Raw = Raw()
    method: Raw = Raw()
    params: Raw = Raw()
    result: Raw = Raw()
    error: Raw = Raw()


class _ErrorWire(msgspec.Struct):
    code: int
    message: str
    data: Raw = Raw()


class _OutRequest(msgspec.Struct):
    id: Any
    method: str
    params: Any = UNSET
    jsonrpc: str = "2.0"


class _OutNotification(msgspec.Struct):
    method: str
    params: Any = UNSET
    jsonrpc: str = "2.0"


class _OutResult(msgspec.Struct):
    id: Any
    result: Any
    jsonrpc: str = "2.0"


class _OutErrorObject(msgspec.Struct):
    code: int
    message: str
    data: Any = UNSET


class _OutError(msgspec.Struct):
    id: Any
    error: _OutErrorObject
    jsonrpc: str = "2.0"


_envelope = msgspec.json.Decoder(_Envelope)
_loose = msgspec.json.Decoder(_Loose)
_error_wire = msgspec.json.Decoder(_ErrorWire)
_id_decoder = msgspec.json.Decoder(int | str | None)
_encoder = msgspec.json.Encoder()
_WHITESPACE = b" \t\r\n"


def _first_byte(raw: Raw) -> bytes:
    # Raw has no slicing; a memoryview reads its first byte without copying the payload.
    return memoryview(raw)[:1].tobytes()


def _structured(raw: Raw) -> bool:
    return _first_byte(raw) in (b"{", b"[")


def _check_params(params: Any) -> Any:
    if params is None:
        return UNSET
    if isinstance(params, Raw):
        if not _structured(Raw(bytes(params).strip(_WHITESPACE))):
            raise TypeError("JSON-RPC params must encode to an object or an array")
        return params
    if isinstance(params, str | bytes | int | float | bool):
        raise TypeError(f"JSON-RPC params must be an object or an array, not {type(params)}")
    return params


# ---- replies that need no endpoint state -------------------------------------------


def error_reply(id: Id | None, code: int, message: str | None = None,
                data: Any = UNSET) -> bytes:
    """An error response; ``message`` defaults to the specification's wording for ``code``."""
    text = message if message is not None else MESSAGES.get(code, "Server error")
    return _encoder.encode(_OutError(id, _OutErrorObject(code, text, data)))


def parse_error_reply(detail: str | None = None) -> bytes:
    """``-32700`` with id null: the id of unparseable input cannot be known."""
    return error_reply(None, PARSE_ERROR, data=detail if detail is not None else UNSET)


def invalid_request_reply(id: Id | None = None, detail: str | None = None) -> bytes:
    return error_reply(id, INVALID_REQUEST, data=detail if detail is not None else UNSET)


def decode_params(message: Request | Notification, type: type[T]) -> T:
    """The params as the binding's type; absent params decode as ``{}`` (named, all defaults).

    Raises :class:`PayloadError` with a one-line reason, which is what
    :meth:`JsonRpc.invalid_params` wants as its detail.
    """
    raw = message.params if message.params is not None else Raw(b"{}")
    return _decode_payload(raw, type)


def decode_result(response: Response, type: type[T]) -> T:
    """The result as the binding's type; raises :class:`PayloadError`."""
    return _decode_payload(response.result, type)


def _decode_payload(raw: Raw, type: type[T]) -> T:
    try:
        return msgspec.json.decode(raw, type=type)
    except msgspec.DecodeError as exc:
        raise PayloadError(str(exc)) from None
    except RecursionError:
        raise PayloadError("nested too deeply") from None


# ---- the endpoint --------------------------------------------------------------------


class JsonRpc:
    """One side of a JSON-RPC connection: the ids it owes and the ids it is owed.

    Both directions are tracked because ACP is symmetric: the agent calls the
    client back (``fs/read_text_file``, ``session/request_permission``) while the
    client's own ``session/prompt`` is still pending, and several such reverse
    requests may be outstanding at once.
    """

    def __init__(self, *, first_id: int = 0) -> None:
        self._next_id = first_id
        self._pending: dict[Id, tuple[str, Any]] = {}
        self._unanswered: dict[Id | None, str] = {}
        self._streaming: set[Id] = set()
        self.pending: Mapping[Id, tuple[str, Any]] = MappingProxyType(self._pending)
        """Our requests awaiting a response: id → (method, context)."""
        self.unanswered: Mapping[Id | None, str] = MappingProxyType(self._unanswered)
        """The peer's requests awaiting our reply: id → method."""

    # -- outbound --

    def request(self, method: str, params: Any = None, *, context: Any = None,
                streaming: bool = False) -> tuple[int, bytes]:
        """Allocate the next id, remember what it asks, and encode the call.

        ``context`` is returned untouched on the matching :class:`Response`, so a
        binding can find its own bookkeeping without a second map.  A ``streaming``
        request (A2A's ``message/stream``: one JSON-RPC response per SSE event, all
        with the request's id) stays pending through any number of results until an
        error response or :meth:`forget` ends it.
        """
        body = _check_params(params)
        request_id = self._next_id
        self._next_id += 1
        data = _encoder.encode(_OutRequest(request_id, method, body))
        self._pending[request_id] = (method, context)
        if streaming:
            self._streaming.add(request_id)
        return request_id, data

    def notify(self, method: str, params: Any = None) -> bytes:
        return _encoder.encode(_OutNotification(method, _check_params(params)))

    def forget(self, request_id: Id) -> str | None:
        """Stop waiting for a response (timed out, cancelled); a late one becomes stray."""
        if type(request_id) not in (int, str):  # 5.0 or True would find the integer 5 or 1
            return None
        entry = self._pop(request_id)
        return entry[0] if entry is not None else None

    def abandon(self) -> list[tuple[Id, str, Any]]:
        """The peer is gone: every request of ours still pending, as (id, method, context).

        Both maps are emptied, so the binding can fail each waiting caller once.
        """
        lost = [(rid, method, context) for rid, (method, context) in self._pending.items()]
        self._pending.clear()
        self._streaming.clear()
        self._unanswered.clear()
        return lost

    def _pop(self, request_id: Id) -> tuple[str, Any] | None:
        self._streaming.discard(request_id)
        return self._pending.pop(request_id, None)

    def reply(self, request_id: Id | None, result: Any) -> bytes:
        """Answer a peer request with a result (``None`` encodes as ``null``)."""
        self._answer(request_id)
        return _encoder.encode(_OutResult(request_id, result))

    def reply_error(self, request_id: Id | None, code: int, message: str | None = None,
                    data: Any = UNSET) -> bytes:
        self._answer(request_id)
        return error_reply(request_id, code, message, data)

    def method_not_found(self, request: Request) -> bytes:
        return self.reply_error(request.id, METHOD_NOT_FOUND, data=request.method)

    def invalid_params(self, request: Request, detail: str | None = None) -> bytes:
        return self.reply_error(request.id, INVALID_PARAMS,
                                data=detail if detail is not None else UNSET)

    def _answer(self, request_id: Id | None) -> None:
        # The type is part of the id: 1 and "1" differ, and True or 5.0 (equal to 1 and 5
        # as dict keys) never stand for an integer id.
        exact = request_id is None or type(request_id) in (int, str)
        if not exact or request_id not in self._unanswered:
            raise ValueError(f"no request with id {request_id!r} from the peer awaits a reply")
        del self._unanswered[request_id]

    # -- inbound --

    def receive(self, data: bytes) -> Incoming:
        """Classify one whole message; never raises, whatever the bytes."""
        try:
            env = _envelope.decode(data)
        except msgspec.ValidationError:
            return self._explain(data)
        except msgspec.DecodeError as exc:
            return Invalid(PARSE_ERROR, str(exc), reply=parse_error_reply(str(exc)))
        except RecursionError:
            detail = "JSON nested too deeply"
            return Invalid(PARSE_ERROR, detail, reply=parse_error_reply(detail))
        return self._classify(env)

    def _classify(self, env: _Envelope) -> Incoming:
        has_id = env.id is not UNSET
        msg_id: Id | None = env.id if has_id else None  # type: ignore[assignment]
        if env.method is UNSET:
            if env.result or env.error:
                return self._response(env, msg_id, has_id)
            return self._invalid("neither a method nor a result or error", msg_id)
        if env.jsonrpc != "2.0":
            return self._invalid(_version_problem(env.jsonrpc), msg_id)
        if env.result or env.error:
            return self._invalid("a request must not carry result or error", msg_id)
        params = env.params if env.params else None
        if params is not None and not _structured(params):
            return self._invalid("params must be an object or an array", msg_id)
        if not has_id:
            return Notification(env.method, params)
        if msg_id in self._unanswered:
            detail = f"id {msg_id!r} is already in use by an unanswered request"
            return Invalid(INVALID_REQUEST, detail, reply=invalid_request_reply(None, detail))
        self._unanswered[msg_id] = env.method
        return Request(msg_id, env.method, params)

    def _response(self, env: _Envelope, msg_id: Id | None, has_id: bool) -> Incoming:
        if env.jsonrpc != "2.0":
            return self._broken(_version_problem(env.jsonrpc), msg_id)
        if env.result and env.error:
            return self._broken("a response must not carry both result and error", msg_id)
        if not has_id:
            return self._broken("a response must carry an id", None)
        if env.result:
            if msg_id is None:
                return self._broken("a result must not have a null id", None)
            if msg_id in self._streaming:
                entry = self._pending.get(msg_id)
            else:
                entry = self._pending.pop(msg_id, None)
            if entry is None:
                return StrayResponse(msg_id, result=env.result)
            return Response(msg_id, env.result, entry[0], entry[1])
        try:
            wire = _error_wire.decode(env.error)
        except (msgspec.DecodeError, RecursionError) as exc:
            return self._broken(f"malformed error object: {_reason(exc)}", msg_id)
        error = ErrorObject(wire.code, wire.message, wire.data if wire.data else None)
        if msg_id is None:
            return ErrorResponse(None, error)
        entry = self._pop(msg_id)
        if entry is None:
            return StrayResponse(msg_id, error=error)
        return ErrorResponse(msg_id, error, entry[0], entry[1])

    def _broken(self, detail: str, msg_id: Id | None) -> Invalid:
        """A response we cannot use: never answered, but its pending request is released."""
        entry = self._pop(msg_id) if msg_id is not None else None
        if entry is None:
            return Invalid(INVALID_REQUEST, detail, id=msg_id)
        return Invalid(INVALID_REQUEST, detail, id=msg_id, method=entry[0], context=entry[1])

    def _invalid(self, detail: str, msg_id: Id | None) -> Invalid:
        return Invalid(INVALID_REQUEST, detail, id=msg_id,
                       reply=invalid_request_reply(msg_id, detail))

    def _explain(self, data: bytes) -> Invalid:
        """The strict decode refused a JSON value: say why, and find an id to echo if any."""
        try:
            loose = _loose.decode(data)
        except (msgspec.DecodeError, RecursionError):
            # Not an object; a typed decode stops at the first byte, so make sure the
            # whole text is JSON at all before calling it an invalid request.
            try:
                msgspec.json.decode(data)
            except msgspec.DecodeError as exc:
                return Invalid(PARSE_ERROR, str(exc), reply=parse_error_reply(str(exc)))
            except RecursionError:
                detail = "JSON nested too deeply"
                return Invalid(PARSE_ERROR, detail, reply=parse_error_reply(detail))
            if bytes(data).lstrip(_WHITESPACE)[:1] == b"[":
                detail = "batches are not supported"
            else:
                detail = "a message must be a JSON object"
            return Invalid(INVALID_REQUEST, detail, reply=invalid_request_reply(None, detail))
        msg_id = _readable_id(loose.id)
        if loose.id and msg_id is None and loose.id != Raw(b"null"):
            problem = "id must be a string, an integer or null"
        elif loose.method and _first_byte(loose.method) != b'"':
            problem = "method must be a string"
        else:
            problem = "jsonrpc must be the string \"2.0\""
        if not loose.method and (loose.result or loose.error):
            return self._broken(problem, msg_id)
        return self._invalid(problem, msg_id)


def _readable_id(raw: Raw) -> Id | None:
    if not raw:
        return None
    try:
        return _id_decoder.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None


def _version_problem(version: str | UnsetType) -> str:
    if version is UNSET:
        return "jsonrpc member missing (must be \"2.0\")"
    return f"jsonrpc must be \"2.0\", not {version!r}"


def _reason(exc: BaseException) -> str:
    return "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
