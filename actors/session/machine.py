"""The CAP session lifecycle as a sans-io state machine.

No I/O, no clock, no randomness: the machine takes what happened (a command
the log has already accepted, a batch of agent events the log already holds, a
turn end, the agent's disappearance) and answers with outputs for its Trio
shell to carry out in order — events to append (:class:`Emit`), frames to log
and send (:class:`Send`, :class:`CancelAgent`) and the end of the connection
(:class:`Close`).  Fed the same inputs it produces the same outputs, which is
what replay relies on.

States and what each accepts::

    CREATED ─start─► STARTING ─cap.session.ready─► READY ─inject─► WORKING ⇄ INPUT_REQUIRED
                                                     ▲                │
                                                     └── last turn ◄──┘
                                                         in flight ended

Input that arrives mid-turn is sent at once when the agent can queue it
(manifest ``capabilities.queued_input``), so several turns may be in flight;
otherwise it is held until the turn ends.
    any non-terminal ─► COMPLETED | CANCELLED | FAILED
"""

from __future__ import annotations

import enum
import json
from collections import deque
from collections.abc import Sequence
from typing import Any

import msgspec

from trio_cap.actors.bindings.base import AGENT_RISK
from trio_cap.actors.risk import RISK_ORDER, max_risk, rate
from trio_cap.actors.session.policy import Answerer, PermissionPolicy
from trio_cap.actors.session.raw_budget import DEFAULT_RAW_BUDGET, RawBudget
from trio_cap.events.forms import answer_problem, is_object_form
from trio_cap.events.kinds import (
    AgentRaw,
    AskAnswered,
    AskUser,
    AskUserAnswer,
    CancelRequested,
    CancelScope,
    CapError,
    CapSessionReady,
    ContentBlock,
    Event,
    InputInjected,
    PermissionDecided,
    PermissionPathsResolved,
    PermissionRequest,
    PermissionResponse,
    PtyRawBytes,
    RiskLevel,
    SessionCancelled,
    SessionCompleted,
    SessionConfig,
    SessionCreated,
    SessionFailed,
    SessionIdle,
    SessionInputRequired,
    SessionReady,
    SessionStarting,
    SessionTurnEnded,
    SessionWarning,
    SessionWorking,
    StopReason,
    Usage,
    UserInputInject,
)

AUTO_ANSWER = "policy:auto_answer"
CARRIED = "policy:resume"
"""``ask.answered`` ``by``: a re-run turn's question answered as it was before the crash."""
"""``ask.answered`` ``by`` of an answer the machine's answerer gave (a ``policy:`` one: the
machine's own output, which a replay re-derives from the logged answer)."""


class State(enum.Enum):
    CREATED = "created"
    STARTING = "starting"
    READY = "ready"
    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"

    __hash__ = object.__hash__
    """Members are singletons compared by identity: Enum's own hash (of the name, in Python)
    cost a call every time a state was looked up in TERMINAL / BUSY (each replayed event)."""


TERMINAL = frozenset({State.COMPLETED, State.CANCELLED, State.FAILED})
BUSY = frozenset({State.WORKING, State.INPUT_REQUIRED})

_ALL_COMMANDS = frozenset({InputInjected, CancelRequested, PermissionDecided, AskAnswered})
ACCEPTS: dict[State, frozenset[type[Event]]] = {
    State.CREATED: frozenset({InputInjected, CancelRequested}),
    State.STARTING: frozenset({InputInjected, CancelRequested}),
    State.READY: frozenset({InputInjected, CancelRequested}),
    State.WORKING: _ALL_COMMANDS,
    State.INPUT_REQUIRED: _ALL_COMMANDS,
    State.COMPLETED: frozenset(),
    State.CANCELLED: frozenset(),
    State.FAILED: frozenset(),
}
"""The explicit table of which commands each state takes; the rest are refused."""


