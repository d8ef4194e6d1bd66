"""The fleet machine's mediated messages (rules QUEUE, GATE, WAKE, MEDIATE, REPLY).

Split from :mod:`.machine` so the machine module keeps its events in, budgets, turn
ends, hand-offs, routes and plan while one job lives here: a member's input as a
message, queued, taken by an idle member (or mid-turn, WAKE), delivered, and a turn's
own messages to other members and replies checked and queued.  A mixin of
:class:`.machine.FleetMachine`: the annotations below are the machine's state it reads
and writes, the stubs the machine's methods it calls.  A member's state (its queue, the
message in flight) is declared here because these rules move it most.

Pure: the standard library, ``attrs``, ``events/`` and the fleet's model and outputs only
(a machine helper, DESIGN §2a).
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

import attrs

from trio_cap.actors.fleet.model import Fleet
from trio_cap.actors.fleet.outputs import Deliver, Emit, Output
from trio_cap.events.kinds import (
    Artifact,
    FleetBudgetRefused,
    FleetMessageDelivered,
    FleetMessageQueued,
    FleetMessageRefused,
    PlanEntry,
    PlanStatus,
)

DIRECTIVE = re.compile(r"^[ \t]*@cap://(?P<target>[A-Za-z0-9_.:-]+)[ \t]+(?P<text>\S.*)$", re.M)


@attrs.define
class _Message:
    id: str
    source: str
    target: str
    text: str
    via: str
    hops: int = 0
    entry: str | None = None
    reply_to: str | None = None
    owes: str | None = None
    """The mediated message whose answer the turn that takes this one sends back (REPLY)."""


@attrs.define
class _Member:
    id: str
    session_id: str
    budget: float | None
    queue: deque[str] = attrs.field(factory=deque)
    status: str = "idle"
    """idle | working | paused (rate-limited) | ended"""
    current: str | None = None
    text: list[str] = attrs.field(factory=list)
    plan: tuple[PlanEntry, ...] = ()
    spent: float = 0.0
    cancel_asked: str | None = None
    """Why the fleet cancelled its turn in flight (then a cancelled stop is no failure)."""
    limited: bool = False
    """The turn in flight hit a rate limit."""
    said: float | None = None
    """Its retry-after, when the error said."""
    limits: int = 0
    """Rate limits in a row."""
    last_delay: float | None = None
    correction: str | None = None
    """A person's correction waiting for the interrupted turn to end."""
    writes: dict[str, list[str]] = attrs.field(factory=dict)
    """Write tool calls in flight: call id → the paths they name."""
    artifacts: list[Artifact] = attrs.field(factory=list)
    """This turn's own ``cap.artifact`` events."""
    inflight: deque[str] = attrs.field(factory=deque)
    """Messages injected mid-turn (``queued_input``), behind ``current``: their turns run
    next, in this order."""
    collecting: bool = False
    """Its turn ended and its hand-off waits for its diff: no next turn before that."""
    section: str = ""
    """The artifacts part of its last turn's hand-offs."""
    addressed: list[tuple[tuple[str, tuple[Any, ...]], list[str]]] = attrs.field(factory=list)
    """This turn's text that ``_meta`` ``cap.message_to`` addressed: runs of chunks with
    one (message id, targets), so a message streamed in pieces is delivered whole, once."""


