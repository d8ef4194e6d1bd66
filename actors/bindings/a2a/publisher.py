"""The A2A publisher as a sans-io machine: A2A calls → session commands, the log → task updates.

``cap serve a2a`` publishes a locally driven agent as an A2A peer (CAP core
§11.2).  This machine holds every A2A context and task the server knows and
decides everything about them; its Trio shell (``serve_*.py``) only carries
out what it answers.  No I/O, no clock, no ids of its own: ids come from the
``new_id`` it is given, time only as the envelopes' ``at``.

Rules (CAP core §11.2/§11.3, ``shared/protocols/a2a.md``; choices marked *):

* P1 *An A2A context is one trio-cap session, and its ``contextId`` **is** the
  session id (``cap log show --session CONTEXT`` shows it); a task is one turn
  of it.  A message without ``contextId`` opens a new context (the shell starts
  the session); one with a known ``contextId`` and no ``taskId`` starts the next
  turn there.  An unknown ``contextId`` is refused (-32602): contexts are made
  here, never named by a caller.
* P2 Every context and task belongs to the caller that made it (its token's
  identity).  For anyone else it does not exist: the same -32001 "task not
  found" as for an id never issued, so a caller cannot probe for others' ids.
* P3 *One task at a time per context: a new task while one is submitted,
  working or waiting for input is refused (-32004, naming the task to answer
  or cancel).  A message to a terminal task is refused (-32004), as a2a-sdk does.
* P4 A message with ``taskId`` for a task in ``input-required`` answers what the
  session waits on: an ask gets ``Session.answer`` (a data part
  ``{"kind": "cap.ask_user.answer", "value": …}``, else the text), a
  permission ``Session.decide`` (a data part ``{"kind":
  "cap.permission.response", "decision": …}``, else the text read as
  allow / always / deny, see :data:`DECISION_WORDS`).  Text that is none of
  those is refused (-32602) and the task keeps waiting: an unclear answer
  never becomes a decision.  A message to a working task is refused (-32004).
* P5 A task is *armed* when its own ``input.injected`` (source ``a2a:TASK``)
  appears in the session's stream; from then until its end the session's turn
  events are its events (agent events whose ``cause`` is another turn's input
  are dropped).  Nothing before arming is a task event.
* P6 The mapping of the session's stream (below): ``cap.text_chunk``
  (assistant) is a text part appended to the artifact named by its CAP message
  id (``name`` "response"; the first chunk ``append: false``, later ones
  ``append: true``), a2a-sdk's idiom for streamed output and what a caller
  reads as the result; the history keeps the caller's messages and the
  agent's input-required messages, never the streamed text (a snapshot must
  not repeat what the artifacts hold); every other CAP event without an A2A
  equivalent is a *CAP data part* (``frames.cap_part_metadata``: ``data`` =
  the event in CAP wire form, ``metadata["cap.kind"]``) in a ``working``
  status message; ``cap.artifact`` is an artifact update; an ask or a
  permission waiting on a human is an ``input-required`` status whose message
  carries its prompt as text and the request as a CAP data part; the turn's
  end is a terminal status carrying the turn's ``cap.usage`` as a CAP data
  part (CAP core §11.3).
* P7 ``cap.pty.raw_bytes`` updates are marked ``raw``: only subscribers that
  asked for them (``?include_raw=1`` or the ``cap.include_raw`` request
  metadata) get them, and they are never kept in a task's history.
* P8 A status update is *final* when its state is terminal or interrupted
  (input-required): every stream of the task ends after it, in both spellings
  (the draft's ``final: true`` is set on input-required too, unlike a2a-sdk).
* P9 Updates are numbered per task (0, 1, 2 …) and kept, so a subscriber that
  resubscribes (``tasks/resubscribe`` / ``SubscribeToTask``) gets the task's
  snapshot and then every later update, none twice; ``Last-Event-ID`` resumes
  after a number instead.  Subscribing to a terminal task is -32004, as a2a-sdk does.
* P10 A session that ends (failed, cancelled, closed) fails or cancels its
  active task and ends the context: later messages to it are refused (-32004).

Mapping of one envelope of the session's stream (``T`` = the armed task):

================================  =====================  ===============================
event                             T's state              update
================================  =====================  ===============================
``input.injected`` a2a:T          (armed)                —
``session.working``               working                status working (if it changed)
``cap.text_chunk`` assistant      —                      artifact (msg id), text appended
``cap.artifact``                  —                      artifact (kept in ``artifacts``)
``cap.usage``                     (kept for the end)     —
``cap.ask_user``, ``…request``    (kept until decided)   —
``permission.decided`` by policy  —                      status working, data part
``session.input_required``        input-required         status input-required, final
``session.turn_ended``            completed | canceled   status (usage data part), final
                                  | failed
``session.failed`` / ``…``        failed | canceled      status, final; context ended
other CAP events, warnings        —                      status working, data part
anything else                     —                      —
================================  =====================  ===============================
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime

import attrs
import msgspec

from trio_cap.actors.bindings.a2a.frames import cap_part_metadata
from trio_cap.actors.bindings.a2a.publisher_values import (
    DECISION_WORDS,
    INVALID_PARAMS,
    SOURCE_PREFIX,
    TASK_NOT_CANCELABLE,
    TASK_NOT_FOUND,
    UNSUPPORTED_OPERATION,
    A2aArtifact,
    Action,
    Answer,
    CancelTurn,
    DataPart,
    Decide,
    Inbound,
    Inject,
    Message,
    Part,
    Plan,
    RpcFault,
    StartSession,
    Status,
    TextPart,
    Update,
)
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    TERMINAL_EVENTS,
    Artifact,
    AskAnswered,
    AskUser,
    CapError,
    CapSessionReady,
    Event,
    InputInjected,
    PermissionDecided,
    PermissionRequest,
    PtyRawBytes,
    SessionCancelled,
    SessionFailed,
    SessionInputRequired,
    SessionTurnEnded,
    SessionWarning,
    SessionWorking,
    TextChunk,
    Usage,
)

_STOP_STATES = {"cancelled": "canceled", "error": "failed"}
_TERMINAL = frozenset({"completed", "canceled", "failed", "rejected"})
_INTERRUPTED = frozenset({"input-required", "auth-required"})
_encoder = msgspec.json.Encoder()


# ---- state --------------------------------------------------------------------------------


@attrs.define(eq=False)
class TextArtifact:
    """A streamed agent message as an A2A artifact: one text part per ``cap.text_chunk``
    (P6), so a snapshot's parts line up with the appended updates a subscriber saw."""

    artifact_id: str
    pieces: list[str]

    def artifact(self) -> A2aArtifact:
        return A2aArtifact(artifact_id=self.artifact_id, name="response",
                           parts=tuple(TextPart(p) for p in self.pieces))