class Emit(msgspec.Struct, frozen=True, gc=False):
    """Append these events, caused by ``cause``.

    The outputs are msgspec structs, not attrs classes: a replay check makes a few per
    event (a frozen attrs instance cost ~4× as much to build, ~5% of ``cap replay
    --check``); untracked by the cycle collector, as the events they carry are (they hold
    only events and plain values: no cycle can go through them)."""

    events: tuple[Event, ...]
    cause: int | None = None


class Send(msgspec.Struct, frozen=True, gc=False):
    """Log this orchestrator → agent frame, then send it."""

    frame: Event
    cause: int | None = None


class CancelAgent(msgspec.Struct, frozen=True, gc=False):
    scope: CancelScope
    reason: str
    cause: int | None = None


class Close(msgspec.Struct, frozen=True, gc=False):
    """The session reached a terminal state: close the connection."""


Output = Emit | Send | CancelAgent | Close

_MAYBE_RAW = frozenset({AgentRaw, PtyRawBytes, CapError})
"""The kinds :class:`RawBudget` may count (``raw_budget._raw_size``; a test holds the two
together): a batch without any is stored whole."""

_INTERESTING = frozenset(
    {CapSessionReady, PermissionRequest, AskUser, Usage, CapError, PermissionPathsResolved}
)


