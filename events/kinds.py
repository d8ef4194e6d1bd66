"""The event vocabulary: one tagged union of frozen msgspec Structs.

The tag of every CAP core event is its CAP kind (``cap.text_chunk`` …) so a
frame decoded off any binding and an event read back from the log are the same
Python object.  trio-cap's own lifecycle and command events use short dotted
kinds (``session.created``, ``input.injected``) that CAP does not define.

Events are pure data: they carry no sequence number or timestamp.  The log
wraps each one in an :class:`~events.envelope.Envelope` when it is appended,
so machines can build events without knowing where they will be stored.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import msgspec

Direction = Literal["in", "out", "local"]
"""``in``: agent → orchestrator; ``out``: orchestrator → agent; ``local``: trio-cap's own."""

Scope = Literal["read", "write", "execute", "network"]
RiskLevel = Literal["low", "medium", "high"]
Decision = Literal["allow_once", "allow_always", "deny"]
CancelScope = Literal["current_turn", "session"]
PlanStatus = Literal["pending", "in_progress", "completed", "cancelled", "blocked"]
PlanPriority = Literal["urgent", "high", "medium", "low"]
StopReason = Literal[
    "end_turn", "max_tokens", "tool_use", "stop_sequence", "cancelled", "error"
]
PermissionMode = Literal["none", "confirm", "interactive"]
Channel = Literal["assistant", "thought", "system"]


class Event(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    omit_defaults=True,
    tag_field="kind",
    gc=False,
):
    """Base of every event.  ``_meta`` is CAP's open annotation object.

    ``gc=False``: events are immutable leaves that never form reference cycles,
    so the cycle collector need not track them — with hundreds of thousands
    of events alive during a replay, tracking them costs more than decoding.
    """

    direction: ClassVar[Direction] = "local"
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


# --------------------------------------------------------------------------
# trio-cap session lifecycle (the session actor writes these)
# --------------------------------------------------------------------------


class SessionCreated(Event, tag="session.created"):
    session_id: str
    cwd: str
    agent: str
    binding: str
    model: str | None = None
    permissions: str = "deny"
    allow_high_risk: bool = False
    budget_usd: float | None = None
    human: bool = False
    """Someone answers asks and permission requests (the policy's ``human``)."""
    policy_chosen: bool = True
    """A person picked the permission policy (refusals say so when not)."""
    queued_input: bool = False
    """The agent takes input mid-turn (manifest ``capabilities.queued_input``)."""
    allow_tools: tuple[str, ...] = ()
    """Tool names (globs) the policy approves without asking (high risk excepted)."""
    deny_tools: tuple[str, ...] = ()
    """Tool names (globs) the policy refuses without asking."""
    auto_answer: bool = False
    """An automatic answerer sees every ask first (a fleet's research archive); a replay
    feeds its logged answers back."""


class SessionStarting(Event, tag="session.starting"):
    """A binding connected and the config frame went to it; the agent is starting."""

    binding: str | None = None


class SessionReady(Event, tag="session.ready"):
    agent_session_id: str | None = None


class SessionWorking(Event, tag="session.working"):
    turn: int
    resumed: bool = False


class SessionInputRequired(Event, tag="session.input_required"):
    turn: int
    reason: Literal["ask", "permission"]
    ref: str
    risk: RiskLevel | None = None
    """For a permission: trio-cap's own rating (the request's ``risk_level`` is the agent's)."""


class SessionTurnEnded(Event, tag="session.turn_ended"):
    """One turn ended; others sent mid-turn may still be in flight."""

    turn: int
    stop_reason: StopReason = "end_turn"


class SessionIdle(Event, tag="session.idle"):
    """The last turn in flight ended; the session waits for the next input."""

    turn: int
    stop_reason: StopReason = "end_turn"


class SessionCompleted(Event, tag="session.completed"):
    turns: int = 0


class SessionCancelled(Event, tag="session.cancelled"):
    reason: str = "cancelled"


class SessionFailed(Event, tag="session.failed"):
    code: str
    message: str


