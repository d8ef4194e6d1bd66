"""``cap policy check``: every permission request and ask of a log, decided again.

Why through the session machine: the decision a policy takes depends on the
risk, and the risk is the session machine's alone (the agent's claim, the
tool, its input, the logged symlink facts).  So each recorded request is fed
to a :class:`SessionMachine` built with the candidate policy, exactly as the
session actor fed it, and its answer (a decision, or a wait on a human) is
set next to the one the log holds.

Rules (``--rules FILE``, TOML) refine the candidate policy per tool::

    [[rule]]
    tool = "Bash"              # glob on the tool name (default "*")
    input = "git *"            # glob on the command, path or pattern (default "*")
    risk = ["low", "medium"]   # effective risks it applies to (default: all)
    decision = "allow"         # allow | deny | ask

The first rule that matches decides; none matching leaves the policy's
decision.  A rule never approves high risk without ``--allow-high-risk``
(it asks a human instead, or refuses when nobody can be asked).
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Sequence
from typing import Any, Literal

import attrs

from trio_cap.actors.session.machine import Emit, SessionMachine, State
from trio_cap.actors.session.policy import PermissionPolicy
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    AskAnswered,
    AskUser,
    PermissionDecided,
    PermissionPathsResolved,
    PermissionRequest,
    SessionConfig,
    SessionCreated,
    SessionInputRequired,
)

Verdict = Literal["allow", "deny", "ask", "none"]
"""What was (or would be) done with a request: approved, refused, left to a human, nothing."""


class RulesError(Exception):
    """The rules file cannot be used (one line: which rule and why)."""


@attrs.frozen
class Rule:
    decision: Literal["allow", "deny", "ask"]
    tool: str = "*"
    input: str = "*"
    risk: tuple[str, ...] = ("low", "medium", "high")

    def matches(self, tool: str, intent: dict[str, Any], risk: str | None) -> bool:
        if not fnmatch.fnmatchcase(tool, self.tool) or (risk or "high") not in self.risk:
            return False
        if self.input == "*":
            return True
        return any(isinstance(v, str) and fnmatch.fnmatchcase(v, self.input)
                   for v in (intent or {}).values())


def load_rules(path: str) -> tuple[Rule, ...]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise RulesError(f"--rules {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RulesError(f"--rules {path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise RulesError(f"--rules {path}: arrays or tables nested too deeply to read") from None
    listed = data.get("rule", [])
    if not isinstance(listed, list):
        raise RulesError(f"--rules {path}: rule must be an array of tables ([[rule]])")
    rules = []
    for i, raw in enumerate(listed, 1):
        where = f"--rules {path}: rule {i}"
        if not isinstance(raw, dict) or raw.get("decision") not in ("allow", "deny", "ask"):
            raise RulesError(f"{where}: decision must be allow, deny or ask")
        unknown = set(raw) - {"decision", "tool", "input", "risk"}
        if unknown:
            raise RulesError(f"{where}: unknown key {sorted(unknown)[0]!r}")
        risk = raw.get("risk", ["low", "medium", "high"])
        if isinstance(risk, str):
            risk = [risk]
        if not isinstance(risk, list) or not all(r in ("low", "medium", "high") for r in risk):
            raise RulesError(f"{where}: risk must name low, medium or high")
        for key in ("tool", "input"):
            if not isinstance(raw.get(key, "*"), str):
                raise RulesError(f"{where}: {key} must be a string (a glob)")
        rules.append(Rule(decision=raw["decision"], tool=raw.get("tool", "*"),
                          input=raw.get("input", "*"), risk=tuple(risk)))
    return tuple(rules)


@attrs.frozen
class Candidate:
    permissions: str | None = None
    """A policy name; None keeps each session's own."""
    allow_high_risk: bool = False
    rules: tuple[Rule, ...] = ()


@attrs.frozen
class Difference:
    session: str
    seq: int
    what: Literal["permission", "ask"]
    tool: str
    input: Any
    risk: str | None
    recorded: Verdict
    recorded_by: str
    candidate: Verdict
    candidate_by: str

    @property
    def widens(self) -> bool:
        """The candidate would approve what was not approved (refused, or still pending)."""
        return self.candidate == "allow" and self.recorded != "allow"


@attrs.define
class Report:
    permissions: int = 0
    asks: int = 0
    same: int = 0
    differences: list[Difference] = attrs.field(factory=list)

    @property
    def widened(self) -> int:
        return sum(d.widens for d in self.differences)