class SessionMachine:
    def __init__(
        self,
        created: SessionCreated,
        config: SessionConfig,
        policy: PermissionPolicy,
        *,
        queued_input: bool = False,
        raw_budget: int = DEFAULT_RAW_BUDGET,
        answerer: Answerer | None = None,
    ) -> None:
        self.created = created
        self.config = config
        self.policy = policy
        self.answerer = answerer
        """Asked first about every ask (a fleet's research auto-answerer); what it cannot
        answer goes on as if it were not there."""
        self.queued_input = queued_input
        """The agent accepts input mid-turn (manifest capabilities.queued_input)."""
        self.session_id = created.session_id
        self.state = State.CREATED
        self.turn = 0
        self.queue: deque[tuple[str, int]] = deque()
        self.pending_permissions: dict[str, int] = {}
        self.pending_asks: dict[str, AskUser] = {}
        self.answered: list[tuple[int, AskUser, Any, str]] = []
        """(turn, the ask, its answer, the ask's id) for each ask answered by a person
        or the auto-answerer in the turns in flight: what a crash would cut.  The ask, not
        its question's key: the key is needed only when a crash is carried over (rare), and
        making it was a JSON encoding per answered ask."""
        self.carried: dict[str, tuple[Any, str]] = {}
        """A resume's answers (:meth:`carry_answers`): question → (answer, the first ask's
        id), given to the re-run turn's same question without asking again."""
        self.cost_usd = 0.0
        self.in_flight: deque[tuple[int, int]] = deque()
        """(turn, seq of its input) for every turn sent and not yet ended, oldest first."""
        self.turn_error: CapError | None = None
        self.last_stop: StopReason | None = None
        self.last_error: CapError | None = None
        self._budget_cancelled = False
        self.raw = RawBudget(raw_budget)
        """Raw agent output stored so far; past the budget it is counted, not stored."""
        self.resolved: dict[str, tuple[str, ...]] = {}
        """req_id -> workspace paths the actor found resolve outside (permission.paths_resolved)."""
        self.timed_out: CapError | None = None
        """Set when the oldest turn in flight ran out of time: it ends as failed."""

    # ---- lifecycle --------------------------------------------------------
    @property
    def turn_cause(self) -> int | None:
        """The input that caused what the agent does now: the oldest turn in flight."""
        return self.in_flight[0][1] if self.in_flight else None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    def create(self) -> list[Output]:
        return [Emit((self.created,))]

    def start(self, binding: str | None = None) -> list[Output]:
        """Config first: nothing else goes to the agent before it."""
        if self.state is not State.CREATED:
            return []
        self.state = State.STARTING
        out: list[Output] = []
        if self.policy.name == "bypass":
            out.append(
                Emit(
                    (
                        SessionWarning(
                            code="permissions_bypassed",
                            message="policy 'bypass': the agent runs in its own no-prompt "
                            "mode and its tool calls are not reviewed",
                        ),
                    )
                )
            )
        out += [Emit((SessionStarting(binding=binding),)), Send(self.config)]
        return out

    def close(self) -> list[Output]:
        """The owner is done with the session."""
        if self.terminal:
            return []
        if self.state in BUSY:
            return self._end(
                SessionCancelled(reason="closed while a turn was running"), cancel=True
            )
        if self.state is State.READY and self.last_stop == "error":
            err = self.last_error
            return self._end(
                SessionFailed(
                    code=err.code if err else "turn_failed",
                    message=err.message if err else "the last turn ended in an error",
                )
            )
        if self.state is State.READY:
            return self._end(SessionCompleted(turns=self.turn))
        return self._end(SessionCancelled(reason="closed before the agent was ready"))

    def fail(self, code: str, message: str) -> list[Output]:
        if self.terminal:
            return []
        return self._end(SessionFailed(code=code, message=message))

    def shutdown(self, reason: str = "orchestrator shut down") -> list[Output]:
        if self.terminal:
            return []
        return self._end(SessionCancelled(reason=reason))

    def time_out(self, code: str, message: str) -> list[Output]:
        """A turn or idle timer expired (the shell's clock): log why, cancel the turn at the
        agent, and count the turn as failed whatever stop reason the agent then gives."""
        if self.state not in BUSY or not self.in_flight:
            return []
        error = CapError(code=code, message=message)
        self.timed_out = self.turn_error = error
        cause = self.turn_cause
        return [Emit((error,), cause), CancelAgent("current_turn", code, cause)]

    def on_agent_gone(self, reason: str) -> list[Output]:
        if self.terminal:
            return []
        return self._end(SessionFailed(code="agent_died", message=reason))

    def _end(self, event: Event, *, cancel: bool = False) -> list[Output]:
        self.state = {
            SessionCompleted: State.COMPLETED,
            SessionCancelled: State.CANCELLED,
            SessionFailed: State.FAILED,
        }[type(event)]
        self.queue.clear()
        out: list[Output] = []
        dropped = self.raw.final()
        if dropped:
            out.append(Emit(tuple(dropped), self.turn_cause))
        if cancel:
            out.append(CancelAgent("session", "session closed", self.turn_cause))
        out += [Emit((event,), self.turn_cause), Close()]
        return out

    # ---- commands (already accepted into the log) ---------------------------
    def refusal(self, command: Event) -> CapError | None:
        """Why a command cannot be accepted now, as the error event to log; else None."""
        kind = type(command)
        if kind not in ACCEPTS[self.state]:
            if self.terminal:
                return CapError(
                    code="invalid_state",
                    message=f"session {self.session_id} is {self.state.value}; "
                    "it accepts no more commands",
                )
            if kind is PermissionDecided:
                return _unknown_permission(command.req_id)  # type: ignore[attr-defined]
            if kind is AskAnswered:
                return _unknown_ask(command.ask_id)  # type: ignore[attr-defined]
            return CapError(
                code="invalid_state",
                message=f"{kind.__struct_config__.tag} is not accepted while {self.state.value}",
            )
        if kind is PermissionDecided and command.req_id not in self.pending_permissions:  # type: ignore[attr-defined]
            return _unknown_permission(command.req_id)  # type: ignore[attr-defined]
        if kind is AskAnswered:
            ask = self.pending_asks.get(command.ask_id)  # type: ignore[attr-defined]
            if ask is None:
                return _unknown_ask(command.ask_id)  # type: ignore[attr-defined]
            problem = _answer_problem(ask, command.value)  # type: ignore[attr-defined]
            if problem:
                return CapError(code="cap_invalid_answer", message=problem)
        return None

    def on_command(self, command: Event, seq: int) -> list[Output]:
        if isinstance(command, InputInjected):
            self.queue.append((command.text, seq))
            if self.state is State.READY or (self.state in BUSY and self.queued_input):
                return self._next_turn()
            return []  # held: before ready, or mid-turn for an agent that cannot queue
        if isinstance(command, CancelRequested):
            if command.scope == "session":
                return self._end(SessionCancelled(reason=command.reason), cancel=True)
            if self.state in BUSY:
                return [CancelAgent("current_turn", command.reason, seq)]
            return []
        if isinstance(command, PermissionDecided):
            del self.pending_permissions[command.req_id]
            # _meta (a rewritten input, cap.updated_input) travels with the decision
            meta = _with_message(command.meta, command.decision, command.reason)
            out: list[Output] = [Send(PermissionResponse(req_id=command.req_id,
                                                         decision=command.decision,
                                                         meta=meta), seq)]
            return out + self._maybe_resume(seq)
        if isinstance(command, AskAnswered):
            self._answered(self.pending_asks.pop(command.ask_id), command.value)
            out = [Send(AskUserAnswer(ask_id=command.ask_id, value=command.value), seq)]
            return out + self._maybe_resume(seq)
        return []

    def _maybe_resume(self, cause: int) -> list[Output]:
        if self.state is State.INPUT_REQUIRED and not self.pending_permissions and not (
            self.pending_asks
        ):
            self.state = State.WORKING
            return [Emit((SessionWorking(turn=self.turn, resumed=True),), cause)]
        return []

    def _next_turn(self) -> list[Output]:
        if not self.queue:
            return []
        budget = self.config.budget_usd
        if budget is not None and self.cost_usd >= budget:
            refused = [
                Emit(
                    (
                        CapError(
                            code="cap_budget_exceeded",
                            message=f"turn refused: the session has spent ${self.cost_usd:.4f} "
                            f"of its ${budget:.4f} budget",
                            details={"input_seq": seq},
                        ),
                    ),
                    seq,
                )
                for _, seq in self.queue
            ]
            self.queue.clear()
            return list(refused)
        text, seq = self.queue.popleft()
        self.turn += 1
        if self.state is State.READY:
            self.state = State.WORKING
            self.turn_error = None
            self._budget_cancelled = False
        self.in_flight.append((self.turn, seq))
        return [
            Emit((SessionWorking(turn=self.turn),), seq),
            Send(UserInputInject(content=(ContentBlock(text=text),)), seq),
        ]

    # ---- what the agent said ------------------------------------------------
    def admit(self, events: Sequence[Event]) -> list[Event]:
        """What of an agent batch the log stores: raw output past the budget is counted."""
        if _MAYBE_RAW.isdisjoint(map(type, events)):
            return list(events)  # nothing the budget counts: no Python step per event
        return self.raw.admit(events)

    def on_agent(self, events: Sequence[Event], first_seq: int) -> list[Output]:
        out: list[Output] = []
        interesting = _INTERESTING
        for i, ev in enumerate(events):
            kind = type(ev)
            if kind not in interesting:
                continue
            seq = first_seq + i
            if kind is PermissionRequest:
                out += self._permission(ev, seq)  # type: ignore[arg-type]
            elif kind is AskUser:
                out += self._ask(ev, seq)  # type: ignore[arg-type]
            elif kind is Usage:
                out += self._usage(ev, seq)  # type: ignore[arg-type]
            elif kind is CapError:
                self.turn_error = ev  # type: ignore[assignment]
            elif kind is PermissionPathsResolved:
                self.resolved[ev.req_id] = ev.outside  # type: ignore[attr-defined]
            elif kind is CapSessionReady and self.state is State.STARTING:
                self.state = State.READY
                out.append(Emit((SessionReady(agent_session_id=ev.session_id),), seq))  # type: ignore[attr-defined]
                out += self._next_turn()
        return out

    def _permission(self, req: PermissionRequest, seq: int) -> list[Output]:
        """Risk is decided here and only here: max(agent's claim, trio-cap's own rating).

        The rating comes from the tool, scope and input (and the logged symlink facts),
        never from the agent, so an agent cannot talk a delete down to "medium".
        """
        claim = _agent_claim(req)
        rating = rate(req.tool, req.intent, req.scope, self.config.cwd,
                      outside=self.resolved.pop(req.req_id, ()))
        risk = max_risk(max_risk(claim, req.risk_level), rating.level)
        decided = self.policy.decide(risk, req.tool)
        if decided is not None:
            reason = decided.reason
            if risk != claim:
                reason += f" (agent said {claim}; trio-cap rates it {risk}: {rating.why})"
            return [
                Emit(
                    (PermissionDecided(req_id=req.req_id, decision=decided.decision,
                                       by=decided.by, reason=reason, risk=risk,
                                       agent_risk=claim),),
                    seq,
                ),
                Send(PermissionResponse(req_id=req.req_id, decision=decided.decision,
                                        meta=_with_message(None, decided.decision, reason)),
                     seq),
            ]
        self.pending_permissions[req.req_id] = seq
        return self._wait_for_human("permission", req.req_id, seq, risk)

    def carry_answers(self) -> None:
        """A crash cut the turns in flight (a resume re-runs them): what was answered in
        them is answered again, from the log, when the re-run turn asks the same question
        — whoever answered is not asked twice.  Asks still waiting died with the agent:
        asked again, they go where they went."""
        running = {turn for turn, _ in self.in_flight}
        self.carried = {_question(ask): (value, ask_id)
                        for turn, ask, value, ask_id in self.answered if turn in running}

    def _answered(self, ask: AskUser, value: Any, first: str | None = None) -> None:
        turn = self.in_flight[0][0] if self.in_flight else self.turn
        self.answered.append((turn, ask, value, first or ask.ask_id))

    def _ask(self, ask: AskUser, seq: int) -> list[Output]:
        why = None
        if self.carried and (carried := self.carried.pop(_question(ask), None)) is not None:
            value, first = carried
            self._answered(ask, value, first)  # a second crash carries it still
            return [
                Emit((AskAnswered(ask_id=ask.ask_id, value=value, by=CARRIED,
                                  meta={"cap.answered_as": first}),), seq),
                Send(AskUserAnswer(ask_id=ask.ask_id, value=value), seq),
            ]
        if self.answerer is not None:
            auto = self.answerer(ask)
            if auto.value is not None and _answer_problem(ask, auto.value) is None:
                self._answered(ask, auto.value)
                meta = auto.meta or None
                return [
                    Emit((AskAnswered(ask_id=ask.ask_id, value=auto.value, by=AUTO_ANSWER,
                                      meta=meta),), seq),
                    Send(AskUserAnswer(ask_id=ask.ask_id, value=auto.value, meta=meta), seq),
                ]
            why = auto.meta or None  # escalated: the reason travels with what happens next
        if not self.policy.human:
            return [
                Emit((AskAnswered(ask_id=ask.ask_id, value=None, by="policy:headless",
                                  meta=why),), seq),
                Send(AskUserAnswer(ask_id=ask.ask_id, value=None), seq),
            ]
        self.pending_asks[ask.ask_id] = ask
        return self._wait_for_human("ask", ask.ask_id, seq, meta=why)

    def _wait_for_human(self, reason: str, ref: str, seq: int,
                        risk: RiskLevel | None = None,
                        meta: dict[str, Any] | None = None) -> list[Output]:
        if self.state in BUSY:
            self.state = State.INPUT_REQUIRED
        required = SessionInputRequired(turn=self.turn, reason=reason, ref=ref,  # type: ignore[arg-type]
                                        risk=risk, meta=meta)
        return [Emit((required,), seq)]

    def _usage(self, usage: Usage, seq: int) -> list[Output]:
        self.cost_usd += usage.cost_usd_estimate
        budget = self.config.budget_usd
        if (
            budget is not None
            and self.cost_usd > budget
            and self.state in BUSY
            and not self._budget_cancelled
        ):
            self._budget_cancelled = True
            return [
                Emit(
                    (
                        CapError(
                            code="cap_budget_exceeded",
                            # usage often arrives as the turn ends: say what is done, not
                            # that the turn is being cancelled when it may already be over
                            message=f"spent ${self.cost_usd:.4f} of a ${budget:.4f} budget "
                            f"during turn {self.turn}: cap.cancel sent (it stops the turn if it "
                            "is still running); no further turn will start",
                        ),
                    ),
                    seq,
                ),
                CancelAgent("current_turn", "budget exceeded", seq),
            ]
        return []

    def on_turn_ended(self, stop_reason: StopReason) -> list[Output]:
        """The oldest turn in flight ended; the session idles once none is left."""
        if self.state not in BUSY or not self.in_flight:
            return []
        turn, cause = self.in_flight.popleft()
        if self.answered:
            self.answered = [a for a in self.answered if a[0] != turn]
        if self.timed_out is not None:  # cut short by a timeout: failed, however it ended
            stop_reason, self.turn_error, self.timed_out = "error", self.timed_out, None
        self.last_stop = stop_reason
        if stop_reason == "error":
            self.last_error = self.turn_error
        out: list[Output] = [
            Emit((SessionTurnEnded(turn=turn, stop_reason=stop_reason),), cause)
        ]
        if self.in_flight:
            return out  # a prompt sent mid-turn is still being answered
        self.pending_permissions.clear()
        self.pending_asks.clear()
        self.carried.clear()  # the re-run turns are over: what they did not ask again is moot
        self.state = State.READY
        out.append(Emit((SessionIdle(turn=turn, stop_reason=stop_reason),), cause))
        return out + self._next_turn()