@attrs.define(eq=False)
class Task:
    id: str
    context_id: str
    owner: str
    state: str = "submitted"
    status: Status = attrs.field(factory=lambda: Status("submitted"))
    history: list[Message] = attrs.field(factory=list)
    artifacts: list[A2aArtifact | TextArtifact] = attrs.field(factory=list)
    updates: list[Update] = attrs.field(factory=list)
    input_seq: int | None = None
    waiting: Event | None = None
    """The cap.ask_user / cap.permission.request a human must answer (input-required)."""
    requests: dict[str, Event] = attrs.field(factory=dict)
    usage: Usage | None = None
    texts: dict[str, TextArtifact] = attrs.field(factory=dict)
    last_error: str | None = None

    @property
    def terminal(self) -> bool:
        return self.state in _TERMINAL

    def all_artifacts(self) -> list[A2aArtifact]:
        return [a.artifact() if isinstance(a, TextArtifact) else a for a in self.artifacts]

    @property
    def interrupted(self) -> bool:
        return self.state in _INTERRUPTED


@attrs.define(eq=False)
class Context:
    id: str
    owner: str
    tasks: list[str] = attrs.field(factory=list)
    active: str | None = None
    ended: str | None = None
    """Why the session ended (no more tasks), or None while it lives."""


def iso(at: float) -> str:
    """An envelope's time as A2A's ISO-8601 UTC timestamp (millisecond precision, ``Z``)."""
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def cap_data(event: Event) -> DataPart:
    """A CAP event as a CAP data part (CAP core §11.3): its wire form, ``metadata["cap.kind"]``."""
    kind = event.__struct_config__.tag
    data = msgspec.json.decode(_encoder.encode(event))
    return DataPart(data=data, metadata=cap_part_metadata(str(kind)))


