"""The ACP agent side's per-session state and its pure permission policy.

Kept apart from the machine (``agent_side.py``), which decides *when* things
go out; this module decides what a permission request gets before and after
the client is asked, from values only (no log, no clock), so the decision is
the same on replay:

1. the command line's rules and the session's mode, in Claude Code's order
   (``agent_policy.decide``: availability, deny rules, allow rules, mode);
2. the client's "always" answers for the tool, remembered for the session;
3. high risk is never allowed without the client, unless ``--allow-high-risk``,
   and an "always allow" is never remembered for a high-risk call;
4. anything not settled by 1-3 asks the client; an answer that settles nothing
   (cancelled, an error, an option we did not offer) is a denial.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
from msgspec import UNSET

from trio_cap.actors.bindings import jsonrpc as rpc
from trio_cap.actors.bindings.acp import agent_render as render
from trio_cap.actors.bindings.acp import frames as f
from trio_cap.actors.bindings.acp.agent_effects import ClientError
from trio_cap.actors.bindings.stream_json import agent_policy as policy
from trio_cap.events.kinds import AskUser, Decision, PermissionRequest, Usage

MODES: dict[str, tuple[str, str]] = {
    "default": ("Ask", "Ask before every change and command"),
    "acceptEdits": ("Accept edits", "Allow file edits in the workspace; ask for commands"),
    "plan": ("Plan", "Read only: nothing may change"),
    "bypassPermissions": ("Bypass permissions", "Allow everything except high risk"),
}
"""ACP session modes (the ids Claude Code's own modes have, as claude-code-acp offers)."""

STOPS: dict[str, str] = {"end_turn": "end_turn", "max_tokens": "max_tokens",
                         "tool_use": "max_turn_requests", "stop_sequence": "end_turn",
                         "cancelled": "cancelled"}
"""CAP stop reason → ACP ``stopReason`` (``error`` is an error response instead)."""

OPTIONS = (
    f.PermissionOption(option_id="allow_once", name="Allow", kind="allow_once"),
    f.PermissionOption(option_id="allow_always", name="Always allow", kind="allow_always"),
    f.PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
    f.PermissionOption(option_id="reject_always", name="Always reject", kind="reject_always"),
)
_KIND = {o.option_id: o.kind for o in OPTIONS}
ANSWER_KEY = "answer"
"""The one property of the form an ask becomes (``elicitation/create``)."""


@attrs.frozen
class AgentSettings:
    """What the command line fixes for every session of the connection."""

    mode: str = "default"
    allowed: tuple[str, ...] = ()
    disallowed: tuple[str, ...] = ()
    allow_high_risk: bool = False
    model: str | None = None
    system_prompt: str | None = None
    max_turns: int | None = None
    budget_usd: float | None = None
    agent_version: str = ""
    bridged: str | None = None
    """The agent a ``--bridge`` drives (named in ``agentInfo``)."""


@attrs.define
class Turn:
    prompt_id: rpc.Id | None
    calls: dict[str, render.CallView] = attrs.field(factory=dict)
    current: str | None = None  # the tool call running now (the one a tool host serves)
    asks: set[rpc.Id] = attrs.field(factory=set)  # our requests to the client, open
    errors: list[str] = attrs.field(factory=list)
    usage: Usage | None = None
    cancelled: bool = False


@attrs.define
class Session:
    id: str
    cwd: str
    mode: str
    turn: Turn | None = None
    always: dict[str, bool] = attrs.field(factory=dict)  # tool → allowed (True) / rejected


@attrs.frozen
class Verdict:
    """A permission settled (``decision``) or left to the client (None), and why."""

    decision: Decision | None
    reason: str = ""
    by: str = "policy"


def decide(session: Session, settings: AgentSettings, event: PermissionRequest) -> Verdict:
    """Rules 1-3: what the request gets without asking (``decision`` None: ask)."""
    wire = policy.to_wire(event.tool, event.intent, session.cwd)
    ruled = policy.decide(mode=session.mode, tool=event.tool, scope=event.scope, wire=wire,
                          allowed=settings.allowed, disallowed=settings.disallowed,
                          prompts_on_stdio=True)
    high = event.risk_level == "high" and not settings.allow_high_risk
    remembered = session.always.get(event.tool)
    if ruled.verdict == "deny":
        return Verdict("deny", ruled.reason)
    if remembered is False:
        return Verdict("deny", f"the user always rejects {event.tool}", "client")
    if not high and ruled.verdict == "allow":
        return Verdict("allow_once", ruled.reason)
    if not high and remembered:
        return Verdict("allow_always", f"the user always allows {event.tool}", "client")
    return Verdict(None)


def answered(session: Session, value: Any, tool: str, risk: str) -> Verdict:
    """Rule 4: the client's answer (a decoded result or a :class:`ClientError`)."""
    if isinstance(value, ClientError):
        return Verdict("deny", f"the client could not answer: {value.message}", "client")
    outcome = value.outcome
    if isinstance(outcome, f.Cancelled):
        return Verdict("deny", "the client cancelled the request", "client")
    kind = _KIND.get(outcome.option_id)
    if kind is None:
        return Verdict("deny", f"the client chose an unknown option {outcome.option_id!r}",
                       "client")
    if kind == "allow_always" and risk != "high":
        session.always[tool] = True
    elif kind == "reject_always":
        session.always[tool] = False
    if kind == "allow_always":
        return Verdict("allow_always", by="client")
    if kind == "allow_once":
        return Verdict("allow_once", by="client")
    return Verdict("deny", "the user rejected this tool call in the client", "client")


_YES = ("yes", "y")
_NO = ("no", "n")


def yes_no(form: dict[str, Any] | None) -> tuple[str, str] | None:
    """The (yes, no) answers of an ask whose form is a yes/no choice (a PTY agent's
    ``(y/n)`` prompt), so a client without elicitation can answer it as a permission."""
    if not isinstance(form, dict):
        return None
    values = form.get("enum")
    if values is None and isinstance(form.get("oneOf"), list):
        values = [o.get("const") for o in form["oneOf"] if isinstance(o, dict)]
    if not isinstance(values, list) or len(values) != 2:
        return None
    yes = next((v for v in values if isinstance(v, str) and v.lower() in _YES), None)
    no = next((v for v in values if isinstance(v, str) and v.lower() in _NO), None)
    return (yes, no) if yes is not None and no is not None else None


def yes_no_answer(value: Any, answers: tuple[str, str]) -> str | None:
    """A permission answer to a yes/no ask: allow → yes, reject → no, else no answer."""
    chosen = getattr(getattr(value, "outcome", None), "option_id", "")
    kind = _KIND.get(chosen, "")
    return answers[0] if kind.startswith("allow") else answers[1] if kind else None


def question_params(session_id: str, call_id: str, question: str) -> f.RequestPermissionParams:
    """A yes/no question asked as a permission (for clients without form elicitation)."""
    return f.RequestPermissionParams(
        session_id=session_id, options=OPTIONS, tool_call=f.ToolCallFields(
            tool_call_id=call_id, title=question, kind="other", status="pending"))


def elicitation_params(session_id: str, call_id: str | None,
                       event: AskUser) -> f.ElicitationParams:
    """An ask as a one-field form: its own form (or text) as the property ``answer``."""
    prop = dict(event.form) if event.form else {"type": "string"}
    prop.setdefault("title", event.prompt)
    return f.ElicitationParams(
        message=event.prompt, mode="form", session_id=session_id,
        tool_call_id=call_id if call_id else UNSET,
        requested_schema={"type": "object", "properties": {ANSWER_KEY: prop},
                          "required": [ANSWER_KEY]})


def prompt_text(blocks: Sequence[f.ContentBlock]) -> str:
    """The prompt as the brain reads it: text as given, a link as ``@uri``, an embedded
    resource as its text under its uri."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, f.EmbeddedResource) and isinstance(block.resource.text, str):
            parts.append(f"{block.resource.uri}:\n{block.resource.text}")
        elif isinstance(block, f.ResourceLink):
            parts.append(f"@{block.uri}")
        else:
            parts.append(f.content_text(block))
    return "\n".join(p for p in parts if p)


def turn_meta(turn: Turn) -> dict[str, Any]:
    """The prompt response's ``_meta``: the turn's usage and its non-fatal errors."""
    meta: dict[str, Any] = {}
    if turn.usage is not None:
        u = turn.usage
        meta["cap.usage"] = {"model": u.model_id, "input_tokens": u.input_tokens,
                             "output_tokens": u.output_tokens,
                             "cost_usd_estimate": u.cost_usd_estimate}
    if turn.errors:
        meta["cap.errors"] = list(turn.errors)
    return meta