class SessionWarning(Event, tag="session.warning"):
    code: str
    message: str


class SessionOwned(Event, tag="session.owned"):
    """The node that runs this session; it holds it while its lease lasts (``node.heartbeat``).

    Written before the session's first event, so no session of a node is ever unowned."""

    node: str


class NodeHeartbeat(Event, tag="node.heartbeat"):
    """A node is alive and keeps its sessions until ``lease_until`` (the log clock's seconds)."""

    node: str
    lease_until: float
    host: str = ""
    pid: int = 0


class NodeStopped(Event, tag="node.stopped"):
    """A node stopped cleanly: its sessions ended with it, nothing is left to take over."""

    node: str


class NodeTakeover(Event, tag="node.takeover"):
    """``node`` took over the live sessions of ``lost``, whose lease lapsed at ``lapsed_at``.

    ``resumed``: the taker picks ``sessions`` up under the resume rules (each then
    writes ``run.resumed`` when it goes on), except those in ``not_resumed``, which
    cannot be (started outside ``cap run``, waiting on a human, or their log does not
    replay): each of those gets ``session.failed`` ``node_lost`` saying why.  A log
    written before resume existed has ``resumed`` false and every session failed."""

    node: str
    lost: str
    lapsed_at: float
    sessions: tuple[str, ...] = ()
    resumed: bool = False
    not_resumed: tuple[str, ...] = ()


class BindingFallback(Event, tag="binding.fallback"):
    failed: str
    next: str
    reason: str


class AgentRaw(Event, tag="agent.raw"):
    """Agent output that maps to no CAP event, kept verbatim so the log loses nothing.

    Unknown frame types, a duplicate turn end, a withdrawn permission prompt,
    control requests trio-cap does not serve, and the agent's stderr: none has
    a CAP meaning, but a replay or a bug report needs them.  ``text`` is capped
    by the driver; ``truncated`` counts the bytes it dropped.
    """

    binding: str
    reason: str
    text: str
    source: Literal["stdout", "stderr"] = "stdout"
    truncated: int = 0


class FrameIn(Event, tag="frame.in"):
    """What one step of a connection read from its agent, recorded (``--record frames|raw``).

    Exactly what the shell fed its machine in that step, so ``cap replay --check``
    can feed it again: ``text`` for bytes that are UTF-8 (a stream-json read:
    its lines, verbatim, partial lines included), ``data_b64`` for other bytes,
    ``frame`` for a message the transport delivered whole, ``eof`` for the end
    of the agent's output, ``signal`` for what the shell itself saw (``gone``:
    the agent exited, with ``exit_code`` and the reason in ``text``;
    ``turn_ended``: a turn end with no wire frame, as in-process).  The events
    the step produced follow it directly in the log, in the same record.
    ``t`` is the connection's monotonic clock (Trio's, which tests inject).
    A machine stepped by time and by the orchestrator's frames as well as by
    bytes (PTY) logs those steps too, as signals: ``tick`` (its timer fired at
    ``t``), ``send`` / ``cancel`` (it took the orchestrator's frame, logged
    before as itself, at this point of its input), ``resize`` (``frame`` is
    ``[cols, rows]``), ``exited`` (the child's end: reason in ``text``,
    ``exit_code``, ``frame`` ``{"expected": …}``).  ``ids`` lists the ids the
    machine drew in the step, so a replay draws the same.
    """

    binding: str
    t: float = 0.0
    text: str | None = None
    data_b64: str | None = None
    frame: Any = None
    eof: bool = False
    signal: str | None = None
    exit_code: int | None = None
    ids: tuple[str, ...] = ()


class FrameOut(Event, tag="frame.out"):
    """What a connection wrote to its agent, recorded: the bytes (``text`` or ``data_b64``)
    or a whole message (``frame``).  ``ids`` lists the ids the connection drew to
    write it (a prompt's uuid, the agent session id), so a replay draws the same."""

    binding: str
    t: float = 0.0
    text: str | None = None
    data_b64: str | None = None
    frame: Any = None
    ids: tuple[str, ...] = ()