class Messages:
    """The messages half of the fleet machine (a mixin of :class:`.machine.FleetMachine`)."""

    fleet: Fleet
    queued_input: set[str]
    members: dict[str, _Member]
    by_stream: dict[str, str]
    messages: dict[str, _Message]
    failures: list[str]
    _count: int

    def _over_budget(self, member: _Member) -> tuple[Any, float, float] | None:
        raise NotImplementedError

    def _entry_status(self, out: list[Output], msg: _Message, status: PlanStatus,
                      cause: int | None) -> None:
        raise NotImplementedError

    def _maybe_finish(self, out: list[Output]) -> None:
        raise NotImplementedError

    def delivered(self, message_id: str, input_seq: int, turn: int | None) -> list[Output]:
        msg = self.messages[message_id]
        return [Emit(FleetMessageDelivered(message_id=message_id, target=msg.target,
                                           input_seq=input_seq, turn=turn), input_seq)]

    def undeliverable(self, message_id: str, reason: str) -> list[Output]:
        """The session would not take the inject (it ended, or its own gate refused)."""
        msg = self.messages[message_id]
        member = self.members[msg.target]
        out: list[Output] = [Emit(FleetMessageRefused(
            source=msg.source, target=msg.target, text=msg.text, reason=reason,
            message_id=msg.id, hops=msg.hops, reply_to=msg.reply_to))]
        self.failures.append(f"{msg.target} did not take its input: {reason}")
        if member.current == message_id:
            member.current = None
            member.correction = None  # no turn took it: nothing to correct
            member.status = "ended" if member.status == "ended" else "idle"
        elif message_id in member.inflight:
            member.inflight.remove(message_id)
        self._entry_status(out, msg, "cancelled", None)
        self._pump(out)
        return out

    def _queue(self, out: list[Output], source: str, target: str, text: str, via: str,
               cause: int | None, *, hops: int = 0, entry: str | None = None,
               front: bool = False, replaces: str | None = None,
               reply_to: str | None = None, owes: str | None = None) -> None:
        self._count += 1
        msg = _Message(f"m{self._count}", source, target, text, via, hops, entry, reply_to,
                       owes)
        if via == "message" and reply_to is None:
            msg.owes = msg.id  # a reply is not itself answered: no ping-pong
        self.messages[msg.id] = msg
        if front:
            self.members[target].queue.appendleft(msg.id)
        else:
            self.members[target].queue.append(msg.id)
        out.append(Emit(FleetMessageQueued(message_id=msg.id, source=source, target=target,
                                           text=text, via=via, hops=hops, entry=entry,
                                           replaces=replaces, reply_to=reply_to), cause))

    def _pump(self, out: list[Output]) -> None:
        """GATE: every idle member with input takes its next message; then FINISH."""
        for member in self.members.values():
            while member.queue and not member.collecting and (
                    member.status == "idle" or self._mid_turn(member)):
                msg = self.messages[member.queue.popleft()]
                refusal = self._over_budget(member)
                if refusal is not None:
                    scope, spent, budget = refusal
                    out.append(Emit(FleetBudgetRefused(member=member.id, scope=scope,
                                                       spent_usd=spent, budget_usd=budget,
                                                       message_id=msg.id)))
                    self.failures.append(f"{member.id}: {scope} budget ${budget:g} spent")
                    self._entry_status(out, msg, "cancelled", None)
                    continue
                if member.status == "working":
                    member.inflight.append(msg.id)
                else:
                    self._begin(member, msg.id)
                out.append(Deliver(msg.id, member.id, msg.text))
        self._maybe_finish(out)

    def _mid_turn(self, member: _Member) -> bool:
        """WAKE: a working member takes its next message at once when its session queues
        input and nothing is asked of the turn in flight (a cancel, a correction, a rate
        limit's pause would have to decide what the queued turn is)."""
        return member.status == "working" and member.id in self.queued_input \
            and member.cancel_asked is None and member.correction is None \
            and not member.limited

    def _begin(self, member: _Member, message_id: str) -> None:
        member.status = "working"
        member.current = message_id
        member.text = []
        member.addressed = []
        member.artifacts = []
        member.plan = ()
        member.cancel_asked = None
        member.limited, member.said = False, None

    def _mediate(self, out: list[Output], member: _Member, text: str, msg: _Message | None,
                 seq: int, addressed: list[tuple[tuple[str, tuple[Any, ...]], list[str]]],
                 ) -> None:
        """MEDIATE: the turn's ``@cap://`` lines, then its ``_meta`` ``cap.message_to``
        messages — two spellings of one request, so one set of refusals and one delivery."""
        hops = (msg.hops if msg is not None else 0) + 1  # a hand-off keeps its chain's hops
        owes = self.messages[msg.owes] if msg is not None and msg.owes is not None else None
        answers = (owes.source, owes.id) if owes is not None else None
        for match in DIRECTIVE.finditer(text):
            self._send(out, member, match["target"], match["text"].strip(), hops, seq, answers)
        for (_message_id, targets), chunks in addressed:
            body = "".join(chunks).strip()
            for target in targets:
                name = target.removeprefix("cap://") if isinstance(target, str) else repr(target)
                self._send(out, member, name, body, hops, seq, answers)

    def _reply(self, out: list[Output], member: _Member, text: str, msg: _Message, seq: int,
               mark: int) -> None:
        """REPLY: the turn that took a mediated message sends its whole final text back to
        the sender — unless this turn's own lines or routes already addressed the sender
        (then that was the answer, and a second copy would only double its input)."""
        owed = self.messages[msg.owes]  # type: ignore[index]
        for o in out[mark:]:
            if isinstance(o, Emit) and type(o.event) in (FleetMessageQueued,
                                                         FleetMessageRefused) \
                    and o.event.target == owed.source:  # type: ignore[attr-defined]
                return
        self._send(out, member, owed.source, text.strip(), msg.hops + 1, seq,
                   (owed.source, owed.id), via="reply")

    def _send(self, out: list[Output], member: _Member, target: str, body: str, hops: int,
              seq: int, answers: tuple[str, str] | None = None, via: str = "message") -> None:
        """``answers``: (sender, message id) of the mediated message this turn took; a
        message back to that sender is marked a reply to it."""
        target = self.by_stream.get(target, target)
        reply_to = answers[1] if answers is not None and answers[0] == target else None
        reason = None
        if target not in self.members:
            reason = "unknown_target"
        elif target == member.id:
            reason = "self"
        elif self.members[target].status == "ended":
            reason = "target_ended"
        elif hops > self.fleet.hop_limit:
            reason = "hop_limit"
        elif not body:
            reason = "empty"
        if reason is not None:
            out.append(Emit(FleetMessageRefused(source=member.id, target=target, text=body,
                                                reason=reason, hops=hops, reply_to=reply_to),
                            seq))
            return
        said = f"Message from {member.id} (reply)" if via == "reply" else \
            f"Message from {member.id}"
        self._queue(out, member.id, target, f"{said}: {body}", via, seq, hops=hops,
                    reply_to=reply_to)
