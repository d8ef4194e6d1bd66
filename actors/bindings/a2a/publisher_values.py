"""The publisher's values: what its machine takes and answers, spelling-neutral.

Split from :mod:`.publisher` (the rules) so the machine file holds only its
state and transitions; :mod:`.publisher_wire` renders these in either spelling.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs
import msgspec

# ---- JSON-RPC / A2A error codes --------------------------------------------------------

INVALID_PARAMS = -32602
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
UNSUPPORTED_OPERATION = -32004

DECISION_WORDS: dict[str, Literal["allow_once", "allow_always", "deny"]] = {
    "allow": "allow_once", "allow_once": "allow_once", "allow once": "allow_once",
    "yes": "allow_once", "y": "allow_once", "approve": "allow_once", "ok": "allow_once",
    "allow_always": "allow_always", "allow always": "allow_always", "always": "allow_always",
    "deny": "deny", "no": "deny", "n": "deny", "reject": "deny", "refuse": "deny",
}
"""How a plain-text reply to a permission request is read (case and surrounding
punctuation ignored).  Anything else is refused, never guessed."""

SOURCE_PREFIX = "a2a:"
"""``input.injected.source`` of a task's input: ``a2a:TASK`` (how P5 finds it)."""



class RpcFault(msgspec.Struct, frozen=True):
    """A refusal the shell answers as a JSON-RPC error (``reason``: v1's ErrorInfo reason)."""

    code: int
    message: str
    reason: str = ""


# ---- neutral A2A values (rendered per spelling by publisher_wire) -------------------------


class TextPart(msgspec.Struct, frozen=True, gc=False):
    text: str


class DataPart(msgspec.Struct, frozen=True, gc=False):
    data: dict[str, Any]
    metadata: dict[str, Any] | None = None


Part = TextPart | DataPart


class Message(msgspec.Struct, frozen=True, gc=False):
    role: Literal["user", "agent"]
    message_id: str
    parts: tuple[Part, ...]
    task_id: str
    context_id: str


class Status(msgspec.Struct, frozen=True, gc=False):
    state: str  # the draft's lowercase name; publisher_wire spells it for v1
    timestamp: str | None = None
    message: Message | None = None


class A2aArtifact(msgspec.Struct, frozen=True, gc=False):
    artifact_id: str
    name: str
    parts: tuple[Part, ...]
    metadata: dict[str, Any] | None = None
    description: str | None = None


@attrs.define(eq=False)
class Update:
    """One stream event of a task: ``status`` or ``artifact`` (``task`` is a snapshot)."""

    index: int
    task_id: str
    context_id: str
    status: Status | None = None
    artifact: A2aArtifact | None = None
    final: bool = False
    raw: bool = False
    append: bool = False
    last_chunk: bool = True
    rendered: dict[str, bytes] = attrs.field(factory=dict)
    """The shell's cache: spelling → the ``result`` bytes, encoded once for every subscriber."""


# ---- what a caller sends (decoded from either spelling by publisher_wire) -----------------


class Inbound(msgspec.Struct, frozen=True):
    message_id: str
    text: str
    data: tuple[tuple[dict[str, Any], str | None], ...] = ()
    """Data parts: (data, the CAP kind they carry or None)."""
    task_id: str | None = None
    context_id: str | None = None


# ---- actions for the shell ----------------------------------------------------------------


class StartSession(msgspec.Struct, frozen=True):
    context_id: str


class Inject(msgspec.Struct, frozen=True):
    context_id: str
    task_id: str
    text: str

    @property
    def source(self) -> str:
        return SOURCE_PREFIX + self.task_id


class Answer(msgspec.Struct, frozen=True):
    context_id: str
    ask_id: str
    value: Any


class Decide(msgspec.Struct, frozen=True):
    context_id: str
    req_id: str
    decision: Literal["allow_once", "allow_always", "deny"]
    reason: str = ""


class CancelTurn(msgspec.Struct, frozen=True):
    context_id: str
    task_id: str


Action = StartSession | Inject | Answer | Decide | CancelTurn


class Plan(msgspec.Struct, frozen=True):
    """What a send means: the task it concerns, where its stream starts, what to do."""

    task_id: str
    context_id: str
    start: int
    actions: tuple[Action, ...]