class RunStarted(Event, tag="run.started"):
    """``cap run``'s plan, logged first so ``cap run --resume`` can pick the run up."""

    agent: str
    tasks: tuple[str, ...]
    cwd: str
    binding: str | None = None
    model: str | None = None
    script: str | None = None
    permissions: str = "deny"
    allow_high_risk: bool = False
    budget_usd: float | None = None
    record: str = "frames"
    turn_timeout: float | None = None
    idle_timeout: float | None = None
    session_id: str | None = None
    """The session the run starts (chosen before it exists), so a run is found by its
    session in a log many runs share (PostgreSQL, several nodes)."""


class RunResumed(Event, tag="run.resumed"):
    """``cap run --resume`` picked a session up after the orchestrator died.

    ``how``: ``resumed`` (the agent continues its own conversation, e.g. Claude
    Code's ``--resume``) or ``restarted`` (a fresh agent given the transcript so
    far as context); ``after_seq`` is the last seq the dead run acknowledged;
    ``rerun_turns`` are turns that were cut by the crash and run again.
    """

    session_id: str
    how: Literal["resumed", "restarted"]
    after_seq: int
    turns_done: int = 0
    rerun_turns: tuple[int, ...] = ()
    agent_session_id: str | None = None
    reason: str = ""


# --------------------------------------------------------------------------
# fleets (the fleet actor writes these on its stream, ``fleet:<name>``)
# --------------------------------------------------------------------------


class FleetStarted(Event, tag="fleet.started"):
    """A fleet run began: its members, routes and budget, as the validated file said."""

    fleet: str
    task: str
    members: tuple[str, ...]
    source: str = ""
    repo: str = ""
    base: str | None = None
    worktrees: str = "git"
    budget_usd: float | None = None
    permissions: str = "deny"
    allow_high_risk: bool = False
    hop_limit: int = 4
    run: str = ""
    """This run's id: its working directories are ``.cap-worktrees/<fleet>/<run>/``."""


class FleetWorktree(Event, tag="fleet.worktree"):
    """The fleet made a working directory for a member (``cap fleet clean`` removes only
    these): a git worktree on ``branch``, or a plain directory."""

    member: str
    path: str
    mode: Literal["git", "dir"] = "git"
    branch: str | None = None
    base: str | None = None
    base_ref: str | None = None
    """The base branch's name (``base`` is its commit): where ``cap fleet merge`` merges."""


class FleetSetup(Event, tag="fleet.setup"):
    """One setup step in a member's new working directory, before its agent started: a
    file copied from the checkout, or a command run (``exit_code``; None when it was
    killed at the timeout).  A step that is not ``ok`` fails the run before any agent
    starts."""

    member: str
    step: int
    action: Literal["copy", "run"]
    what: str
    ok: bool = True
    exit_code: int | None = None
    detail: str = ""
    duration_ms: int = 0


class FleetTouched(Event, tag="fleet.touched"):
    """A member changed a file for the first time in this run: a write tool call that
    succeeded (``call_id``), or its final diff.  ``path`` is relative to the member's
    working directory (absolute when outside it), so members' paths compare."""

    member: str
    path: str
    via: Literal["tool", "diff"] = "tool"
    call_id: str | None = None


class FleetConflict(Event, tag="fleet.conflict"):
    """A second (third …) member changed a file another member of the run changed: their
    branches will conflict or overwrite each other at merge.  Logged when it happens."""

    path: str
    members: tuple[str, ...]
    """Every member that changed it, in the order they did; the last is the newcomer."""
    via: Literal["tool", "diff"] = "tool"


class FleetMember(Event, tag="fleet.member"):
    """A member's session was started: which log stream is its."""

    member: str
    session_id: str
    agent: str
    cwd: str
    budget_usd: float | None = None


class FleetArchive(Event, tag="fleet.archive"):
    """The research archive the fleet's auto-answerer searches, as it was read when the run
    began (its answers are ``ask.answered`` ``policy:auto_answer`` on members' streams)."""

    path: str
    files: int
    passages: int
    threshold: float
    max_passages: int


