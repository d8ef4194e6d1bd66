"""Token and cost totals per session and overall, against each session's budget."""

from __future__ import annotations

import msgspec

from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import SessionCreated, Usage
from trio_cap.events.projections.base import Projection


class UsageTotals(msgspec.Struct, kw_only=True):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    thinking_tokens: int = 0
    cost_usd: float = 0.0
    duration_ms: int = 0
    reports: int = 0
    budget_usd: float | None = None

    def add(self, ev: Usage) -> None:
        self.input_tokens += ev.input_tokens
        self.output_tokens += ev.output_tokens
        self.cache_read_tokens += ev.cache_read_tokens
        self.cache_creation_tokens += ev.cache_creation_tokens
        self.thinking_tokens += ev.thinking_tokens
        self.cost_usd += ev.cost_usd_estimate
        self.duration_ms += ev.duration_ms
        self.reports += 1

    @property
    def over_budget(self) -> bool:
        return self.budget_usd is not None and self.cost_usd >= self.budget_usd


class UsageState(msgspec.Struct):
    sessions: dict[str, UsageTotals] = msgspec.field(default_factory=dict)
    total: UsageTotals = msgspec.field(default_factory=UsageTotals)


def _created(state: UsageState, env: Envelope) -> None:
    ev: SessionCreated = env.event  # type: ignore[assignment]
    state.sessions.setdefault(ev.session_id, UsageTotals()).budget_usd = ev.budget_usd


def _usage(state: UsageState, env: Envelope) -> None:
    ev: Usage = env.event  # type: ignore[assignment]
    state.sessions.setdefault(env.stream, UsageTotals()).add(ev)
    state.total.add(ev)


class UsageProjection(Projection[UsageState]):
    name = "usage"
    handlers = {SessionCreated: _created, Usage: _usage}

    def initial(self) -> UsageState:
        return UsageState()
