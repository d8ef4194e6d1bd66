"""Lenient decoding of ACP payloads, as the schema asks, in one small place.

The ACP schema marks most optional fields ``x-deserialize-default-on-error``
and lists ``x-deserialize-skip-invalid-items``: a receiver drops a bad
optional field or a bad list item rather than refusing the whole message
(agents do send such things: the session-modes doc's own example puts a bare
``{"type":"text"}`` in a tool call's content).  msgspec validates while it
decodes and stops at the first problem, naming where it was; so the strict
decode is tried first (the only cost on good input), and only a refused
payload is decoded untyped and repaired: the part the error names is removed
(a dict key, or a list item) and the conversion retried, a bounded number of
times.  Removing a *required* field makes the next error name its parent, so
a payload whose required parts are bad ends as :class:`PayloadError` after a
few steps, never as a wrong value.

A ``session/update`` of a kind this build does not know is not an error at
all: it decodes to :class:`~.frames.UnknownUpdate` (forward compatibility),
and one whose known kind could not be repaired to an ``UnknownUpdate`` with
the reason, so the log keeps it.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from trio_cap.actors.bindings.acp import frames as f
from trio_cap.actors.bindings.jsonrpc import PayloadError

T = TypeVar("T")

MAX_REPAIRS = 16
_AT = re.compile(r" - at `\$(.*)`$")
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\.\.\.\]")
_UPDATE_TAGS = frozenset(cls.__struct_config__.tag for cls in f.SessionUpdate.__args__)  # type: ignore[attr-defined]


def decode_payload(raw: bytes, type: type[T]) -> T:
    """``raw`` as ``type``, repaired when only optional parts are bad; else PayloadError."""
    value, obj, error = _strict(raw, type)
    if error is None:
        return value  # type: ignore[return-value]
    return repair(obj, type, error)


def _strict(raw: bytes, type: type[T]) -> tuple[T | None, Any, msgspec.ValidationError | None]:
    """The strict decode (the only cost on good input); refused: the untyped value and why.

    Raises PayloadError when ``raw`` is not JSON at all.
    """
    try:
        return msgspec.json.decode(raw, type=type), None, None
    except msgspec.ValidationError as exc:
        error = exc
    except msgspec.DecodeError as exc:
        raise PayloadError(str(exc)) from None
    except RecursionError:
        raise PayloadError("nested too deeply") from None
    try:
        return None, msgspec.json.decode(raw), error
    except (msgspec.DecodeError, RecursionError) as exc:
        raise PayloadError(str(exc)) from None


def repair(obj: Any, type: type[T], error: msgspec.ValidationError) -> T:
    """Drop what ``error`` names from ``obj`` and convert again, up to MAX_REPAIRS times."""
    first = str(error)
    for _ in range(MAX_REPAIRS):
        path = _path(str(error))
        if not path or not _drop(obj, path):
            raise PayloadError(first)
        try:
            return msgspec.convert(obj, type)
        except msgspec.ValidationError as exc:
            error = exc
        except RecursionError:
            raise PayloadError("nested too deeply") from None
    raise PayloadError(first)


def decode_notification(raw: bytes) -> f.SessionNotification | f.LooseNotification:
    """``session/update`` params: typed, repaired, or kept whole as an unknown update.

    Raises PayloadError only when the envelope itself is unusable (no session
    id, no update object).
    """
    value, obj, error = _strict(raw, f.SessionNotification)
    if error is None:
        return value  # type: ignore[return-value]
    if not isinstance(obj, dict):
        raise PayloadError("session/update params must be an object")
    update = obj.get("update")
    sid = obj.get("sessionId")
    if not isinstance(update, dict) or not isinstance(sid, str):
        raise PayloadError("session/update needs a sessionId and an update object")
    kind = update.get("sessionUpdate")
    meta = obj.get("_meta") if isinstance(obj.get("_meta"), dict) else msgspec.UNSET
    if not isinstance(kind, str):
        return f.LooseNotification(session_id=sid, meta=meta, update=f.UnknownUpdate(
            session_update="", body=update, problem="no sessionUpdate kind"))
    if kind not in _UPDATE_TAGS:
        loose: f.UnknownUpdate | f.UnstableUpdate
        if kind in f.UNSTABLE_UPDATES:
            loose = f.UnstableUpdate(session_update=kind, body=update)
        else:
            loose = f.UnknownUpdate(session_update=kind, body=update)
        return f.LooseNotification(session_id=sid, update=loose, meta=meta)
    kept = msgspec.json.decode(raw)  # a pristine copy: repair edits obj in place
    try:
        return repair(obj, f.SessionNotification, error)
    except PayloadError as exc:
        return f.LooseNotification(session_id=sid, meta=meta, update=f.UnknownUpdate(
            session_update=kind, body=kept["update"], problem=str(exc)))


def _path(message: str) -> list[str | int] | None:
    """The steps of msgspec's ``- at `$.a[0].b``` suffix; None when it names no place."""
    match = _AT.search(message)
    if match is None:
        return None
    steps: list[str | int] = []
    text = match.group(1)
    pos = 0
    while pos < len(text):
        step = _STEP.match(text, pos)
        if step is None:
            return None
        if step.group(1) is not None:
            steps.append(step.group(1))
        elif step.group(2) is not None:
            steps.append(int(step.group(2)))
        else:
            return None  # a dict key msgspec does not spell out: nothing to drop safely
        pos = step.end()
    return steps


def _drop(obj: Any, path: list[str | int]) -> bool:
    """Remove the key or list item at ``path``; False when it cannot (the root, a missing step)."""
    if not path:
        return False
    parent = obj
    for step in path[:-1]:
        try:
            parent = parent[step]
        except (KeyError, IndexError, TypeError):
            return False
    last = path[-1]
    if isinstance(parent, dict) and isinstance(last, str) and last in parent:
        del parent[last]
        return True
    if isinstance(parent, list) and isinstance(last, int) and 0 <= last < len(parent):
        del parent[last]
        return True
    return False