class PublisherMachine:
    """Every context and task of one server, and the rules above."""

    def __init__(self, new_id: Callable[[str], str]) -> None:
        self._new_id = new_id
        self.contexts: dict[str, Context] = {}
        self.tasks: dict[str, Task] = {}

    # ---- lookups that never reveal another caller's ids (P2) ---------------------------

    def task_for(self, owner: str, task_id: str) -> Task | RpcFault:
        task = self.tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None or task.owner != owner:
            return RpcFault(TASK_NOT_FOUND, f"task {task_id!r} not found", "TASK_NOT_FOUND")
        return task

    # ---- a message (P1, P3, P4) ----------------------------------------------------------

    def send(self, owner: str, message: Inbound) -> Plan | RpcFault:
        if message.task_id:
            return self._follow_up(owner, message)
        if message.context_id:
            context = self.contexts.get(message.context_id)
            if context is None or context.owner != owner:
                return RpcFault(INVALID_PARAMS, f"unknown contextId {message.context_id!r}: "
                                "omit contextId to start a new conversation")
            if context.ended is not None:
                return RpcFault(UNSUPPORTED_OPERATION, f"context {context.id} has ended "
                                f"({context.ended}); omit contextId to start a new one",
                                "UNSUPPORTED_OPERATION")
            if context.active is not None:
                active = self.tasks[context.active]
                return RpcFault(UNSUPPORTED_OPERATION, f"context {context.id} has task "
                                f"{active.id} {active.state}: send with its taskId to answer "
                                "it, or cancel it first", "UNSUPPORTED_OPERATION")
            actions: list[Action] = []
        else:
            context = Context(id=self._new_id("ctx"), owner=owner)
            self.contexts[context.id] = context
            actions = [StartSession(context.id)]
        if not message.text.strip():
            return RpcFault(INVALID_PARAMS, "the message has no text to send to the agent")
        task = Task(id=self._new_id("task"), context_id=context.id, owner=owner)
        self.tasks[task.id] = task
        context.tasks.append(task.id)
        context.active = task.id
        task.history.append(self._user_message(message, task))
        actions.append(Inject(context.id, task.id, message.text))
        return Plan(task.id, context.id, 0, tuple(actions))

    def _follow_up(self, owner: str, message: Inbound) -> Plan | RpcFault:
        task = self.task_for(owner, message.task_id or "")
        if isinstance(task, RpcFault):
            return task
        if message.context_id and message.context_id != task.context_id:
            return RpcFault(INVALID_PARAMS, f"task {task.id} belongs to context "
                            f"{task.context_id}, not {message.context_id}")
        if task.terminal:
            return RpcFault(UNSUPPORTED_OPERATION, f"task {task.id} is {task.state}: send a "
                            "new message without taskId (same contextId) to continue",
                            "UNSUPPORTED_OPERATION")
        waiting = task.waiting
        if waiting is None:
            return RpcFault(UNSUPPORTED_OPERATION, f"task {task.id} is {task.state} and waits "
                            "for no input; wait for it to end or cancel it",
                            "UNSUPPORTED_OPERATION")
        action = _reply_to(waiting, message, task.context_id)
        if isinstance(action, RpcFault):
            return action
        task.history.append(self._user_message(message, task))
        return Plan(task.id, task.context_id, len(task.updates), (action,))

    @staticmethod
    def _user_message(message: Inbound, task: Task) -> Message:
        parts: list[Part] = [TextPart(message.text)] if message.text else []
        parts.extend(DataPart(data=d) for d, _ in message.data)
        return Message("user", message.message_id, tuple(parts), task.id, task.context_id)

    # ---- cancel, subscribe -----------------------------------------------------------------

    def cancel(self, owner: str, task_id: str) -> CancelTurn | Task | RpcFault:
        """A CancelTurn for the shell, or the task itself when it is already over."""
        task = self.task_for(owner, task_id)
        if isinstance(task, RpcFault):
            return task
        if task.terminal:
            return RpcFault(TASK_NOT_CANCELABLE, f"task {task.id} is {task.state} and can no "
                            "longer be canceled", "TASK_NOT_CANCELABLE")
        return CancelTurn(task.context_id, task.id)

    def subscribe(self, owner: str, task_id: str) -> Task | RpcFault:
        task = self.task_for(owner, task_id)
        if isinstance(task, RpcFault):
            return task
        if task.terminal:
            return RpcFault(UNSUPPORTED_OPERATION, f"task {task.id} is {task.state}: there "
                            "is nothing left to stream (tasks/get returns it)",
                            "UNSUPPORTED_OPERATION")
        return task

    # ---- failures the shell reports ------------------------------------------------------

    def fail_task(self, task_id: str, message: str, at: float,
                  state: str = "failed") -> list[Update]:
        """The session could not start, or refused the input: the task ends with why."""
        task = self.tasks[task_id]
        if task.terminal:
            return []
        return self._finish(task, state, at, [TextPart(message)], end_context=False)

    def end_context(self, context_id: str, reason: str, at: float) -> list[Update]:
        context = self.contexts[context_id]
        if context.ended is None:
            context.ended = reason
        if context.active is None:
            return []
        task = self.tasks[context.active]
        return self._finish(task, "failed", at, [TextPart(reason)], end_context=True)

    # ---- the session's stream (P5, P6, P10) -----------------------------------------------

    def on_envelopes(self, context_id: str, envelopes: Iterable[Envelope]) -> list[Update]:
        context = self.contexts.get(context_id)
        if context is None:
            return []
        out: list[Update] = []
        for env in envelopes:
            self._one(context, env, out)
        return out

    def _one(self, context: Context, env: Envelope, out: list[Update]) -> None:
        event = env.event
        task = self.tasks[context.active] if context.active is not None else None
        if isinstance(event, TERMINAL_EVENTS):
            context.ended = ending(event)
            if task is not None and not task.terminal:
                state = "canceled" if isinstance(event, SessionCancelled) else "failed"
                text = task.last_error or context.ended
                out.extend(self._finish(task, state, env.at, [TextPart(text)],
                                        end_context=True))
            context.active = None
            return
        if task is None:
            return
        if isinstance(event, InputInjected):
            if task.input_seq is None and event.source == SOURCE_PREFIX + task.id:
                task.input_seq = env.seq
            return
        if task.input_seq is None or task.terminal:
            return
        if env.cause is not None and env.cause != task.input_seq and event.direction == "in":
            return  # a late event of an earlier turn
        self._map(task, event, env, out)

    def _map(self, task: Task, event: Event, env: Envelope, out: list[Update]) -> None:
        at = env.at
        if isinstance(event, SessionWorking):
            task.waiting = None
            if task.state != "working":
                task.state = "working"
                out.append(self._status(task, Status("working", iso(at))))
        elif isinstance(event, TextChunk) and event.channel == "assistant":
            out.append(self._text(task, event))
        elif isinstance(event, Artifact):
            artifact = _artifact(event)
            task.artifacts.append(artifact)
            out.append(self._add(Update(0, task.id, task.context_id, artifact=artifact)))
        elif isinstance(event, Usage):
            task.usage = event
        elif isinstance(event, AskUser | PermissionRequest):
            task.requests[event.ask_id if isinstance(event, AskUser) else event.req_id] = event
        elif isinstance(event, SessionInputRequired):
            request = task.requests.get(event.ref)
            if request is None:
                return
            task.waiting = request
            task.state = "input-required"
            parts = (TextPart(_prompt(request)), cap_data(request))
            message = Message("agent", self._new_id("msg"), parts, task.id, task.context_id)
            task.history.append(message)
            out.append(self._status(task, Status("input-required", iso(at), message),
                                    final=True))
        elif isinstance(event, SessionTurnEnded):
            if env.cause is not None and env.cause != task.input_seq:
                return
            state = _STOP_STATES.get(event.stop_reason, "completed")
            parts: list[Part] = []
            if state == "failed" and task.last_error:
                parts.append(TextPart(task.last_error))
            out.extend(self._finish(task, state, at, parts, end_context=False))
        elif isinstance(event, PermissionDecided | AskAnswered):
            if event.by != "human":  # decided by the policy: say so, nobody is asked
                out.append(self._data(task, event, at))
        elif isinstance(event, PtyRawBytes):
            out.append(self._data(task, event, at, raw=True))
        elif isinstance(event, SessionWarning) or (
            event.direction == "in" and not isinstance(event, CapSessionReady)
        ):
            if isinstance(event, CapError):
                task.last_error = f"{event.code}: {event.message}"
            out.append(self._data(task, event, at))

    def _text(self, task: Task, chunk: TextChunk) -> Update:
        """P6: an agent message streams as the artifact named by its CAP message id, one
        appended text part per chunk (a2a-sdk's idiom for streamed output)."""
        growing = task.texts.get(chunk.message_id)
        if growing is None:
            growing = task.texts[chunk.message_id] = TextArtifact(chunk.message_id, [])
            task.artifacts.append(growing)
        growing.pieces.append(chunk.text)
        piece = A2aArtifact(artifact_id=chunk.message_id, name="response",
                            parts=(TextPart(chunk.text),))
        return self._add(Update(0, task.id, task.context_id, artifact=piece,
                                append=len(growing.pieces) > 1, last_chunk=False))

    def _finish(self, task: Task, state: str, at: float, parts: Sequence[Part],
                end_context: bool) -> list[Update]:
        out: list[Update] = []
        all_parts = list(parts)
        if task.usage is not None:
            all_parts.append(cap_data(task.usage))
        message = None
        if all_parts:
            message = Message("agent", self._new_id("msg"), tuple(all_parts), task.id,
                              task.context_id)
        task.state = state
        task.waiting = None
        out.append(self._status(task, Status(state, iso(at), message), final=True))
        context = self.contexts[task.context_id]
        if context.active == task.id:
            context.active = None
        if end_context and context.ended is None:
            context.ended = state
        return out

    def _data(self, task: Task, event: Event, at: float, raw: bool = False) -> Update:
        message = Message("agent", self._new_id("msg"), (cap_data(event),), task.id,
                          task.context_id)
        return self._status(task, Status("working", iso(at), message), keep=False, raw=raw)

    def _status(self, task: Task, status: Status, *, final: bool = False,
                keep: bool = True, raw: bool = False) -> Update:
        if keep:
            task.status = status
        elif task.status.state != status.state:
            task.status = Status(status.state, status.timestamp)
        return self._add(Update(0, task.id, task.context_id, status=status, final=final,
                                raw=raw))

    def _add(self, update: Update) -> Update:
        """Number the update in its task and keep it there (P9)."""
        task = self.tasks[update.task_id]
        update.index = len(task.updates)
        task.updates.append(update)
        return update


