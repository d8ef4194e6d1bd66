"""A2A's draft spelling (v0.2.5 / v0.3.0) as msgspec Structs: ``kind``-tagged, lowercase states.

Shapes follow the v0.3.0 ``types.ts`` as ``../shared/protocols/a2a.md`` §2–§4
records them, checked against a running a2a-sdk 1.3.0 server with
``enable_v0_3_compat=True``.  Field names are camelCase on the wire
(``rename="camel"``), snake_case in Python.

Everything the type marks required is required here too (``contextId`` on
tasks and events, ``final`` on a status update), so what trio-cap's publisher
encodes the a2a-sdk client's pydantic models accept; optional members are left
off the wire unless set.  States and roles are plain strings: an agent with a
state this build does not know still decodes, and the machine says what it
makes of it (``frames.state_class``).

Every Struct is frozen and ``gc=False``: frames are trees of leaves.
"""

from __future__ import annotations

from typing import Any

import msgspec

_OPTS: dict[str, Any] = {"frozen": True, "kw_only": True, "omit_defaults": True,
                         "rename": "camel", "gc": False}

# ---- parts (tagged on "kind") ------------------------------------------------------


class Part(msgspec.Struct, tag_field="kind", **_OPTS):
    metadata: dict[str, Any] | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")
    """Not in the A2A type: cap-rs puts CAP's ``_meta`` beside a data part; read, never written."""


class TextPart(Part, tag="text"):
    text: str


class DataPart(Part, tag="data"):
    data: dict[str, Any]


class FileContent(msgspec.Struct, **_OPTS):
    """``bytes`` (base64) or ``uri``, exactly one; a2a-sdk's model checks that, we do not."""

    data_b64: str | None = msgspec.field(default=None, name="bytes")
    uri: str | None = None
    name: str | None = None
    mime_type: str | None = None


class FilePart(Part, tag="file"):
    file: FileContent


AnyPart = TextPart | DataPart | FilePart

# ---- messages, tasks, stream events (tagged on "kind") ------------------------------


class Kinded(msgspec.Struct, tag_field="kind", **_OPTS):
    pass


class Message(Kinded, tag="message"):
    """Decoded as itself (inside a status or a history) the ``kind`` tag may be absent."""

    message_id: str
    role: str  # "user" | "agent"
    parts: tuple[AnyPart, ...] = ()
    context_id: str | None = None
    task_id: str | None = None
    metadata: dict[str, Any] | None = None
    extensions: tuple[str, ...] | None = None
    reference_task_ids: tuple[str, ...] | None = None


class TaskStatus(msgspec.Struct, **_OPTS):
    state: str  # submitted | working | input-required | auth-required | completed | ...
    message: Message | None = None
    timestamp: str | None = None


class Artifact(msgspec.Struct, **_OPTS):
    artifact_id: str
    parts: tuple[AnyPart, ...] = ()
    name: str | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None
    extensions: tuple[str, ...] | None = None


class Task(Kinded, tag="task"):
    id: str
    context_id: str
    status: TaskStatus
    artifacts: tuple[Artifact, ...] | None = None
    history: tuple[Message, ...] | None = None
    metadata: dict[str, Any] | None = None


class TaskStatusUpdateEvent(Kinded, tag="status-update"):
    task_id: str
    context_id: str
    status: TaskStatus
    final: bool
    """Required by the type, but not a reliable end of turn: a2a-sdk sends ``false`` on
    ``input-required`` and then closes the stream."""
    metadata: dict[str, Any] | None = None


class TaskArtifactUpdateEvent(Kinded, tag="artifact-update"):
    task_id: str
    context_id: str
    artifact: Artifact
    append: bool | None = None
    last_chunk: bool | None = None
    metadata: dict[str, Any] | None = None


StreamResult = Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent
"""What one SSE event's ``result`` holds on ``message/stream`` and ``tasks/resubscribe``
(and what ``message/send`` returns: a Task or a Message)."""

# ---- request params ---------------------------------------------------------------------


class PushNotificationConfig(msgspec.Struct, **_OPTS):
    url: str
    id: str | None = None
    token: str | None = None
    authentication: dict[str, Any] | None = None


class MessageSendConfiguration(msgspec.Struct, **_OPTS):
    accepted_output_modes: tuple[str, ...] | None = None
    history_length: int | None = None
    push_notification_config: PushNotificationConfig | None = None
    blocking: bool | None = None


class MessageSendParams(msgspec.Struct, **_OPTS):
    """``message/send`` and ``message/stream``."""

    message: Message
    configuration: MessageSendConfiguration | None = None
    metadata: dict[str, Any] | None = None


class TaskIdParams(msgspec.Struct, **_OPTS):
    """``tasks/cancel`` and ``tasks/resubscribe``."""

    id: str
    metadata: dict[str, Any] | None = None


class TaskQueryParams(msgspec.Struct, **_OPTS):
    """``tasks/get``."""

    id: str
    history_length: int | None = None
    metadata: dict[str, Any] | None = None
