"""The latest plan per session (a ``cap.plan`` replaces the previous one)."""

from __future__ import annotations

import msgspec

from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import Plan, PlanEntry
from trio_cap.events.projections.base import Projection


class PlanState(msgspec.Struct):
    plans: dict[str, tuple[PlanEntry, ...]] = msgspec.field(default_factory=dict)


def _plan(state: PlanState, env: Envelope) -> None:
    ev: Plan = env.event  # type: ignore[assignment]
    state.plans[env.stream] = ev.entries


class PlanProjection(Projection[PlanState]):
    name = "plan"
    handlers = {Plan: _plan}

    def initial(self) -> PlanState:
        return PlanState()
