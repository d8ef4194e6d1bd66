"""A fleet run, seen as one agent: the fleet's log in, the events its one client sees out.

``cap agent --fleet`` and ``cap serve a2a --fleet`` put a whole fleet behind one agent
face; the client (an SDK, an ACP editor, an A2A caller) speaks to one agent and never
learns the members' ids, streams or worktrees unless the events name them.  This machine
reads what one run of the fleet logs — the fleet's stream and its members' — and answers
with the CAP events of the face's turn.  No I/O, no Trio, no clock: the shell
(``actors/fleet_face.py``) feeds it envelopes and emits what it returns.

Rules (one line each; :meth:`FaceMachine.observe` keeps them in this order):

* MEMBERS  ``fleet.member`` says which stream is which member and where it works; other
           streams are not the run's and are ignored.
* PLAN     the face's plan is the fleet's master plan (``cap.plan`` on the fleet stream),
           then one entry per message a member is given (the task, a route's result, a
           mediated message): pending when queued, in progress when delivered,
           completed when the turn that took it ended ``end_turn``, cancelled when it
           ended otherwise or was refused; then each member's own latest plan, its
           entries prefixed ``member: `` (not a ``by_subtask`` source's: its entries are
           already master-plan entries).  Each entry's ``_meta`` names the member.
           Every change is a new full ``cap.plan``.
* TEXT     a member's assistant and thought text is relayed with ``_meta`` ``cap.member``
           and its message id prefixed by the member; when the speaker changes, the text
           starts with ``[member] `` (after a blank line if someone spoke before), so a
           client that shows only text still knows who speaks.
* TOOLS    a member's tool calls are relayed with ids prefixed by the member (two members
           both have a ``call_1``) and paths made absolute (members work in their own
           directories); ``_meta`` ``cap.member``.
* ASK      a member's permission request or ask is relayed only once its session waits on
           a person (``session.input_required``; one its policy decided never reaches the
           client), renumbered by the shared :class:`~trio_cap.actors.relay.Relay`, with
           ``_meta`` ``cap.member``, ``cap.call_id`` (the member's call it is about) and an
           ACP title that starts with the member's id.
* USAGE    members' ``cap.usage`` is summed; :meth:`FaceMachine.closing` reports it once.
* ERRORS   a member's ``cap.error`` is relayed with the member's id in front of its message;
           the fleet's diff artifacts are relayed as they are (their ``_meta`` names the
           member).
* END      ``fleet.completed`` / ``fleet.failed`` ends the run: :attr:`FaceMachine.ended`;
           the closing message is the last member turn's whole final text (the fleet's
           answer), or why the fleet failed.
"""

from __future__ import annotations

from typing import Any

from trio_cap.actors.bindings.base import CALL_ID, MEMBER
from trio_cap.actors.relay import Relay
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    TERMINAL_EVENTS,
    Artifact,
    AskAnswered,
    AskUser,
    CapError,
    Event,
    FleetBudgetRefused,
    FleetCompleted,
    FleetFailed,
    FleetMember,
    FleetMessageConsumed,
    FleetMessageDelivered,
    FleetMessageQueued,
    FleetMessageRefused,
    PermissionDecided,
    PermissionRequest,
    Plan,
    PlanEntry,
    PlanStatus,
    SessionInputRequired,
    SessionTurnEnded,
    SessionWorking,
    TextChunk,
    Thought,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

ASSIGNED_TO = "cap.assigned_to"
SUMMARY = 80
"""Characters of a message's first line in its plan entry."""


