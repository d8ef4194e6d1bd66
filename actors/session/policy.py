"""Permission policies: pure decisions, so every one can be replayed and audited."""

from __future__ import annotations

from typing import Literal

import attrs

from trio_cap.events.kinds import Decision, RiskLevel

PolicyName = Literal["ask", "allow", "deny", "bypass"]
POLICIES: tuple[str, ...] = ("ask", "allow", "deny", "bypass")


@attrs.frozen
class PolicyDecision:
    decision: Decision
    by: str
    reason: str


@attrs.frozen
class PermissionPolicy:
    name: PolicyName = "deny"
    allow_high_risk: bool = False
    human: bool = False
    """Whether someone can be asked (a terminal, or an embedding app that answers)."""
    chosen: bool = True
    """False when nobody picked the policy (``deny`` by default): refusals then say so."""

    def decide(self, risk: RiskLevel) -> PolicyDecision | None:
        """A decision, or None when a human must decide."""
        by = f"policy:{self.name}"
        if self.name == "ask":
            if self.human:
                return None
            return PolicyDecision(
                "deny", by, "policy 'ask' but nobody can be asked; use --permissions allow|deny"
            )
        if self.name == "deny":
            why = ("the default when nobody can be asked: no terminal, or --headless"
                   if not self.chosen else "as chosen")
            return PolicyDecision(
                "deny",
                by,
                f"denied by policy 'deny' ({why}); "
                "rerun with --permissions ask|allow|bypass to permit tools",
            )
        # allow and bypass approve, except high risk without the explicit flag
        if risk == "high" and not self.allow_high_risk:
            if self.human:
                return None
            return PolicyDecision(
                "deny",
                by,
                f"high-risk request refused by policy '{self.name}'; "
                "only a human or --allow-high-risk can approve it",
            )
        return PolicyDecision("allow_once", by, f"{risk} risk approved by policy '{self.name}'")

    @property
    def permission_mode(self) -> str:
        """What ``cap.session.config.permission_mode`` tells the agent: ``interactive`` when a
        human answers (ask), ``confirm`` when trio-cap's policy answers every request (allow,
        deny), ``none`` when the agent asks nothing (bypass, its own no-prompt mode)."""
        return {"bypass": "none", "ask": "interactive"}.get(self.name, "confirm")
