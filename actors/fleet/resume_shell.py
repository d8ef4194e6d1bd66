"""The Trio shell of ``cap fleet resume``: the members' sessions picked up, then the fleet
run on from the state its log rebuilt (:mod:`.resume`).

It is the fleet's own shell (:class:`~.runner._Shell`) started differently: no new
working directories (the ones the log names are reused, and one that is gone is an
error — a new one would lose the member's work), no setup steps, and each member whose
session had not ended is picked up the way ``cap run --resume`` picks up a session —
its machine rebuilt from its stream, the turn the crash cut queued again with its
original input, the agent resumed (``--resume``) or restarted with the transcript —
so a message delivered but not consumed reaches the re-run turn once, from the
session, never from the fleet a second time.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

import trio

from trio_cap.actors.fleet import worktrees
from trio_cap.actors.fleet.answer_shell import open_answerer
from trio_cap.actors.fleet.machine import FleetMachine
from trio_cap.actors.fleet.model import Fleet, Member
from trio_cap.actors.fleet.resume import FleetPoint, MemberLog, actions, wakes
from trio_cap.actors.fleet.runner import (
    CLOSE_GRACE,
    FleetOutcome,
    FleetSetupError,
    _Shell,
)
from trio_cap.actors.orchestrator import Session
from trio_cap.actors.replay.resume import (
    RESUME_CAPABILITY,
    CannotResume,
    ResumePoint,
    rebuild,
    reconcile,
    resumed_event,
    transcript_context,
)
from trio_cap.actors.session.machine import SessionMachine
from trio_cap.actors.session.policy import Answerer
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    TERMINAL_EVENTS,
    Artifact,
    FleetFailed,
    FleetMember,
    InputInjected,
    RunStarted,
    SessionStarting,
    SessionWorking,
)


async def resume_fleet(orch, fleet: Fleet, point: FleetPoint, *,  # type: ignore[no-untyped-def]
                       on_event: Callable[[Envelope], None] | None = None) -> FleetOutcome:
    """Go on with the fleet run ``point`` describes until it ends (as :func:`run_fleet`)."""
    dirs = _workdirs(fleet, point)
    shell = _ResumeShell(orch, fleet, on_event, False, point.started.run)
    starts = await shell.judge(point)  # nothing written yet: a refusal leaves it resumable
    try:
        return await shell.resume(point, dirs, starts)
    except BaseException:
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + CLOSE_GRACE
            await shell.abandon("stopped before it finished")
        raise


def _workdirs(fleet: Fleet, point: FleetPoint) -> dict[str, worktrees.Workdir]:
    """The members' working directories as the log says the run made them; one that is
    gone is an error (its member's work went with it: nothing to go on with)."""
    out = {}
    for mid in fleet.ids:
        wt = point.worktrees.get(mid)
        if wt is None and fleet.worktrees != "none":
            raise FleetSetupError(f"the run died before it logged {mid}'s working "
                                  "directory: run the fleet again (cap fleet run)")
        if wt is None:
            log = point.members.get(mid)
            out[mid] = worktrees.Workdir(mid, log.cwd if log else point.started.repo, "none")
            continue
        if not os.path.isdir(wt.path):
            raise FleetSetupError(f"{mid}'s working directory {wt.path} is gone (the log "
                                  "says the run made it); cannot go on without its work")
        out[mid] = worktrees.Workdir(mid, wt.path, "git" if wt.mode == "git" else "dir",
                                     wt.branch, wt.base, wt.base_ref, point.started.repo)
    return out


class _ResumeShell(_Shell):
    answerer: Answerer | None = None

    async def resume(self, point: FleetPoint, dirs: dict[str, worktrees.Workdir],
                     starts: list[Callable[[], Awaitable[Session]]]) -> FleetOutcome:
        self.machine = point.machine
        self.workdirs = dirs
        self.diffed = set(point.diffed)
        first = self.orch.log.last_seq + 1
        async with trio.open_nursery() as nursery:
            if self.on_event is not None:
                nursery.start_soon(self._print, first)
            await self.emit(point.resumed_event())
            follow_from = self.orch.log.last_seq + 1
            await self._open_answerer(bool(starts))
            for log, start in zip(point.live_sessions, starts, strict=True):
                session = self.sessions[log.member] = await start()
                if not log.listed:  # created, then the run died before it said whose
                    member = self.fleet.member(log.member)
                    await self.emit(FleetMember(
                        member=log.member, session_id=log.session_id,
                        agent=session.view.agent if session.view else member.agent,
                        cwd=log.cwd, budget_usd=member.budget_usd))
            outputs = [*actions(point), *wakes(point, self.orch.clock.now())]
            if point.machine is None:  # it died while starting: start the rest, then begin
                if not await self._start_the_rest(point):
                    nursery.cancel_scope.cancel()
                    return self._done(first)
                follow_from = self.orch.log.last_seq + 1
                outputs = self.machine.start()  # type: ignore[union-attr]
            for output in outputs:
                self.send.send_nowait(output)
            for member in point.cancel:
                nursery.start_soon(self._cancel_rerun, member, follow_from)
            nursery.start_soon(self._follow, follow_from)
            await self._execute(nursery)
            nursery.cancel_scope.cancel()
        return self._done(first)

    def _done(self, first: int) -> FleetOutcome:
        if self.on_event is not None:
            for env in self.orch.log.read(max(self.printed, first - 1) + 1):
                self.on_event(env)
        assert self.outcome is not None
        return self.outcome

    async def _start_the_rest(self, point: FleetPoint) -> bool:
        """The setup steps (again, when no session had started: they had not finished)
        and the sessions the dead run had not started, then a fresh machine; False when
        setup failed (the fleet has ended failed)."""
        if not point.setup_done:
            failed = await self._setup()
            if failed is not None:
                self.ended = True
                reason = (f"setup of {failed.member} failed at step {failed.step} "
                          f"({failed.action} {failed.what}): {failed.detail}")
                await self.emit(FleetFailed(fleet=self.fleet.name, reason=reason))
                self.outcome = FleetOutcome(False, reason, self.stream, 0.0)
                return False
        await self._start_sessions(only=set(point.missing))
        ids = {m: log.session_id for m, log in point.members.items()}
        ids.update({m: s.id for m, s in self.sessions.items()})
        self.machine = FleetMachine(self.fleet, {m: ids[m] for m in self.fleet.ids},
                                    {m: wd.path for m, wd in self.workdirs.items()})
        return True

    async def judge(self, point: FleetPoint) -> list[Callable[[], Awaitable[Session]]]:
        """Every member session that had not ended, judged before anything is written (a
        log that does not replay is refused with the fleet still resumable); the answer
        starts them (see the module docstring)."""
        fleet = self.fleet
        starts = []
        for log in point.live_sessions:
            member = fleet.member(log.member)
            try:
                starts.append(await self._judge(member, log, point.after_seq))
            except CannotResume as exc:
                raise FleetSetupError(f"session {log.session_id}: {exc}") from None
        return starts

    async def _judge(self, member: Member, log: MemberLog,
                     after_seq: int) -> Callable[[], Awaitable[Session]]:
        fleet = self.fleet
        at = ResumePoint(run=RunStarted(agent=member.agent, tasks=(), cwd=log.cwd,
                                        binding=member.binding, model=member.model,
                                        session_id=log.session_id),
                         session_id=log.session_id, recorded=log.recorded, status=None,
                         after_seq=after_seq)
        machine = rebuild(at)
        resolved = await self.orch.resolve(member.agent)
        binding = next((e.event.binding for e in reversed(log.recorded)  # type: ignore[attr-defined]
                        if type(e.event) is SessionStarting), None)
        agent_session = at.agent_session_id
        if resolved.manifest.extensions.get(RESUME_CAPABILITY) and binding == "stream-json" \
                and agent_session:
            how, why, resume_id = ("resumed", f"the agent continues its session "
                                   f"{agent_session}", agent_session)
            prompt = member.role
        else:
            how, resume_id = "restarted", None
            why = "a new agent with the transcript so far"
            prompt = transcript_context(at, member.role)
        event = resumed_event(at, machine, how, why)
        texts = {e.seq: e.event.text for e in log.recorded  # type: ignore[attr-defined]
                 if type(e.event) is InputInjected}

        def restore(fresh: SessionMachine) -> SessionMachine:
            machine.resumed = event
            machine.policy = fresh.policy
            machine.answerer = fresh.answerer
            reconcile(machine, event, texts, fresh.config)
            return machine

        async def start() -> Session:
            allow_tools, deny_tools = fleet.tools(member)
            return await self.orch.start_session(
                member.agent, member.binding, cwd=log.cwd, model=member.model,
                script=member.script, permissions=member.permissions or fleet.permissions,
                allow_high_risk=(fleet.allow_high_risk if member.allow_high_risk is None
                                 else member.allow_high_risk),
                human=self.human, budget_usd=member.budget_usd, system_prompt=prompt,
                session_id=log.session_id, session_resume_id=resume_id,
                permissions_chosen=True, allow_tools=allow_tools, deny_tools=deny_tools,
                answerer=self.answerer if fleet.answers(member) else None, restore=restore)

        return start

    async def _cancel_rerun(self, member: str, from_seq: int) -> None:
        """The fleet was cancelling ``member``'s turn when the run died: the session re-runs
        it, so it is cancelled again once it started (a cancel sent earlier, while the
        session comes up, would find no turn to stop)."""
        sid = self.sessions[member].id
        async for batch in self.orch.log.subscribe(from_seq, sid):
            for env in batch:
                if type(env.event) is SessionWorking:
                    await self._cancel(member)
                    return
                if type(env.event) in TERMINAL_EVENTS:
                    return

    async def _open_answerer(self, wanted: bool) -> None:
        if not wanted or self.fleet.auto_answer is None:
            return
        try:
            self.answerer = await open_answerer(self.fleet, self.emit)
        except OSError as exc:
            raise FleetSetupError(f"auto_answer archive {exc.filename or ''} cannot be "
                                  f"read: {exc.strerror}") from None

    async def emit(self, event, cause: int | None = None) -> int:  # type: ignore[no-untyped-def]
        """As the run's, except a member's final diff already attached before the crash is
        not attached twice."""
        if type(event) is Artifact:
            member = str((event.meta or {}).get("cap.member", ""))
            if member in self.diffed:
                return self.orch.log.last_seq
        return await super().emit(event, cause)