class FleetDiff(Event, tag="fleet.diff"):
    """A member's worktree diff as its turn left it, taken at the turn end (``turn_end``,
    also the envelope's cause) to hand on with the result its routes carry."""

    member: str
    turn_end: int
    name: str
    size: int
    content: str
    """At most the first ``HANDOFF_DIFF_LIMIT`` characters (``truncated``)."""
    truncated: bool = False
    uri: str | None = None
    branch: str | None = None


class FleetRoute(Event, tag="fleet.route"):
    """A route fired: ``pattern`` from ``sources`` to ``targets`` (a race's winner is its
    only source; ``cancelled`` are the losers)."""

    pattern: str
    sources: tuple[str, ...]
    targets: tuple[str, ...] = ()
    cancelled: tuple[str, ...] = ()


class FleetMessageQueued(Event, tag="fleet.message.queued"):
    """Input for a member is waiting to be delivered: the task, a route's result, a plan
    entry or a mediated ``@cap://`` message (``via``); ``cause`` is the event it came from."""

    message_id: str
    source: str
    target: str
    text: str
    via: str
    hops: int = 0
    entry: str | None = None
    replaces: str | None = None
    """``via`` ``interrupt``: the message whose turn was interrupted (its text is in this
    one, before the correction)."""
    reply_to: str | None = None
    """A reply: the mediated message whose turn's final text this is (``via`` ``reply``),
    or the id of the message an ``@cap://`` line back to its sender answers."""


class FleetMessageDelivered(Event, tag="fleet.message.delivered"):
    """The inject was accepted by the target's session: ``input_seq`` is its input.injected."""

    message_id: str
    target: str
    input_seq: int
    turn: int | None = None


class FleetMessageConsumed(Event, tag="fleet.message.consumed"):
    """The target's turn that took the message ended."""

    message_id: str
    target: str
    stop_reason: StopReason = "end_turn"


class FleetMessageRefused(Event, tag="fleet.message.refused"):
    """A message the fleet would not deliver: an unknown target, the hop limit, a target
    that has ended."""

    source: str
    target: str
    text: str
    reason: str
    message_id: str | None = None
    hops: int = 0
    reply_to: str | None = None
    """The refused message was a reply to that one: its answer could not go back."""


class FleetBudgetRefused(Event, tag="fleet.budget_refused"):
    """A turn refused before it started, its budget already spent (``cap_budget_exceeded``)."""

    member: str
    scope: Literal["session", "fleet"]
    spent_usd: float
    budget_usd: float
    code: int = -32004
    message_id: str | None = None


class FleetCancel(Event, tag="fleet.cancel"):
    """The fleet cancelled members' turns: ``budget`` (usage crossed one mid-turn),
    ``race_lost`` or ``interrupt`` (a person's correction, ``fleet.interrupt``)."""

    members: tuple[str, ...]
    reason: str
    spent_usd: float | None = None


class FleetInterrupt(Event, tag="fleet.interrupt"):
    """A person corrected a member mid-turn (CAP §10.6): its turn is cancelled, what it
    said stays in the log, and ``message_id``'s text with the correction is its next
    input (``fleet.message.queued`` ``via`` ``interrupt``, ``replaces`` it).  ``refused``:
    why nothing was done (the member was not in a turn the fleet could interrupt)."""

    member: str
    correction: str
    message_id: str | None = None
    refused: str | None = None


class FleetPaused(Event, tag="fleet.paused"):
    """A member hit its agent's rate limit: its turn's input waits until ``until`` (the
    log clock's seconds), then goes to it again (``fleet.resumed``)."""

    member: str
    until: float
    delay_s: float
    attempt: int
    """Rate limits in a row, this one included."""
    retry_after: float | None = None
    """What the agent's error said to wait, if it said."""
    message_id: str | None = None
    reason: str = "rate_limit"


