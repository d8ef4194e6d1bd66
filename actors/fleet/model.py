"""The fleet file as typed values: what :mod:`validate` builds once every check passed.

Frozen attrs classes, so a fleet handed to the machine cannot change under it; the
routes are one class per pattern because each pattern has its own rule for when it
fires (see :mod:`machine`).
"""

from __future__ import annotations

import attrs

WORKTREE_MODES = ("git", "dirs", "none")
"""``git``: one git worktree per session; ``dirs``: a plain directory per session (a repo
that is not git); ``none``: every session works in the repo itself."""

PATTERNS = ("pipeline", "fan_out", "join", "race", "by_subtask")


@attrs.frozen
class Member:
    """One session of the fleet."""

    id: str
    agent: str = "cap-agent"
    binding: str | None = None
    model: str | None = None
    budget_usd: float | None = None
    permissions: str | None = None
    """None: the fleet's policy."""
    allow_high_risk: bool | None = None
    """None: the fleet's setting."""
    role: str | None = None
    """The session's system prompt."""
    script: str | None = None
    """trio-cap's scripted agent only: its script file (absolute once loaded)."""
    start: bool | None = None
    """Whether it gets the fleet's task at the start; None: :func:`entry_members` decides."""
    allow_tools: tuple[str, ...] = ()
    """Added to the fleet's ``allow_tools``."""
    deny_tools: tuple[str, ...] = ()
    """Added to the fleet's ``deny_tools``."""
    auto_answer: bool | None = None
    """False: its asks skip the fleet's auto-answerer; None: the fleet's setting."""


@attrs.frozen
class Pipeline:
    """``a.done → b → c``: each stage's whole final text is the next stage's input."""

    stages: tuple[str, ...]
    rounds: int | None = None

    @property
    def edges(self) -> tuple[tuple[str, str], ...]:
        return tuple(zip(self.stages, self.stages[1:], strict=False))


@attrs.frozen
class FanOut:
    """One session's result goes to each of many."""

    source: str
    targets: tuple[str, ...]
    rounds: int | None = None

    @property
    def edges(self) -> tuple[tuple[str, str], ...]:
        return tuple((self.source, t) for t in self.targets)


@attrs.frozen
class Join:
    """Many results, collected, go to one session once every source is done."""

    sources: tuple[str, ...]
    target: str
    rounds: int | None = None

    @property
    def edges(self) -> tuple[tuple[str, str], ...]:
        return tuple((s, self.target) for s in self.sources)


@attrs.frozen
class Race:
    """The first source done wins (its text goes to ``target`` if any); the rest are
    cancelled."""

    sources: tuple[str, ...]
    target: str | None = None
    rounds: int | None = 1

    @property
    def edges(self) -> tuple[tuple[str, str], ...]:
        return tuple((s, self.target) for s in self.sources if self.target)


@attrs.frozen
class BySubtask:
    """Plan entries go to the session each is assigned to: the fleet file's ``[[plan]]``,
    and (``source`` set) the entries of that session's own plan, assigned by a
    ``_meta`` ``cap.assigned_to`` or a ``<session-id>:`` prefix."""

    source: str | None = None
    rounds: int | None = 1

    @property
    def edges(self) -> tuple[tuple[str, str], ...]:
        return ()


Route = Pipeline | FanOut | Join | Race | BySubtask


@attrs.frozen
class Subtask:
    """A master-plan entry from the fleet file."""

    id: str
    content: str
    assigned_to: str
    depends_on: tuple[str, ...] = ()


@attrs.frozen
class Setup:
    """What each new working directory gets before its agent starts: untracked files the
    agents need (``.env``) copied from the checkout, then install commands, each bounded."""

    copy: tuple[str, ...] = ()
    """Paths relative to the checkout (files or folders)."""
    run: tuple[tuple[str, ...], ...] = ()
    """argv lists, run in the working directory in order, never through a shell."""
    timeout_s: float = 300.0
    """Per command: a command still running then is killed (its whole process group)."""


@attrs.frozen
class AutoAnswerSettings:
    """``[auto_answer]``: members' asks answered from a folder of markdown files
    (:mod:`answerer`) when the best BM25 match scores at least ``threshold``."""

    archive: str
    """Absolute once loaded."""
    threshold: float = 3.0
    max_passages: int = 3


@attrs.frozen
class RateLimit:
    """How a fleet waits out a member's rate limit (``cap.error`` ``rate_limit``): paused
    for the agent's retry-after (or ``backoff_s``), each repeat in a row at least twice
    as long as the last (at most ``max_backoff_s``, never less than the retry-after),
    and given up — the member's work failed — after ``retries`` pauses in a row."""

    retries: int = 5
    backoff_s: float = 30.0
    max_backoff_s: float = 900.0


@attrs.frozen
class Fleet:
    name: str
    task: str
    sessions: tuple[Member, ...]
    routes: tuple[Route, ...] = ()
    plan: tuple[Subtask, ...] = ()
    repo: str = "."
    """Absolute once loaded."""
    base: str | None = None
    """Base branch of the worktrees; None: the repo's current branch."""
    worktrees: str = "git"
    budget_usd: float | None = None
    permissions: str = "deny"
    allow_high_risk: bool = False
    hop_limit: int = 4
    """How many mediated messages may follow one another (A → B → A …) before the next is
    refused."""
    setup: Setup = Setup()
    rate_limit: RateLimit = RateLimit()
    allow_tools: tuple[str, ...] = ()
    """Tool-name globs every member's policy approves without asking (high risk excepted)."""
    deny_tools: tuple[str, ...] = ()
    """Tool-name globs every member's policy refuses without asking."""
    auto_answer: AutoAnswerSettings | None = None
    """None: asks go to a human, or are declined headless."""
    source: str = "<fleet>"

    def tools(self, member: Member) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(allow, deny) for one member: the fleet's lists and its own, added up."""
        return ((*self.allow_tools, *member.allow_tools),
                (*self.deny_tools, *member.deny_tools))

    def answers(self, member: Member) -> bool:
        """Whether ``member``'s asks go to the auto-answerer first."""
        return self.auto_answer is not None and member.auto_answer is not False

    def entry_members(self) -> tuple[str, ...]:
        """Who gets the task at the start: each session with ``start = true``, and (unless
        ``start = false``) each that no route or plan entry feeds — where a join back to
        the session that fanned out does not count (that is the lead); with a
        ``by_subtask`` route from a session's own plan, sessions with no route at all wait
        for the entries it assigns them."""
        fed: set[str] = set()
        for route in self.routes:
            for _a, b in route.edges:
                if isinstance(route, Join) and any(
                        isinstance(r, FanOut) and r.source == b for r in self.routes):
                    continue
                fed.add(b)
        fed |= {e.assigned_to for e in self.plan}
        planners = {r.source for r in self.routes if isinstance(r, BySubtask) and r.source}
        routed = {a for r in self.routes for a, _ in r.edges}
        routed |= {s for r in self.routes if isinstance(r, Race) for s in r.sources}
        out = []
        for m in self.sessions:
            if m.start is not None:
                if m.start:
                    out.append(m.id)
                continue
            if m.id in fed or (planners and m.id not in planners and m.id not in routed):
                continue
            out.append(m.id)
        return tuple(out)

    def member(self, member_id: str) -> Member:
        return next(m for m in self.sessions if m.id == member_id)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(m.id for m in self.sessions)
