"""From a fleet file (TOML or YAML) to a :class:`~.model.Fleet`, or to every problem it has.

Nothing is spawned until the whole file is known good, and all problems are reported
at once, each as ``file: field.path: problem`` — fixing a fleet one error per run,
after its worktrees were made, would be miserable.  The agents are checked too
(:func:`check_agents`): a name no manifest answers to, or a binding it does not offer,
is a problem of the file, not a failure half-way through a run.
"""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from trio_cap.actors.fleet.model import (
    PATTERNS,
    WORKTREE_MODES,
    BySubtask,
    FanOut,
    Fleet,
    Join,
    Member,
    Pipeline,
    Race,
    Route,
    Subtask,
)
from trio_cap.actors.fleet.validate_ops import check_rate_limit, check_setup
from trio_cap.actors.fleet.validate_policy import check_auto_answer, check_tools
from trio_cap.actors.session.policy import POLICIES

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")
"""Fleet and session ids: they become branch names, directory names and stream names."""

TOP_KEYS = {"name", "task", "task_file", "repo", "base", "worktrees", "budget_usd",
            "permissions", "allow_high_risk", "hop_limit", "session", "sessions", "route",
            "routes", "plan", "setup", "rate_limit", "allow_tools", "deny_tools", "auto_answer"}
SESSION_KEYS = {"id", "agent", "binding", "model", "budget_usd", "permissions",
                "allow_high_risk", "role", "system_prompt", "script", "start", "allow_tools",
                "deny_tools", "auto_answer"}
PLAN_KEYS = {"id", "content", "assigned_to", "depends_on"}