class FleetResumed(Event, tag="fleet.resumed"):
    """A paused member's wait is over: its input is delivered again."""

    member: str
    attempt: int


class FleetGaveUp(Event, tag="fleet.gave_up"):
    """A member was rate-limited more times in a row than the fleet file allows: its
    input is dropped and the fleet will fail."""

    member: str
    attempts: int
    reason: str


class FleetRunResumed(Event, tag="fleet.run_resumed"):
    """``cap fleet resume`` picked the fleet up after its orchestrator died: the fleet's
    state was rebuilt by replaying its log through the fleet's rules; ``after_seq`` is the
    last seq the dead run acknowledged.  ``sessions``: the members whose sessions were
    picked up (each writes its own ``run.resumed``); ``redelivered``: messages delivered
    whose turn the crash cut (the member's re-run turn takes them again);
    ``delivering``: messages queued and never delivered (delivered now); ``paused``:
    members still waiting out a rate limit (each until its ``fleet.paused`` ``until``);
    ``unlogged``: decisions the dead run had made and not logged, written right after."""

    fleet: str
    after_seq: int
    sessions: tuple[str, ...] = ()
    redelivered: tuple[str, ...] = ()
    delivering: tuple[str, ...] = ()
    paused: tuple[str, ...] = ()
    unlogged: int = 0


class FleetCompleted(Event, tag="fleet.completed"):
    fleet: str
    spent_usd: float = 0.0


class FleetFailed(Event, tag="fleet.failed"):
    fleet: str
    reason: str
    spent_usd: float = 0.0


class LogRecovered(Event, tag="log.recovered"):
    """Written when a file log was reopened after a torn or corrupt tail."""

    dropped_bytes: int
    at_offset: int


class LogLost(Event, tag="log.lost"):
    """Stands in for an event that damage to the file destroyed.

    ``cap log repair`` writes one per lost seq (and readers of a damaged log
    show one) so seqs stay gap-free and every ``cause`` still points at the
    right event; each names the whole lost range and why.
    """

    from_seq: int
    to_seq: int
    reason: str


class LogUndecodable(Event, tag="log.undecodable"):
    """A stored event this build cannot decode (a newer trio-cap's kind, or a bad field).

    Made only when reading, never appended: the raw event travels as
    ``payload`` (JSON-able) so nothing a newer writer stored is hidden.
    """

    original_kind: str | None = None
    payload: Any = None
    error: str = ""


# --------------------------------------------------------------------------
# commands the orchestrator accepted (written before they are acted on)
# --------------------------------------------------------------------------


class InputInjected(Event, tag="input.injected"):
    text: str
    source: str = "owner"


class CancelRequested(Event, tag="cancel.requested"):
    scope: CancelScope = "current_turn"
    reason: str = "user"


class PermissionDecided(Event, tag="permission.decided"):
    req_id: str
    decision: Decision
    by: str
    reason: str = ""
    risk: RiskLevel | None = None
    """The effective rating a policy decided on: max(agent's claim, trio-cap's rating)."""
    agent_risk: RiskLevel | None = None
    """What the agent itself claimed (``risk_level``, or ``_meta["cap.agent_risk"]``)."""


class PermissionPathsResolved(Event, tag="permission.paths_resolved"):
    """Which workspace paths a permission request names resolve outside it (symlinks).

    The session actor looks at the filesystem once, when the request arrives, and logs
    what it found just before the request; the session machine rates from this event,
    so a replay rates the same way with no filesystem.
    """

    req_id: str
    checked: int = 0
    outside: tuple[str, ...] = ()


class AskAnswered(Event, tag="ask.answered"):
    ask_id: str
    value: Any = None
    by: str = "human"


# --------------------------------------------------------------------------
# CAP core events, agent → orchestrator (CAP v1 §7)
# --------------------------------------------------------------------------


class CapSessionReady(Event, tag="cap.session.ready"):
    direction: ClassVar[Direction] = "in"
    version: str = "cap-protocol/v1"
    session_id: str | None = None


