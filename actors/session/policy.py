"""Permission policies: pure decisions, so every one can be replayed and audited."""

from __future__ import annotations

from collections.abc import Callable
from fnmatch import fnmatchcase
from typing import Any, Literal

import attrs

from trio_cap.events.kinds import AskUser, Decision, RiskLevel

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
    allow_tools: tuple[str, ...] = ()
    """Tool names (globs) approved without asking, high risk excepted."""
    deny_tools: tuple[str, ...] = ()
    """Tool names (globs) refused without asking; they win over ``allow_tools``."""

    def decide(self, risk: RiskLevel, tool: str | None = None) -> PolicyDecision | None:
        """A decision, or None when a human must decide.

        The tool lists come first so a fleet can say "never Bash" or "Read is fine"
        whatever the policy; an allowed tool still goes through the high-risk rule, because
        the list names a tool, not what this call of it does (``Bash`` running ``rm -rf``)."""
        if tool is not None and (pattern := _match(tool, self.deny_tools)) is not None:
            return PolicyDecision("deny", "policy:deny_tools",
                                  f"tool {tool!r} is refused by deny_tools ({pattern!r})")
        if tool is not None and (pattern := _match(tool, self.allow_tools)) is not None:
            return self._approve(risk, "policy:allow_tools",
                                 f"tool {tool!r} in allow_tools ({pattern!r})")
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
        return self._approve(risk, by, f"policy '{self.name}'")

    def _approve(self, risk: RiskLevel, by: str, what: str) -> PolicyDecision | None:
        if risk == "high" and not self.allow_high_risk:
            if self.human:
                return None
            return PolicyDecision(
                "deny",
                by,
                f"high-risk request refused by {what}; "
                "only a human or --allow-high-risk can approve it",
            )
        return PolicyDecision("allow_once", by, f"{risk} risk approved by {what}")

    @property
    def permission_mode(self) -> str:
        """What ``cap.session.config.permission_mode`` tells the agent: ``interactive`` when a
        human answers (ask), ``confirm`` when trio-cap's policy answers every request (allow,
        deny), ``none`` when the agent asks nothing (bypass, its own no-prompt mode)."""
        return {"bypass": "none", "ask": "interactive"}.get(self.name, "confirm")


def _match(tool: str, patterns: tuple[str, ...]) -> str | None:
    return next((p for p in patterns if fnmatchcase(tool, p)), None)


@attrs.frozen
class AutoAnswer:
    """What an automatic answerer made of an ask: an answer (``value`` not None) or an
    escalation, and in both cases why, as ``_meta`` for the events that record it.

    A pure value so the session machine can consult an answerer and stay replayable: the
    answer is logged with its reasons, and a replay feeds the logged one back."""

    value: Any = None
    meta: dict[str, Any] = attrs.field(factory=dict)


Answerer = Callable[[AskUser], AutoAnswer]
"""Consulted by the session machine before an ask goes to a human (or is declined)."""
