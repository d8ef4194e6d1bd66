"""A2A's current spelling (v1.0, ProtoJSON) as msgspec Structs: oneof wrappers, ``TASK_STATE_*``.

Shapes follow ``specification/a2a.proto`` at v1.0.1 as
``../shared/protocols/a2a.md`` §2–§4 records them, checked against a running
a2a-sdk 1.3.0 server.  ProtoJSON: camelCase names (``rename="camel"``),
enums as their ``SCREAMING_SNAKE`` names, and proto3 defaults (``""``,
``false``, empty lists) *omitted* by the peer, so every such field has a
default here and is omitted again when we encode it.

A oneof is a Struct whose members all default to None (:class:`StreamResponse`,
:class:`SendMessageResponse`; a :class:`Part`'s content): exactly one is set
on a well-formed frame, and the machine treats "none set" as a malformed one.
A part's ``data`` is any JSON value (``google.protobuf.Value``), so "absent" is
``UNSET``, not ``None``.

Every Struct is frozen and ``gc=False``: frames are trees of leaves.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

_OPTS: dict[str, Any] = {"frozen": True, "kw_only": True, "omit_defaults": True,
                         "rename": "camel", "gc": False}

ROLE_USER = "ROLE_USER"
ROLE_AGENT = "ROLE_AGENT"


class Part(msgspec.Struct, **_OPTS):
    """One of ``text`` / ``raw`` (base64) / ``url`` / ``data``, plus optional annotations."""

    text: str | None = None
    raw: str | None = None
    url: str | None = None
    data: Any | UnsetType = UNSET
    metadata: dict[str, Any] | None = None
    filename: str | None = None
    media_type: str | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")
    """Not in the proto: cap-rs puts CAP's ``_meta`` beside a data part; read, never written."""


class Message(msgspec.Struct, **_OPTS):
    message_id: str
    role: str  # ROLE_USER | ROLE_AGENT
    parts: tuple[Part, ...] = ()
    context_id: str = ""
    task_id: str = ""
    metadata: dict[str, Any] | None = None
    extensions: tuple[str, ...] = ()
    reference_task_ids: tuple[str, ...] = ()


class TaskStatus(msgspec.Struct, **_OPTS):
    state: str  # TASK_STATE_*
    message: Message | None = None
    timestamp: str | None = None


class Artifact(msgspec.Struct, **_OPTS):
    artifact_id: str
    parts: tuple[Part, ...] = ()
    name: str = ""
    description: str = ""
    metadata: dict[str, Any] | None = None
    extensions: tuple[str, ...] = ()


class Task(msgspec.Struct, **_OPTS):
    id: str
    status: TaskStatus
    context_id: str = ""
    artifacts: tuple[Artifact, ...] = ()
    history: tuple[Message, ...] = ()
    metadata: dict[str, Any] | None = None


class TaskStatusUpdateEvent(msgspec.Struct, **_OPTS):
    """No ``final`` in v1: the end of a turn is a terminal/interrupted state or the stream's end."""

    task_id: str
    status: TaskStatus
    context_id: str = ""
    metadata: dict[str, Any] | None = None


class TaskArtifactUpdateEvent(msgspec.Struct, **_OPTS):
    task_id: str
    artifact: Artifact
    context_id: str = ""
    append: bool = False
    last_chunk: bool = False
    metadata: dict[str, Any] | None = None


class StreamResponse(msgspec.Struct, **_OPTS):
    """One SSE event's ``result`` on ``SendStreamingMessage`` / ``SubscribeToTask`` (a oneof)."""

    task: Task | None = None
    message: Message | None = None
    status_update: TaskStatusUpdateEvent | None = None
    artifact_update: TaskArtifactUpdateEvent | None = None


class SendMessageResponse(msgspec.Struct, **_OPTS):
    """``SendMessage``'s result (a oneof): the task, or a direct message."""

    task: Task | None = None
    message: Message | None = None


# ---- request params ---------------------------------------------------------------------


class AuthenticationInfo(msgspec.Struct, **_OPTS):
    scheme: str
    credentials: str = ""


class TaskPushNotificationConfig(msgspec.Struct, **_OPTS):
    url: str
    id: str = ""
    token: str = ""
    authentication: AuthenticationInfo | None = None


class SendMessageConfiguration(msgspec.Struct, **_OPTS):
    accepted_output_modes: tuple[str, ...] = ()
    task_push_notification_config: TaskPushNotificationConfig | None = None
    history_length: int | None = None
    return_immediately: bool = False


class SendMessageRequest(msgspec.Struct, **_OPTS):
    """``SendMessage`` and ``SendStreamingMessage``."""

    message: Message
    configuration: SendMessageConfiguration | None = None
    metadata: dict[str, Any] | None = None
    tenant: str = ""


class GetTaskRequest(msgspec.Struct, **_OPTS):
    id: str
    history_length: int | None = None
    tenant: str = ""


class CancelTaskRequest(msgspec.Struct, **_OPTS):
    id: str
    metadata: dict[str, Any] | None = None
    tenant: str = ""


class SubscribeToTaskRequest(msgspec.Struct, **_OPTS):
    id: str
    tenant: str = ""
