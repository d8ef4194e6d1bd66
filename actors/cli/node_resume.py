"""A node picking up a lost node's sessions: judged under the takeover lock, then run.

The rules are ``cap run --resume``'s (:mod:`.resume_cmd`): the run that started
the session is found by its session id (``run.started`` names it), its log is
replayed into the machine the dead node left, the agent is resumed or
restarted with the transcript, and the prompts not yet run are run.  What a
node cannot do is said up front, before ``node.takeover`` is written, so the
session ends ``node_lost`` with the reason instead of failing half-way: a run
that asks a human at a terminal (a node has none), a script or agent that is
gone, a log that does not replay.
"""

from __future__ import annotations

import argparse

import attrs

from trio_cap.actors.cli.common import UsageError
from trio_cap.actors.cli.resume_cmd import args_for, plan_for, resume_session
from trio_cap.actors.cli.run_cmd import Outcome, Plan_, resolve_checked
from trio_cap.actors.orchestrator import Orchestrator
from trio_cap.actors.replay.resume import CannotResume, ResumePoint, find_resume_point, rebuild
from trio_cap.events.log.base import EventLog


@attrs.frozen
class Ready:
    """A session judged resumable: what its resume needs."""

    point: ResumePoint
    args: argparse.Namespace
    plan: Plan_


@attrs.define
class Resumed:
    """How a resumed session went: ``how`` it went on, its final ``status``."""

    session_id: str
    how: str | None = None
    status: str | None = None
    problem: str | None = None

    @property
    def completed(self) -> bool:
        return self.status == "completed"


class NodeResumer:
    """Judges the lost node's sessions (:meth:`judge`, the takeover's ``resumable``) and
    runs the ones it accepted (:meth:`run`) in this node's orchestrator."""

    def __init__(self, log: EventLog, where: str) -> None:
        self.log = log
        self.where = where
        self.ready: dict[str, Ready] = {}

    async def judge(self, session_id: str) -> str | None:
        try:
            point = find_resume_point(await self.log.read_async(), {}, session_id)
        except CannotResume as exc:
            return str(exc)
        if point.session_id is None:
            return "its node died before the session was created"
        run = point.run
        if run.permissions == "ask":
            return ("its run asks a human at a terminal (--permissions ask), which a node "
                    "does not have")
        try:
            rebuild(point)
            agent = await resolve_checked(run.agent, run.binding)
            plan = plan_for(run, agent, self.where)
        except (CannotResume, UsageError) as exc:
            return str(exc)
        self.ready[session_id] = Ready(point, args_for(run), plan)
        return None

    async def run(self, orch: Orchestrator, session_id: str) -> Resumed:
        ready = self.ready.pop(session_id)
        out = Outcome()
        result = Resumed(session_id)
        try:
            result.how = await resume_session(orch, ready.args, ready.plan, ready.point, out,
                                              follow=False)
        except (CannotResume, UsageError) as exc:  # judged resumable: only a race gets here
            result.problem = str(exc)
        result.status = out.status
        return result
