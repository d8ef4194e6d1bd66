"""What the scripted brain can do in a turn: one small frozen class per step."""

from __future__ import annotations

from typing import Any

import attrs

from trio_cap.events.kinds import PlanPriority, PlanStatus, RiskLevel, Scope


@attrs.frozen
class Say:
    """Streamed assistant text; ``meta`` goes on every chunk as its ``_meta`` (so a script
    can play an agent that addresses a fleet member with ``cap.message_to``)."""

    say: str
    meta: dict[str, Any] | None = None


@attrs.frozen
class Think:
    think: str


@attrs.frozen
class PlanItem:
    content: str
    status: PlanStatus = "pending"
    priority: PlanPriority | None = None


@attrs.frozen
class PlanStep:
    plan: list[PlanItem | str]


@attrs.frozen
class Write:
    """Write tool: needs write permission; the path must stay inside the cwd."""

    write: str
    content: str = ""


@attrs.frozen
class Edit:
    """Edit tool: replace the first ``old`` with ``new``; fails when ``old`` is absent."""

    edit: str
    old: str
    new: str


@attrs.frozen
class Run:
    """Bash tool: runs in the cwd, needs execute permission; output is quoted in the reply."""

    run: str
    timeout: float = 60.0


@attrs.frozen
class Tool:
    """Any other tool call, answered with a canned output after the permission step."""

    tool: str
    input: dict[str, Any] = attrs.field(factory=dict)
    scope: Scope = "read"
    risk: RiskLevel | None = None
    output: str = ""
    needs_permission: bool = True


@attrs.frozen
class Ask:
    ask: str
    options: list[str] = attrs.field(factory=list)


@attrs.frozen
class UsageFigures:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    thinking_tokens: int = 0
    cost_usd: float = 0.0


@attrs.frozen
class Report:
    """Usage and cost figures added to the turn's ``cap.usage``."""

    usage: UsageFigures


@attrs.frozen
class Wait:
    """A long turn: sleeps (on Trio's clock), interrupted by a cancel."""

    wait: float


@attrs.frozen
class Error:
    """A non-fatal ``cap.error``; the turn goes on."""

    error: str
    message: str = ""
    retryable: bool = False


@attrs.frozen
class Fail:
    """A ``cap.error`` that ends the turn with stop_reason ``error``."""

    fail: str
    message: str = ""
    retryable: bool = False
    retry_after: float | None = None
    """Seconds, in the error's ``details`` as an API's Retry-After would be reported."""


@attrs.frozen
class Burst:
    """``count`` text chunks in batches of ``batch``: load for benchmarks and backpressure."""

    burst: int
    batch: int = 500
    text: str = "x"


@attrs.frozen
class Raw:
    """A line the stream-json agent side writes to stdout verbatim (malformed on purpose, to
    test drivers); other bindings log it as ``agent.raw`` and show nothing."""

    raw: str


Step = (
    Say | Think | PlanStep | Write | Edit | Run | Tool | Ask | Report | Wait | Error | Fail | Burst
    | Raw
)

STEP_TYPES: dict[str, type] = {
    "say": Say,
    "think": Think,
    "plan": PlanStep,
    "write": Write,
    "edit": Edit,
    "run": Run,
    "tool": Tool,
    "ask": Ask,
    "usage": Report,
    "wait": Wait,
    "error": Error,
    "fail": Fail,
    "burst": Burst,
    "raw": Raw,
}
"""The verb key that identifies each step in a script table."""