def _agent_claim(req: PermissionRequest) -> RiskLevel:
    """The agent's own rating: ``_meta["cap.agent_risk"]`` when a binding passed one through,
    else the request's ``risk_level`` (CAP's default, medium, when the wire had none)."""
    claimed = (req.meta or {}).get(AGENT_RISK)
    if isinstance(claimed, str) and claimed in RISK_ORDER:
        return claimed  # type: ignore[return-value]
    return req.risk_level


def _with_message(
    meta: dict[str, Any] | None, decision: str, reason: str
) -> dict[str, Any] | None:
    """A refusal tells the agent why (``_meta["cap.message"]``), so the model can adapt."""
    if decision != "deny" or not reason:
        return meta
    return {**(meta or {}), "cap.message": reason}


def _unknown_permission(req_id: str) -> CapError:
    return CapError(
        code="cap_unknown_permission", message=f"no pending permission request {req_id!r}"
    )


def _unknown_ask(ask_id: str) -> CapError:
    return CapError(code="unknown_ask", message=f"no pending ask {ask_id!r}")


def _question(ask: AskUser) -> str:
    """What makes two asks the same question: the prompt and the form, not the id."""
    return json.dumps([ask.prompt, ask.form], sort_keys=True, default=str)


def _answer_problem(ask: AskUser, value: Any) -> str | None:
    """Check an answer against the ask's form (the informal JSON-schema subset CAP uses)."""
    if value is None or not ask.form:
        return None
    if is_object_form(ask.form):  # an elicitation form (ACP, MCP): every field is checked
        problem = answer_problem(ask.form, value)
        return f"answer to {ask.ask_id}: {problem}" if problem else None
    choices = ask.form.get("oneOf")
    allowed = [c.get("const") for c in choices if isinstance(c, dict)] if choices else None
    if allowed is None and isinstance(ask.form.get("enum"), list):
        allowed = ask.form["enum"]
    if allowed and value not in allowed:
        return f"answer {value!r} to {ask.ask_id} is not one of {allowed}"
    return None