def _reply_to(waiting: Event, message: Inbound, context_id: str) -> Action | RpcFault:
    """P4: the follow-up message as the answer or decision the session waits on."""
    if isinstance(waiting, AskUser):
        for data, kind in message.data:
            if kind == "cap.ask_user.answer" or (kind is None and "value" in data):
                return Answer(context_id, waiting.ask_id, data.get("value"))
        if not message.text:
            return RpcFault(INVALID_PARAMS, "the task waits for an answer: send text, or a "
                            "data part {\"kind\": \"cap.ask_user.answer\", \"value\": …}")
        return Answer(context_id, waiting.ask_id, message.text)
    assert isinstance(waiting, PermissionRequest)
    for data, kind in message.data:
        if kind == "cap.permission.response" or (kind is None and "decision" in data):
            decision = data.get("decision")
            if decision in ("allow_once", "allow_always", "deny"):
                return Decide(context_id, waiting.req_id, decision,
                              str(data.get("reason") or ""))
            return RpcFault(INVALID_PARAMS, f"decision must be allow_once, allow_always or "
                            f"deny, not {decision!r}")
    word = message.text.strip().strip(".!").strip().lower()
    decision = DECISION_WORDS.get(word)
    if decision is None:
        return RpcFault(INVALID_PARAMS, f"the task waits for a permission decision on "
                        f"{waiting.tool}: answer allow, always or deny (or a data part "
                        "{\"kind\": \"cap.permission.response\", \"decision\": …}), "
                        f"not {message.text[:80]!r}")
    return Decide(context_id, waiting.req_id, decision, "decided by the A2A caller")