def _verdict(decision: str) -> Verdict:
    return "deny" if decision == "deny" else "allow"


def check_policy(streams: dict[str, list[Envelope]], candidate: Candidate) -> Report:
    report = Report()
    for sid, envs in streams.items():
        if envs and type(envs[0].event) is SessionCreated:
            _session(sid, envs, candidate, report)
    return report


def _machine(envs: Sequence[Envelope], candidate: Candidate) -> SessionMachine:
    created: SessionCreated = envs[0].event  # type: ignore[assignment]
    policy = PermissionPolicy(name=(candidate.permissions or created.permissions),  # type: ignore[arg-type]
                              allow_high_risk=candidate.allow_high_risk or (
                                  candidate.permissions is None and created.allow_high_risk),
                              human=created.human or candidate.permissions == "ask",
                              chosen=True, allow_tools=created.allow_tools,
                              deny_tools=created.deny_tools)
    config = next((e.event for e in envs if type(e.event) is SessionConfig), None) or \
        SessionConfig(cwd=created.cwd)
    machine = SessionMachine(created, config, policy)  # type: ignore[arg-type]
    machine.state = State.WORKING  # requests only come mid-turn; what a human gets is a wait
    return machine


def _session(sid: str, envs: Sequence[Envelope], candidate: Candidate, report: Report) -> None:
    machine = _machine(envs, candidate)
    decided = {e.event.req_id: e.event for e in envs  # type: ignore[attr-defined]
               if type(e.event) is PermissionDecided}
    answered = {e.event.ask_id: e.event for e in envs  # type: ignore[attr-defined]
                if type(e.event) is AskAnswered}
    for i, env in enumerate(envs):
        ev = env.event
        if type(ev) is PermissionRequest:
            report.permissions += 1
            before = envs[i - 1].event if i else None
            batch = [before, ev] if (type(before) is PermissionPathsResolved
                                     and before.req_id == ev.req_id) else [ev]  # type: ignore[union-attr]
            got, by, risk = _decide(machine, batch, env.seq, candidate, ev)
            old = decided.get(ev.req_id)
            rec: Verdict = _verdict(old.decision) if old else "none"
            rec_by = old.by if old else "nobody (still pending when the log ends)"
            if old is not None and old.by == "human" and got == "ask":
                got, by = rec, "human (asked again)"  # a human would be asked: same outcome
            _compare(report, Difference(sid, env.seq, "permission", ev.tool, ev.intent, risk,
                                        rec, rec_by, got, by))
        elif type(ev) is AskUser:
            report.asks += 1
            human = machine.policy.human
            got, by = ("ask", "human") if human else ("none", "policy:headless")
            old_ans = answered.get(ev.ask_id)
            rec = "none" if old_ans is None or old_ans.by == "policy:headless" else "ask"
            rec_by = old_ans.by if old_ans else "nobody"
            if old_ans is not None and old_ans.by == "policy:auto_answer":
                got, by = rec, old_ans.by  # the fleet's archive answers whatever the policy
            _compare(report, Difference(sid, env.seq, "ask", "ask_user", ev.prompt, None,
                                        rec, rec_by, got, by))


def _compare(report: Report, diff: Difference) -> None:
    if diff.recorded == diff.candidate:
        report.same += 1
    else:
        report.differences.append(diff)


def _decide(machine: SessionMachine, batch: list[Any], seq: int, candidate: Candidate,
            req: PermissionRequest) -> tuple[Verdict, str, str | None]:
    """The candidate's answer to one request: the machine's, then the first matching rule."""
    first = seq - len(batch) + 1
    outputs = machine.on_agent(batch, first)
    machine.state = State.WORKING
    machine.pending_permissions.clear()
    verdict: Verdict = "ask"
    by, risk = "human", None
    for out in outputs:
        if type(out) is Emit:
            for ev in out.events:
                if type(ev) is PermissionDecided:
                    verdict, by, risk = _verdict(ev.decision), ev.by, ev.risk
                elif type(ev) is SessionInputRequired:
                    verdict, by, risk = "ask", "human", ev.risk
    for rule in candidate.rules:
        if rule.matches(req.tool, req.intent, risk):
            wanted: Verdict = rule.decision
            if wanted == "allow" and risk == "high" and not candidate.allow_high_risk:
                wanted = "ask" if machine.policy.human else "deny"
            if wanted == "ask" and not machine.policy.human:
                wanted = "deny"  # nobody can be asked
            return wanted, f"rule tool={rule.tool} input={rule.input}", risk
    return verdict, by, risk