class FaceMachine:
    def __init__(self, relay: Relay, fleet: str, planners: frozenset[str] = frozenset()) -> None:
        self.relay = relay
        self.planners = planners
        """Members whose own plan a ``by_subtask`` route adopts into the master plan."""
        self.own: dict[str, tuple[PlanEntry, ...]] = {}
        """member → its own latest plan"""
        self.fleet = fleet
        self.stream = f"fleet:{fleet}"
        self.members: dict[str, tuple[str, str]] = {}
        """session id → (member id, its working directory)"""
        self.master: tuple[PlanEntry, ...] = ()
        self.messages: dict[str, PlanEntry] = {}
        self.asked: dict[tuple[str, str], PermissionRequest | AskUser] = {}
        """(session id, the member's own id) → its question, until a person must answer it."""
        self.calls: dict[str, str] = {}
        """session id → the relayed id of its last tool call"""
        self.text: dict[str, list[str]] = {}
        self.answer = ""
        """The whole final text of the last member turn that ended ``end_turn``."""
        self.speaker: str | None = None
        self.usage = Usage()
        self.ended = False
        self.failure: str | None = None
        self.seen = 0
        """The last seq observed."""

    # ---- input -------------------------------------------------------------------------
    def observe(self, env: Envelope) -> list[Event]:
        self.seen = env.seq
        if env.stream == self.stream:
            return self._fleet(env.event)
        member = self.members.get(env.stream)
        if member is None or self.ended:
            return []
        return self._member(env.stream, member[0], member[1], env.event)

    def closing(self, message_id: str) -> list[Event]:
        """The face's own last words of the turn: the fleet's answer (or why it failed)
        and the usage of every member."""
        text = (self.answer if self.failure is None
                else f"The fleet {self.fleet} failed: {self.failure}")
        out: list[Event] = []
        if text:
            out.append(TextChunk(message_id=message_id, text=("\n\n" if self.speaker else "")
                                 + text))
        if self.failure is not None:
            out.append(CapError(code="fleet_failed", message=self.failure))
        return [*out, self.usage]

    # ---- the fleet's stream ------------------------------------------------------------
    def _fleet(self, event: Event) -> list[Event]:
        kind = type(event)
        if kind is FleetMember:
            self.members[event.session_id] = (event.member, event.cwd)
            self.text[event.session_id] = []
        elif kind is Plan:
            self.master = event.entries
            return [self._plan()]
        elif kind is FleetMessageQueued:
            if event.via == "subtask":  # already a master-plan entry
                return []
            first = event.text.strip().splitlines()[0] if event.text.strip() else ""
            if len(first) > SUMMARY:
                first = first[: SUMMARY - 1] + "…"
            self.messages[event.message_id] = PlanEntry(
                id=event.message_id, content=f"{event.target}: {first}",
                meta={ASSIGNED_TO: f"cap://{self.fleet}.{event.target}", MEMBER: event.target,
                      "cap.via": event.via})
            return [self._plan()]
        elif kind is FleetMessageDelivered:
            return self._status(event.message_id, "in_progress")
        elif kind is FleetMessageConsumed:
            return self._status(event.message_id, "completed" if event.stop_reason == "end_turn"
                                else "cancelled")
        elif kind is FleetMessageRefused or kind is FleetBudgetRefused:
            return self._status(event.message_id, "cancelled") if event.message_id else []
        elif kind is Artifact:
            return [event]
        elif kind is FleetCompleted:
            self.ended = True
        elif kind is FleetFailed:
            self.ended = True
            self.failure = event.reason
        return []

    def _status(self, message_id: str, status: PlanStatus) -> list[Event]:
        entry = self.messages.get(message_id)
        if entry is None or entry.status == status:
            return []
        self.messages[message_id] = PlanEntry(id=entry.id, content=entry.content, status=status,
                                              meta=entry.meta)
        return [self._plan()]

    def _plan(self) -> Plan:
        own = tuple(PlanEntry(id=f"{member}.{e.id}", content=f"{member}: {e.content}",
                              status=e.status, priority=e.priority,
                              meta={**(e.meta or {}), MEMBER: member})
                    for member, entries in self.own.items() for e in entries)
        return Plan(entries=(*self.master, *self.messages.values(), *own))

    # ---- a member's stream -----------------------------------------------------------------
    def _member(self, sid: str, member: str, cwd: str, event: Event) -> list[Event]:
        kind = type(event)
        meta = {MEMBER: member}
        if kind is TextChunk or kind is Thought:
            if kind is TextChunk and event.channel == "system":
                return []
            if kind is TextChunk and event.channel == "assistant":
                self.text[sid].append(event.text)
            text = event.text
            if self.speaker != member:
                text = f"{'' if self.speaker is None else chr(10) * 2}[{member}] {text.lstrip()}"
                self.speaker = member
            channel = "thought" if kind is Thought else event.channel
            return [TextChunk(message_id=f"{member}.{event.message_id}", text=text,
                              channel=channel, meta=meta)]
        if kind is ToolCallStart:
            call_id = f"{member}.{event.call_id}"
            self.calls[sid] = call_id
            return [self.relay.tool_start(event, cwd, call_id=call_id,
                                          meta={**(event.meta or {}), **meta})]
        if kind is ToolCallDelta:
            return [ToolCallDelta(call_id=f"{member}.{event.call_id}",
                                  output_chunk=event.output_chunk, meta=meta)]
        if kind is ToolCallEnd:
            return [ToolCallEnd(call_id=f"{member}.{event.call_id}", output=event.output,
                                is_error=event.is_error, duration_ms=event.duration_ms,
                                meta={**(event.meta or {}), **meta})]
        if kind is Plan:
            if member in self.planners:
                return []
            self.own[member] = event.entries
            return [self._plan()]
        if kind is PermissionRequest:
            self.asked[(sid, event.req_id)] = event
        elif kind is AskUser:
            self.asked[(sid, event.ask_id)] = event
        elif kind is PermissionDecided:
            self.asked.pop((sid, event.req_id), None)
        elif kind is AskAnswered:
            self.asked.pop((sid, event.ask_id), None)
        elif kind is SessionInputRequired:
            return self._question(sid, member, cwd, event.ref)
        elif kind is Usage:
            self._add(event)
        elif kind is CapError:
            return [CapError(code=event.code, message=f"{member}: {event.message}",
                             retryable=event.retryable, details=event.details, meta=meta)]
        elif kind is SessionWorking:
            self.text[sid] = []
        elif kind is SessionTurnEnded and event.stop_reason == "end_turn":
            self.answer = "".join(self.text[sid]).strip()
        elif isinstance(event, TERMINAL_EVENTS):
            self.relay.forget(sid)
        return []

    def _question(self, sid: str, member: str, cwd: str, ref: str) -> list[Event]:
        asked = self.asked.pop((sid, ref), None)
        if isinstance(asked, PermissionRequest):
            meta: dict[str, Any] = {**(asked.meta or {}), MEMBER: member}
            call = self.calls.get(sid)
            if call is not None:
                meta[CALL_ID] = call
            acp = dict(meta.get("acp") or {})
            acp["title"] = f"{member}: {acp.get('title') or _title(asked)}"
            meta["acp"] = acp
            return [self.relay.permission(asked, sid, cwd, meta=meta)]
        if isinstance(asked, AskUser):
            relayed = self.relay.ask(asked, sid, cwd, meta={**(asked.meta or {}),
                                                            MEMBER: member})
            return [AskUser(ask_id=relayed.ask_id, prompt=f"[{member}] {relayed.prompt}",
                            form=relayed.form, timeout_seconds=relayed.timeout_seconds,
                            meta=relayed.meta)]
        return []

    def _add(self, u: Usage) -> None:
        t = self.usage
        self.usage = Usage(
            model_id=t.model_id or u.model_id,
            input_tokens=t.input_tokens + u.input_tokens,
            output_tokens=t.output_tokens + u.output_tokens,
            cache_read_tokens=t.cache_read_tokens + u.cache_read_tokens,
            cache_creation_tokens=t.cache_creation_tokens + u.cache_creation_tokens,
            thinking_tokens=t.thinking_tokens + u.thinking_tokens,
            cost_usd_estimate=round(t.cost_usd_estimate + u.cost_usd_estimate, 10),
            duration_ms=t.duration_ms + u.duration_ms)


def _title(event: PermissionRequest) -> str:
    """What the request is about, in a few words: the tool and its path or command."""
    for key in ("command", "path", "file_path"):
        value = event.intent.get(key)
        if isinstance(value, str) and value:
            return f"{event.tool} {value}"
    return event.tool