def _prompt(request: Event) -> str:
    if isinstance(request, AskUser):
        return request.prompt
    assert isinstance(request, PermissionRequest)
    what = request.intent.get("command") or request.intent.get("path") or request.intent.get(
        "file_path") or ""
    detail = f" {what}" if what else ""
    return (f"Permission needed: {request.tool}{detail} ({request.scope}, risk "
            f"{request.risk_level}). Answer allow, always or deny.")


def _artifact(event: Artifact) -> A2aArtifact:
    parts: list[Part] = [TextPart(event.content)] if event.content is not None else []
    parts.append(cap_data(Artifact(artifact_id=event.artifact_id, mime_type=event.mime_type,
                                   name=event.name, size=event.size, uri=event.uri,
                                   meta=event.meta)))
    return A2aArtifact(artifact_id=event.artifact_id, name=event.name, parts=tuple(parts),
                       metadata={"mimeType": event.mime_type, **cap_part_metadata(
                           "cap.artifact")})


def ending(event: Event) -> str:
    if isinstance(event, SessionFailed):
        return f"the session failed: {event.code}: {event.message}"
    if isinstance(event, SessionCancelled):
        return f"the session was cancelled: {event.reason}"
    return "the session was closed"


__all__ = ["DECISION_WORDS", "INVALID_PARAMS", "SOURCE_PREFIX", "TASK_NOT_CANCELABLE",
           "TASK_NOT_FOUND", "UNSUPPORTED_OPERATION", "A2aArtifact", "Action", "Answer",
           "CancelTurn", "Context", "DataPart", "Decide", "Inbound", "Inject", "Message", "Part",
           "Plan", "PublisherMachine", "RpcFault", "StartSession", "Status", "Task",
           "TextArtifact", "TextPart", "Update", "cap_data", "ending", "iso"]
