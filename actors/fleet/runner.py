"""The fleet actor's Trio shell: sessions through the orchestrator, the machine's decisions
carried out in the order it made them.

``await run_fleet(orch, fleet)`` inside any orchestrator (the embedding API; or
``handle = await nursery.start(run_fleet, orch, fleet)`` for a :class:`FleetHandle`, to
interrupt a member with a correction while it runs): it makes
the members' working directories (this run's own), runs the fleet file's setup steps in
each, starts their sessions, feeds everything they log to
the :class:`~.machine.FleetMachine` and does what it answers — injects, cancels, fleet
events — until the machine says the fleet finished; then each git member's diff is
attached (``cap.artifact``), every session is closed and the terminal fleet event is the
fleet stream's last.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import attrs
import trio

from trio_cap.actors.fleet import worktrees
from trio_cap.actors.fleet.answer_shell import open_answerer
from trio_cap.actors.fleet.machine import (
    HANDOFF_DIFF_LIMIT,
    CancelTurn,
    Collect,
    Deliver,
    Emit,
    Finished,
    FleetMachine,
    Output,
    Wake,
)
from trio_cap.actors.fleet.model import Fleet
from trio_cap.actors.fleet.setup import run_setup
from trio_cap.actors.orchestrator import Orchestrator, Session
from trio_cap.actors.session.actor import CommandRefused, SessionEnded
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    Artifact,
    Event,
    FleetCompleted,
    FleetFailed,
    FleetInterrupt,
    FleetMember,
    FleetSetup,
    FleetStarted,
    FleetWorktree,
    SessionCreated,
)


def fleet_stream(name: str) -> str:
    return f"fleet:{name}"


def session_id(fleet: str, member: str) -> str:
    return f"{fleet}.{member}"


@attrs.frozen
class FleetOutcome:
    completed: bool
    reason: str
    stream: str
    spent_usd: float


class FleetSetupError(Exception):
    """The fleet could not start (working directories, a session); nothing ran."""


class InterruptRefused(Exception):
    """The fleet would not interrupt that member (logged as ``fleet.interrupt`` with
    ``refused`` once the fleet runs): ``reason`` says why."""

    def __init__(self, member: str, reason: str) -> None:
        super().__init__(f"cannot interrupt {member}: {reason}")
        self.member = member
        self.reason = reason


class FleetHandle:
    """A fleet run seen from its embedder while it runs: a person's corrections go in
    through it, so they are decisions of the fleet machine and in its log like every
    other (CAP §10.6)."""

    def __init__(self, shell: _Shell) -> None:
        self._shell = shell
        self.done = trio.Event()
        """Set when the run is over (finished, failed to start, or cancelled)."""
        self.outcome: FleetOutcome | None = None

    @property
    def stream(self) -> str:
        return self._shell.stream

    def interrupt(self, member: str, correction: str) -> None:
        """Stop ``member``'s turn and give it its input again with ``correction``; what it
        had said stays in the log.  Returns once the fleet has taken the request (the
        cancel and the new input follow as events); :class:`InterruptRefused` when the
        member is not in a turn the fleet could interrupt."""
        shell = self._shell
        machine = shell.machine
        if machine is None or shell.outcome is not None:
            raise InterruptRefused(member, "not_running")
        outputs = machine.interrupt(member, correction)
        for output in outputs:
            shell.send.send_nowait(output)
        first = outputs[0]
        if isinstance(first, Emit) and isinstance(first.event, FleetInterrupt) \
                and first.event.refused is not None:
            raise InterruptRefused(member, first.event.refused)

    async def wait(self) -> FleetOutcome:
        """The outcome, once the run is over (bound the wait with the caller's own
        ``trio.fail_after``)."""
        await self.done.wait()
        if self.outcome is None:
            raise FleetSetupError("the fleet run stopped before it finished")
        return self.outcome


CLOSE_GRACE = 10.0
"""Seconds a cancelled run gives its sessions to close before it stops waiting for them."""


async def run_fleet(orch: Orchestrator, fleet: Fleet, *,
                    on_event: Callable[[Envelope], None] | None = None,
                    human: bool = False, run_id: str | None = None,
                    task_status: trio.TaskStatus[FleetHandle] = trio.TASK_STATUS_IGNORED,
                    ) -> FleetOutcome:
    """Run ``fleet`` to its end; ``on_event`` sees every envelope the run logs (its
    sessions' and the fleet's), e.g. to print them.

    ``human``: someone answers the members' permission requests and asks that their
    policy leaves to a person (``ask``, and high risk under ``allow``) through each
    :class:`Session` (``decide`` / ``answer``) — the fleet face's client.  Without one
    those are refused, as ``cap fleet run`` does.  A cancelled run closes every session
    it started (within :data:`CLOSE_GRACE`) and ends the fleet's stream with
    ``fleet.failed``.

    ``run_id`` names this run's working directories and branches (default:
    ``$CAP_FLEET_RUN_ID`` — for scripts that must know the paths before the run — else a
    fresh time-ordered id), so runs of one fleet file never share them.

    Started with ``nursery.start`` it hands back a :class:`FleetHandle` once its working
    directories exist (before that, a :class:`FleetSetupError` is raised to the starter)."""
    if not fleet.task.strip():
        raise FleetSetupError(f"{fleet.source}: no task: give task or task_file in the file, "
                              "or --task")
    if run_id is None:
        from trio_cap.actors.ids import run_id as new_run_id

        run_id = os.environ.get("CAP_FLEET_RUN_ID") or new_run_id()
    try:
        dirs = await worktrees.prepare(fleet.name, fleet.repo, fleet.worktrees, fleet.base,
                                       fleet.ids, run_id)
    except worktrees.WorktreeError as exc:
        raise FleetSetupError(str(exc)) from None
    shell = _Shell(orch, fleet, on_event, human, run_id)
    handle = FleetHandle(shell)
    task_status.started(handle)
    try:
        handle.outcome = await shell.run(dirs)
        return handle.outcome
    except BaseException:  # cancelled (the face's client, Ctrl-C) or broken: no orphans
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + CLOSE_GRACE
            await shell.abandon("stopped before it finished")
        raise
    finally:
        handle.done.set()


class _Shell:
    def __init__(self, orch: Orchestrator, fleet: Fleet,
                 on_event: Callable[[Envelope], None] | None, human: bool = False,
                 run_id: str = "") -> None:
        self.orch = orch
        self.run_id = run_id
        self.human = human
        self.machine: FleetMachine | None = None
        self.ended = False
        """Whether the fleet's terminal event is in the log."""
        self.fleet = fleet
        self.stream = fleet_stream(fleet.name)
        self.on_event = on_event
        self.sessions: dict[str, Session] = {}
        self.workdirs: dict[str, worktrees.Workdir] = {}
        self.outcome: FleetOutcome | None = None
        self.printed = 0
        """The last seq ``on_event`` saw."""
        self.send, self.receive = trio.open_memory_channel[Output](1_000_000)

    async def emit(self, event: Event, cause: int | None = None) -> int:
        return await self.orch.log.append([event], stream=self.stream, cause=cause)

    async def run(self, dirs: list[worktrees.Workdir]) -> FleetOutcome:
        fleet = self.fleet
        first = self.orch.log.last_seq + 1
        await self.emit(FleetStarted(
            fleet=fleet.name, task=fleet.task, members=fleet.ids, source=fleet.source,
            repo=fleet.repo, base=fleet.base, worktrees=fleet.worktrees,
            budget_usd=fleet.budget_usd, permissions=fleet.permissions,
            allow_high_risk=fleet.allow_high_risk, hop_limit=fleet.hop_limit, run=self.run_id))
        for wd in dirs:
            self.workdirs[wd.member] = wd
            if wd.mode != "none":
                await self.emit(FleetWorktree(member=wd.member, path=wd.path,
                                              mode="git" if wd.mode == "git" else "dir",
                                              branch=wd.branch, base=wd.base,
                                              base_ref=wd.base_ref))
        async with trio.open_nursery() as nursery:
            if self.on_event is not None:
                nursery.start_soon(self._print, first)
            failed = await self._setup()
            if failed is not None:
                self.ended = True
                reason = (f"setup of {failed.member} failed at step {failed.step} "
                          f"({failed.action} {failed.what}): {failed.detail}")
                await self.emit(FleetFailed(fleet=fleet.name, reason=reason))
                self.outcome = FleetOutcome(False, reason, self.stream, 0.0)
            else:
                await self._run_machine(nursery)
            nursery.cancel_scope.cancel()
        if self.on_event is not None:  # what the printer had not reached when it stopped
            for env in self.orch.log.read(max(self.printed, first - 1) + 1):
                self.on_event(env)
        assert self.outcome is not None
        return self.outcome

    async def _run_machine(self, nursery: trio.Nursery) -> None:
        fleet = self.fleet
        try:
            await self._start_sessions()
        except BaseException:
            nursery.cancel_scope.cancel()
            raise
        machine = FleetMachine(fleet, {m: s.id for m, s in self.sessions.items()},
                               {m: wd.path for m, wd in self.workdirs.items()},
                               [m for m, wd in self.workdirs.items() if wd.mode == "git"],
                               [m for m, s in self.sessions.items()
                                if _queues_input(self.orch, s.id)])
        self.machine = machine
        follow_from = self.orch.log.last_seq + 1
        for output in machine.start():
            self.send.send_nowait(output)
        nursery.start_soon(self._follow, follow_from)
        await self._execute(nursery)

    async def _setup(self) -> FleetSetup | None:
        """The file's setup steps in every new working directory, side by side; the first
        failed step of any (the others still finish theirs, so each directory's state is
        in the log), or None."""
        setup = self.fleet.setup
        if not (setup.copy or setup.run):
            return None
        failed: list[FleetSetup] = []

        async def one(wd: worktrees.Workdir) -> None:
            bad = await run_setup(setup, wd.member, wd.source or self.fleet.repo, wd.path,
                                  self.emit)
            if bad is not None:
                failed.append(bad)

        async with trio.open_nursery() as nursery:
            for wd in self.workdirs.values():
                if wd.mode != "none":
                    nursery.start_soon(one, wd)
        return failed[0] if failed else None

    async def _start_sessions(self, only: set[str] | None = None) -> None:
        """Every member's session (``only``: those members', for a resume that found the
        others started)."""
        fleet = self.fleet
        try:
            answerer = await open_answerer(fleet, self.emit)
        except OSError as exc:
            self.ended = True
            why = f"auto_answer archive {exc.filename or ''} cannot be read: {exc.strerror}"
            await self.emit(FleetFailed(fleet=fleet.name, reason=why))
            raise FleetSetupError(why) from None
        for member in fleet.sessions:
            if only is not None and member.id not in only:
                continue
            sid = session_id(fleet.name, member.id)
            allow_tools, deny_tools = fleet.tools(member)
            try:
                session = await self.orch.start_session(
                    member.agent, member.binding, cwd=self.workdirs[member.id].path,
                    model=member.model, script=member.script,
                    permissions=member.permissions or fleet.permissions,
                    allow_high_risk=(fleet.allow_high_risk if member.allow_high_risk is None
                                     else member.allow_high_risk),
                    human=self.human, budget_usd=member.budget_usd, system_prompt=member.role,
                    session_id=sid, permissions_chosen=True, allow_tools=allow_tools,
                    deny_tools=deny_tools,
                    answerer=answerer if fleet.answers(member) else None)
            except Exception as exc:
                self.ended = True
                await self.emit(FleetFailed(fleet=fleet.name,
                                            reason=f"session {member.id} did not start: {exc}"))
                for started in self.sessions.values():
                    await _close(started)
                raise FleetSetupError(f"session {member.id} did not start: {exc}") from None
            self.sessions[member.id] = session
            await self.emit(FleetMember(member=member.id, session_id=sid,
                                        agent=session.view.agent if session.view else
                                        member.agent,
                                        cwd=self.workdirs[member.id].path,
                                        budget_usd=member.budget_usd))

    async def abandon(self, reason: str) -> None:
        """The run was stopped from outside: its sessions closed, its stream ended."""
        async with trio.open_nursery() as nursery:
            for session in self.sessions.values():
                nursery.start_soon(_close_or_gone, session)
        if not self.ended:
            self.ended = True
            spent = self.machine.spent if self.machine is not None else 0.0
            await self.emit(FleetFailed(fleet=self.fleet.name, reason=reason,
                                        spent_usd=round(spent, 10)))

    async def _follow(self, from_seq: int) -> None:
        """Every event the members' sessions log, to the machine, in log order."""
        async for batch in self.orch.log.subscribe(from_seq):
            for env in batch:
                for output in self.machine.observe(env.stream, env.seq, env.event, env.at):
                    self.send.send_nowait(output)

    async def _print(self, from_seq: int) -> None:
        assert self.on_event is not None
        async for batch in self.orch.log.subscribe(from_seq):
            for env in batch:
                self.on_event(env)
                self.printed = env.seq

    async def _execute(self, nursery: trio.Nursery) -> None:
        async for output in self.receive:
            if isinstance(output, Emit):
                if isinstance(output.event, FleetCompleted | FleetFailed):
                    await self._wind_up()
                    self.ended = True
                    await self.emit(output.event, output.cause)
                else:
                    await self.emit(output.event, output.cause)
            elif isinstance(output, Deliver):
                nursery.start_soon(self._deliver, output)
            elif isinstance(output, Collect):
                nursery.start_soon(self._collect, output.member)
            elif isinstance(output, CancelTurn):
                nursery.start_soon(self._cancel, output.member)
            elif isinstance(output, Wake):
                nursery.start_soon(self._wake, output)
            elif isinstance(output, Finished):
                self.outcome = FleetOutcome(output.completed, output.reason, self.stream,
                                            round(self.machine.spent, 10))
                return

    async def _deliver(self, out: Deliver) -> None:
        session = self.sessions[out.member]
        try:
            accepted = await session.inject(out.text, source=f"fleet:{self.fleet.name}")
        except SessionEnded:
            results = self.machine.undeliverable(out.message_id, "target_ended")
        except CommandRefused as exc:
            results = self.machine.undeliverable(out.message_id, exc.error.code)
        else:
            if accepted.turn is None:
                results = self.machine.undeliverable(out.message_id, "cap_budget_exceeded")
            else:
                results = self.machine.delivered(out.message_id, accepted.seq, accepted.turn)
        for output in results:
            self.send.send_nowait(output)

    async def _collect(self, member: str) -> None:
        """A member's worktree diff as its turn left it, for the result it hands on."""
        wd = self.workdirs[member]
        try:
            text = await worktrees.diff(wd, self.fleet.setup.copy)
        except worktrees.WorktreeError as exc:
            text = f"(no diff: {exc})"
        for output in self.machine.collected(member, text[:HANDOFF_DIFF_LIMIT],
                                             len(text.encode()), f"file://{wd.path}",
                                             wd.branch):
            self.send.send_nowait(output)

    async def _wake(self, wake: Wake) -> None:
        """A rate-limited member's pause: bounded by the machine's delay (at most the
        file's ``max_backoff_s`` or what the agent said), on Trio's clock."""
        await trio.sleep(wake.delay)
        for output in self.machine.resume(wake.member):
            self.send.send_nowait(output)

    async def _cancel(self, member: str) -> None:
        try:
            await self.sessions[member].cancel("current_turn", reason=f"fleet {self.fleet.name}")
        except (SessionEnded, CommandRefused):
            pass  # its turn or session had already ended: nothing left to stop

    async def _wind_up(self) -> None:
        """Diffs attached, then every session closed, before the fleet's terminal event."""
        for member, wd in self.workdirs.items():
            if wd.mode != "git":
                continue
            try:
                text = await worktrees.diff(wd, self.fleet.setup.copy)
            except worktrees.WorktreeError as exc:
                text = f"(no diff: {exc})"
            kept = text[: worktrees.DIFF_LIMIT]
            if self.machine is not None:
                for output in self.machine.diffed(member, text):
                    if isinstance(output, Emit):
                        await self.emit(output.event, output.cause)
            await self.emit(Artifact(
                artifact_id=f"diff-{member}", mime_type="text/x-diff", name=f"{member}.diff",
                size=len(text.encode()), uri=f"file://{wd.path}", content=kept,
                meta={"cap.member": member, "cap.branch": wd.branch,
                      "cap.truncated": len(text) > len(kept)}))
        async with trio.open_nursery() as nursery:
            for session in self.sessions.values():
                nursery.start_soon(_close, session)


def _queues_input(orch: Orchestrator, session_id: str) -> bool:
    """Whether the session's agent takes input mid-turn, as its ``session.created`` says
    (its manifest's ``queued_input``)."""
    for env in orch.log.read(1, session_id):
        if type(env.event) is SessionCreated:
            return env.event.queued_input
    return False


async def _close_or_gone(session: Session) -> None:
    """Close ``session``, or stop waiting once its actor has finished anyway: when the
    whole orchestrator is being cancelled (SIGTERM of ``cap agent --fleet``) its sessions
    end on their own, and a close waiting for the projection to see it would wait for a
    projection that has stopped."""
    async with trio.open_nursery() as nursery:
        async def close() -> None:
            await _close(session)
            nursery.cancel_scope.cancel()

        nursery.start_soon(close)
        await session.gone.wait()
        nursery.cancel_scope.cancel()


async def _close(session: Session) -> None:
    try:
        await session.close()
    except SessionEnded:
        pass