class TextChunk(Event, tag="cap.text_chunk"):
    direction: ClassVar[Direction] = "in"
    message_id: str
    text: str
    channel: Channel = "assistant"


class ToolCallStart(Event, tag="cap.tool_call.start"):
    direction: ClassVar[Direction] = "in"
    call_id: str
    name: str
    input: dict[str, Any] = msgspec.field(default_factory=dict)


class ToolCallDelta(Event, tag="cap.tool_call.delta"):
    direction: ClassVar[Direction] = "in"
    call_id: str
    output_chunk: str


class ToolCallEnd(Event, tag="cap.tool_call.end"):
    direction: ClassVar[Direction] = "in"
    call_id: str
    output: str = ""
    is_error: bool = False
    duration_ms: int | None = None


class PlanEntry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    id: str
    content: str
    status: PlanStatus = "pending"
    priority: PlanPriority | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class Plan(Event, tag="cap.plan"):
    direction: ClassVar[Direction] = "in"
    entries: tuple[PlanEntry, ...] = ()


class Thought(Event, tag="cap.thought"):
    direction: ClassVar[Direction] = "in"
    message_id: str
    text: str


class AskUser(Event, tag="cap.ask_user"):
    direction: ClassVar[Direction] = "in"
    ask_id: str
    prompt: str
    form: dict[str, Any] | None = None
    timeout_seconds: float | None = None


class PermissionRequest(Event, tag="cap.permission.request"):
    direction: ClassVar[Direction] = "in"
    req_id: str
    tool: str
    intent: dict[str, Any] = msgspec.field(default_factory=dict)
    scope: Scope = "write"
    risk_level: RiskLevel = "medium"


class Usage(Event, tag="cap.usage"):
    direction: ClassVar[Direction] = "in"
    model_id: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    thinking_tokens: int = 0
    cost_usd_estimate: float = 0.0
    duration_ms: int = 0
    stop_reason: StopReason = "end_turn"


class CapError(Event, tag="cap.error"):
    direction: ClassVar[Direction] = "in"
    code: str
    message: str
    retryable: bool = False
    details: dict[str, Any] | None = None


class PtyRawBytes(Event, tag="cap.pty.raw_bytes"):
    direction: ClassVar[Direction] = "in"
    bytes_b64: str


class Artifact(Event, tag="cap.artifact"):
    direction: ClassVar[Direction] = "in"
    artifact_id: str
    mime_type: str
    name: str
    size: int = 0
    uri: str | None = None
    content: str | None = None


# --------------------------------------------------------------------------
# CAP core events, orchestrator → agent (CAP v1 §7.5 to §7.10)
# --------------------------------------------------------------------------


class SessionConfig(Event, tag="cap.session.config"):
    direction: ClassVar[Direction] = "out"
    cwd: str
    model: str | None = None
    system_prompt: str | None = None
    max_turns: int | None = None
    budget_usd: float | None = None
    permission_mode: PermissionMode = "interactive"
    session_resume_id: str | None = None
    profile_config: dict[str, Any] | None = None


class ContentBlock(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    type: str = "text"
    text: str = ""


class UserInputInject(Event, tag="cap.user_input.inject"):
    direction: ClassVar[Direction] = "out"
    content: tuple[ContentBlock, ...]

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.content if block.type == "text")


class Cancel(Event, tag="cap.cancel"):
    direction: ClassVar[Direction] = "out"
    scope: CancelScope = "current_turn"
    reason: str = "user"


class AskUserAnswer(Event, tag="cap.ask_user.answer"):
    direction: ClassVar[Direction] = "out"
    ask_id: str
    value: Any = None


class PermissionResponse(Event, tag="cap.permission.response"):
    direction: ClassVar[Direction] = "out"
    req_id: str
    decision: Decision