class FleetInvalid(Exception):
    """A fleet file failed validation; ``problems`` are its lines, each naming the file."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__("\n".join(problems))


class _Checker:
    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[str] = []

    def bad(self, path: str, message: str) -> None:
        self.problems.append(f"{self.source}: {path}: {message}" if path
                             else f"{self.source}: {message}")

    def text(self, raw: dict, key: str, path: str, *, required: bool = False) -> str | None:
        value = raw.get(key)
        if value is None:
            if required:
                self.bad(path, "missing (required)")
            return None
        if not isinstance(value, str) or not value.strip():
            self.bad(path, f"expected a non-empty string, got {value!r}")
            return None
        return value

    def ident(self, raw: dict, key: str, path: str) -> str | None:
        value = self.text(raw, key, path, required=True)
        if value is not None and not NAME.match(value):
            self.bad(path, f"{value!r} is not a usable id (letters, digits, '-', '_'; "
                           "at most 63, starting with a letter or digit)")
            return None
        return value

    def budget(self, raw: dict, key: str, path: str) -> float | None:
        value = raw.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or value < 0:
            self.bad(path, f"expected dollars as a number >= 0, got {value!r}")
            return None
        return float(value)

    def flag(self, raw: dict, key: str, path: str) -> bool | None:
        value = raw.get(key)
        if value is not None and not isinstance(value, bool):
            self.bad(path, f"expected true or false, got {value!r}")
            return None
        return value

    def policy(self, raw: dict, key: str, path: str) -> str | None:
        value = raw.get(key)
        if value is not None and value not in POLICIES:
            self.bad(path, f"{value!r} is not a policy: one of {', '.join(POLICIES)}")
            return None
        return value

    def rounds(self, raw: dict, path: str, default: int | None) -> int | None:
        value = raw.get("rounds", default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            self.bad(f"{path}.rounds", f"expected a whole number >= 1, got {value!r}")
            return default
        return value

    def ids(self, value: Any, path: str, known: set[str], *, at_least: int = 1) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.bad(path, f"expected a list of session ids, got {value!r}")
            return ()
        if len(value) < at_least:
            self.bad(path, f"needs at least {at_least} session ids")
        for i, sid in enumerate(value):
            if sid not in known:
                self.bad(f"{path}[{i}]", f"unknown session {sid!r}" + _known(known))
        if len(set(value)) != len(value):
            self.bad(path, "names a session twice")
        return tuple(value)

    def one(self, value: Any, path: str, known: set[str]) -> str | None:
        if not isinstance(value, str):
            self.bad(path, f"expected a session id, got {value!r}")
            return None
        if value not in known:
            self.bad(path, f"unknown session {value!r}" + _known(known))
        return value


def _known(known: set[str]) -> str:
    return f" (sessions: {', '.join(sorted(known))})" if known else ""


def load_fleet(path: str | Path, *, task: str | None = None) -> Fleet:
    """Read and check a fleet file; FleetInvalid lists every problem. ``task`` replaces the
    file's task."""
    path = Path(path)
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except IsADirectoryError:
        raise FleetInvalid(source, [f"{source}: is a directory, not a fleet file"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise FleetInvalid(source, [f"{source}: cannot read it: {why}"]) from None
    raw = parse_text(text, source, yaml_file=path.suffix.lower() in (".yaml", ".yml"))
    return check_fleet(raw, source, base_dir=path.parent.resolve(), task=task)


def parse_text(text: str, source: str, *, yaml_file: bool) -> dict:
    try:
        raw = yaml.safe_load(text) if yaml_file else tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FleetInvalid(source, [f"{source}: not valid TOML: {exc}"]) from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FleetInvalid(source, [f"{source}: not valid YAML{at}: {what}"]) from None
    except RecursionError:
        raise FleetInvalid(source, [f"{source}: not a fleet file: arrays or tables nested too "
                                    "deeply to read"]) from None
    if not isinstance(raw, dict):
        raise FleetInvalid(source, [f"{source}: expected a table of fleet settings at the top"])
    return raw


def check_fleet(raw: dict, source: str, *, base_dir: Path, task: str | None = None) -> Fleet:
    c = _Checker(source)
    for key in sorted(set(raw) - TOP_KEYS, key=str):
        c.bad(str(key), "unknown key" + _hint(key, TOP_KEYS))
    name = c.ident(raw, "name", "name") or "fleet"
    file_task = c.text(raw, "task", "task")
    task_file = c.text(raw, "task_file", "task_file")
    if file_task and task_file:
        c.bad("task_file", "give task or task_file, not both")
    if task_file:
        try:
            file_task = (base_dir / task_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            c.bad("task_file", f"cannot read {task_file}: {getattr(exc, 'strerror', None) or exc}")
    repo = c.text(raw, "repo", "repo") or "."
    base = c.text(raw, "base", "base")
    worktrees = raw.get("worktrees", "git")
    if worktrees not in WORKTREE_MODES:
        c.bad("worktrees", f"{worktrees!r}: one of {', '.join(WORKTREE_MODES)}")
        worktrees = "git"
    budget = c.budget(raw, "budget_usd", "budget_usd")
    permissions = c.policy(raw, "permissions", "permissions") or "deny"
    allow_high = c.flag(raw, "allow_high_risk", "allow_high_risk") or False
    hop_limit = raw.get("hop_limit", 4)
    if isinstance(hop_limit, bool) or not isinstance(hop_limit, int) or hop_limit < 0:
        c.bad("hop_limit", f"expected a whole number >= 0, got {hop_limit!r}")
        hop_limit = 4

    setup = check_setup(c, raw.get("setup"), worktrees)
    rate_limit = check_rate_limit(c, raw.get("rate_limit"))
    allow_tools, deny_tools = check_tools(c, raw, "")
    auto_answer = check_auto_answer(c, raw.get("auto_answer"), base_dir)
    members = _members(c, _table_list(c, raw, "session"), base_dir, budget)
    for i, m in enumerate(members):
        if m.auto_answer and auto_answer is None:
            c.bad(f"session[{i}].auto_answer", "the fleet has no [auto_answer] archive enabled")
    _check_bypass(c, permissions, allow_high, members)
    known = {m.id for m in members}
    routes = _routes(c, _table_list(c, raw, "route"), known)
    plan = _plan(c, raw.get("plan", []), known)
    if plan and not any(isinstance(r, BySubtask) for r in routes):
        routes = (*routes, BySubtask())
    _check_cycles(c, routes)
    final_task = task if task is not None else file_task
    if c.problems:
        raise FleetInvalid(source, c.problems)
    fleet = Fleet(name=name, task=final_task or "", sessions=members, routes=routes, plan=plan,
                 repo=str((base_dir / repo).resolve()), base=base, worktrees=worktrees,
                 budget_usd=budget, permissions=permissions, allow_high_risk=allow_high,
                 hop_limit=hop_limit, setup=setup, rate_limit=rate_limit, allow_tools=allow_tools,
                 deny_tools=deny_tools, auto_answer=auto_answer, source=source)
    if not fleet.entry_members() and not plan:
        raise FleetInvalid(source, [f"{source}: session: no session gets the task (every one "
                                    "is fed by a route): set start = true on the first"])
    return fleet


def _hint(key: Any, known: set[str]) -> str:
    import difflib

    close = difflib.get_close_matches(str(key), sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _table_list(c: _Checker, raw: dict, key: str) -> list[tuple[str, Any]]:
    """``[[session]]`` in TOML, ``sessions:`` in YAML: either spelling, not both."""
    plural = key + "s"
    if key in raw and plural in raw:
        c.bad(plural, f"give {key} or {plural}, not both")
    which = key if key in raw else plural
    value = raw.get(which, [])
    if not isinstance(value, list):
        c.bad(which, "expected a list of tables")
        return []
    return [(f"{which}[{i}]", item) for i, item in enumerate(value)]


def _members(c: _Checker, items: list[tuple[str, Any]], base_dir: Path,
             fleet_budget: float | None) -> tuple[Member, ...]:
    members: list[Member] = []
    seen: set[str] = set()
    if not items:
        c.bad("session", "a fleet needs at least one session")
    for path, raw in items:
        if not isinstance(raw, dict):
            c.bad(path, "expected a table")
            continue
        for key in sorted(set(raw) - SESSION_KEYS, key=str):
            c.bad(f"{path}.{key}", "unknown key" + _hint(key, SESSION_KEYS))
        sid = c.ident(raw, "id", f"{path}.id")
        if sid is not None and sid in seen:
            c.bad(f"{path}.id", f"session {sid!r} is defined twice")
        agent = raw.get("agent", "cap-agent")
        if not isinstance(agent, str) or not agent.strip():
            c.bad(f"{path}.agent", f"expected an agent name or manifest path, got {agent!r}")
            agent = "cap-agent"
        elif (agent.endswith(".toml") or "/" in agent) and ":" not in agent.split("/")[0]:
            manifest = base_dir / agent  # a path, not an ad-hoc spec like pty:CMD
            if not manifest.is_file():
                c.bad(f"{path}.agent", f"manifest {agent} does not exist")
            agent = str(manifest)
        budget = c.budget(raw, "budget_usd", f"{path}.budget_usd")
        if budget is not None and fleet_budget is not None and budget > fleet_budget:
            c.bad(f"{path}.budget_usd", f"${budget} is more than the fleet's whole budget "
                                        f"(${fleet_budget})")
        role = c.text(raw, "role", f"{path}.role")
        prompt = c.text(raw, "system_prompt", f"{path}.system_prompt")
        if role and prompt:
            c.bad(f"{path}.system_prompt", "give role or system_prompt, not both")
        script = c.text(raw, "script", f"{path}.script")
        if script is not None:
            script = str((base_dir / script).resolve())
            _check_script(c, f"{path}.script", script)
        allow_tools, deny_tools = check_tools(c, raw, path)
        if sid is None:
            continue
        seen.add(sid)
        members.append(Member(
            id=sid, agent=agent, binding=c.text(raw, "binding", f"{path}.binding"),
            model=c.text(raw, "model", f"{path}.model"), budget_usd=budget,
            permissions=c.policy(raw, "permissions", f"{path}.permissions"),
            allow_high_risk=c.flag(raw, "allow_high_risk", f"{path}.allow_high_risk"),
            role=role or prompt, script=script, start=c.flag(raw, "start", f"{path}.start"),
            allow_tools=allow_tools, deny_tools=deny_tools,
            auto_answer=c.flag(raw, "auto_answer", f"{path}.auto_answer")))
    return tuple(members)


def _check_bypass(c: _Checker, permissions: str, allow_high: bool,
                  members: tuple[Member, ...]) -> None:
    """Under bypass the agent asks nothing, so nothing could stop a high-risk call: a fleet
    may use it only where the file accepts high risk in so many words."""
    why = ("bypass lets the agent run every tool without asking, high risk included: "
           "set allow_high_risk = true to accept that, or use allow")
    if permissions == "bypass" and not allow_high and \
            all(m.permissions not in (None, "bypass") or m.allow_high_risk for m in members):
        pass  # every session overrides it
    elif permissions == "bypass" and not allow_high:
        c.bad("permissions", why)
    for i, m in enumerate(members):
        high = allow_high if m.allow_high_risk is None else m.allow_high_risk
        if m.permissions == "bypass" and not high:
            c.bad(f"session[{i}].permissions", why)


def _check_script(c: _Checker, path: str, script: str) -> None:
    from trio_cap.actors.agent.script import ScriptError, load_script

    try:
        load_script(script)
    except ScriptError as exc:
        for problem in exc.problems:
            c.bad(path, problem)
    except OSError as exc:
        c.bad(path, f"cannot read {script}: {exc.strerror or exc}")


def _routes(c: _Checker, items: list[tuple[str, Any]], known: set[str]) -> tuple[Route, ...]:
    routes: list[Route] = []
    for path, raw in items:
        if not isinstance(raw, dict):
            c.bad(path, "expected a table")
            continue
        patterns = [k for k in raw if k in PATTERNS]
        extra = set(raw) - set(PATTERNS) - {"rounds"}
        for key in sorted(extra, key=str):
            c.bad(f"{path}.{key}", "unknown key" + _hint(key, set(PATTERNS) | {"rounds"}))
        if len(patterns) != 1:
            c.bad(path, f"give exactly one pattern of {', '.join(PATTERNS)}"
                        + (f", not {len(patterns)}" if patterns else ""))
            continue
        kind = patterns[0]
        body = raw[kind]
        where = f"{path}.{kind}"
        if kind == "pipeline":
            stages = c.ids(body, where, known, at_least=2)
            routes.append(Pipeline(stages, c.rounds(raw, path, None)))
            continue
        if not isinstance(body, dict):
            c.bad(where, "expected a table like { from = ..., to = ... }")
            continue
        allowed = {"fan_out": {"from", "to"}, "join": {"from", "to"}, "race": {"from", "to"},
                   "by_subtask": {"from"}}[kind]
        for key in sorted(set(body) - allowed, key=str):
            c.bad(f"{where}.{key}", "unknown key" + _hint(key, allowed))
        if kind == "fan_out":
            routes.append(FanOut(c.one(body.get("from"), f"{where}.from", known) or "",
                                 c.ids(body.get("to"), f"{where}.to", known),
                                 c.rounds(raw, path, None)))
        elif kind == "join":
            routes.append(Join(c.ids(body.get("from"), f"{where}.from", known, at_least=2),
                               c.one(body.get("to"), f"{where}.to", known) or "",
                               c.rounds(raw, path, None)))
        elif kind == "race":
            target = body.get("to")
            routes.append(Race(c.ids(body.get("from"), f"{where}.from", known, at_least=2),
                               c.one(target, f"{where}.to", known) if target is not None
                               else None, c.rounds(raw, path, 1)))
        else:
            source = body.get("from")
            routes.append(BySubtask(c.one(source, f"{where}.from", known)
                                    if source is not None else None, c.rounds(raw, path, 1)))
    return tuple(routes)


def _plan(c: _Checker, raw: Any, known: set[str]) -> tuple[Subtask, ...]:
    if not isinstance(raw, list):
        c.bad("plan", "expected a list of tables")
        return ()
    entries: list[Subtask] = []
    named = [item.get("id") for item in raw if isinstance(item, dict)]
    for i, item in enumerate(raw):
        path = f"plan[{i}]"
        if not isinstance(item, dict):
            c.bad(path, "expected a table")
            continue
        for key in sorted(set(item) - PLAN_KEYS, key=str):
            c.bad(f"{path}.{key}", "unknown key" + _hint(key, PLAN_KEYS))
        eid = c.ident(item, "id", f"{path}.id")
        content = c.text(item, "content", f"{path}.content", required=True)
        who = c.one(item.get("assigned_to"), f"{path}.assigned_to", known)
        deps = item.get("depends_on", [])
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            c.bad(f"{path}.depends_on", f"expected a list of plan entry ids, got {deps!r}")
            deps = []
        if eid and named.count(eid) > 1 and named.index(eid) < i:
            c.bad(f"{path}.id", f"plan entry {eid!r} is defined twice")
        for j, dep in enumerate(deps):
            if dep not in named:
                c.bad(f"{path}.depends_on[{j}]", f"unknown plan entry {dep!r}")
        if eid and content and who:
            entries.append(Subtask(eid, content, who, tuple(deps)))
    cycle = _cycle({e.id: set(e.depends_on) for e in entries})
    if cycle:
        c.bad("plan", f"entries depend on each other in a circle: {' → '.join(cycle)}")
    return tuple(entries)


def _check_cycles(c: _Checker, routes: tuple[Route, ...]) -> None:
    """A cycle of routes that all fire every time is a fleet that never ends."""
    graph: dict[str, set[str]] = {}
    for route in routes:
        if route.rounds is None:
            for a, b in route.edges:
                graph.setdefault(a, set()).add(b)
    cycle = _cycle(graph)
    if cycle:
        c.bad("route", f"cycle {' → '.join(cycle)} has no exit: give one of its routes "
                       "rounds = N")


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


async def check_agents(fleet: Fleet) -> list[str]:
    """Every session's agent resolved (and its binding offered), as problems of the file."""
    from trio_cap.actors.manifest import BindingNotOffered
    from trio_cap.actors.orchestrator import UnknownAgent, resolve

    problems = []
    for i, member in enumerate(fleet.sessions):
        try:
            resolved = await resolve(member.agent)
        except UnknownAgent as exc:
            first = str(exc).splitlines()[0].rstrip(":")
            problems.append(f"{fleet.source}: session[{i}].agent: {first}")
            continue
        if member.binding is not None:
            try:
                resolved.plan(force=member.binding)
            except BindingNotOffered as exc:
                first = str(exc).splitlines()[0]
                problems.append(f"{fleet.source}: session[{i}].binding: {first}")
    return problems