LIFECYCLE_EVENTS: tuple[type[Event], ...] = (
    SessionCreated,
    SessionStarting,
    SessionReady,
    SessionWorking,
    SessionInputRequired,
    SessionTurnEnded,
    SessionIdle,
    SessionCompleted,
    SessionCancelled,
    SessionFailed,
    SessionWarning,
    SessionOwned,
    NodeHeartbeat,
    NodeStopped,
    NodeTakeover,
    BindingFallback,
    LogRecovered,
    LogLost,
    LogUndecodable,
    AgentRaw,
    PermissionPathsResolved,
    FrameIn,
    FrameOut,
    RunStarted,
    RunResumed,
)
FLEET_EVENTS: tuple[type[Event], ...] = (
    FleetStarted,
    FleetWorktree,
    FleetSetup,
    FleetTouched,
    FleetConflict,
    FleetMember,
    FleetArchive,
    FleetDiff,
    FleetRoute,
    FleetMessageQueued,
    FleetMessageDelivered,
    FleetMessageConsumed,
    FleetMessageRefused,
    FleetBudgetRefused,
    FleetCancel,
    FleetInterrupt,
    FleetPaused,
    FleetResumed,
    FleetGaveUp,
    FleetRunResumed,
    FleetCompleted,
    FleetFailed,
)
COMMAND_EVENTS: tuple[type[Event], ...] = (
    InputInjected,
    CancelRequested,
    PermissionDecided,
    AskAnswered,
)
AGENT_EVENTS: tuple[type[Event], ...] = (
    CapSessionReady,
    TextChunk,
    ToolCallStart,
    ToolCallDelta,
    ToolCallEnd,
    Plan,
    Thought,
    AskUser,
    PermissionRequest,
    Usage,
    CapError,
    PtyRawBytes,
    Artifact,
)
ORCHESTRATOR_FRAMES: tuple[type[Event], ...] = (
    SessionConfig,
    UserInputInject,
    Cancel,
    AskUserAnswer,
    PermissionResponse,
)
ALL_EVENTS: tuple[type[Event], ...] = (
    LIFECYCLE_EVENTS + COMMAND_EVENTS + AGENT_EVENTS + ORCHESTRATOR_FRAMES + FLEET_EVENTS
)

AnyEvent = (
    SessionCreated
    | SessionStarting
    | SessionReady
    | SessionWorking
    | SessionInputRequired
    | SessionTurnEnded
    | SessionIdle
    | SessionCompleted
    | SessionCancelled
    | SessionFailed
    | SessionWarning
    | SessionOwned
    | NodeHeartbeat
    | NodeStopped
    | NodeTakeover
    | BindingFallback
    | LogRecovered
    | LogLost
    | LogUndecodable
    | AgentRaw
    | FrameIn
    | FrameOut
    | RunStarted
    | RunResumed
    | InputInjected
    | CancelRequested
    | PermissionDecided
    | AskAnswered
    | PermissionPathsResolved
    | CapSessionReady
    | TextChunk
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | Plan
    | Thought
    | AskUser
    | PermissionRequest
    | Usage
    | CapError
    | PtyRawBytes
    | Artifact
    | SessionConfig
    | UserInputInject
    | Cancel
    | AskUserAnswer
    | PermissionResponse
    | FleetStarted
    | FleetWorktree
    | FleetSetup
    | FleetTouched
    | FleetConflict
    | FleetMember
    | FleetArchive
    | FleetDiff
    | FleetRoute
    | FleetMessageQueued
    | FleetMessageDelivered
    | FleetMessageConsumed
    | FleetMessageRefused
    | FleetBudgetRefused
    | FleetCancel
    | FleetInterrupt
    | FleetPaused
    | FleetResumed
    | FleetGaveUp
    | FleetRunResumed
    | FleetCompleted
    | FleetFailed
)
"""The tagged union msgspec decodes into; kept in step with ALL_EVENTS by a test."""

TERMINAL_EVENTS: tuple[type[Event], ...] = (SessionCompleted, SessionCancelled, SessionFailed)


def kind_of(event_type: type[Event]) -> str:
    """The wire tag of an event class."""
    return event_type.__struct_config__.tag  # type: ignore[return-value]


KINDS: dict[str, type[Event]] = {kind_of(t): t for t in ALL_EVENTS}
