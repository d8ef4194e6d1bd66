"""``cap run --resume LOG``: pick a run up after its ``cap run`` died.

The log is opened for writing, which takes its writer lock: while another
process (the first ``cap run``, or a second resume) has it, the resume is
refused.  A torn final append (a kill mid-write, a power loss) is cut, as
any writer does.  Then (:mod:`..replay.resume`): the run's plan is read from
``run.started``, the session's machine is rebuilt by replaying its log, the
dead agent's turns in flight are queued again, the agent is resumed or
restarted, and the turns the run had not finished are run; the run ends as
``cap run`` does, with the same exit codes.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

import attrs
import trio

from trio_cap.actors.cli.common import (
    EXIT_OK,
    RunFailed,
    UsageError,
    brain_script,
    say_torn_tail,
)
from trio_cap.actors.cli.follow import Follower
from trio_cap.actors.cli.run_cmd import (
    DEFAULT_IDLE_TIMEOUT,
    SIGNALS,
    Outcome,
    Plan_,
    _read_back,
    _write_failure,
    explain,
    open_log,
    played_back,
    resolve_checked,
    run_command,
    run_turns,
)
from trio_cap.actors.orchestrator import Orchestrator, UnknownAgent, open_orchestrator
from trio_cap.actors.replay.resume import (
    RESUME_CAPABILITY,
    CannotResume,
    ResumePoint,
    acp_loads_sessions,
    find_resume_point,
    finished,
    rebuild,
    reconcile,
    resumed_event,
    transcript_context,
)
from trio_cap.actors.session.actor import SessionEnded
from trio_cap.actors.session.machine import SessionMachine
from trio_cap.actors.session.timers import Timeouts
from trio_cap.events.kinds import TERMINAL_EVENTS, InputInjected, RunResumed, SessionReady
from trio_cap.events.log import FileEventLog
from trio_cap.events.log.opener import is_url
from trio_cap.events.projections.sessions import TERMINAL_STATUSES
from trio_cap.events.replay import replay


def resume_command(args: argparse.Namespace) -> int:
    path = args.resume
    if args.log is not None and args.log != path:
        raise UsageError("--resume LOG writes to LOG itself; drop --log")
    ignored = [flag for flag, value in (("--task", args.task), ("--task-file", args.task_file),
                                        ("--cwd", args.cwd), ("--model", args.model),
                                        ("--script", args.script)) if value is not None]
    if ignored:  # the run's own options come from the log: never drop the user's silently
        raise UsageError(f"--resume LOG runs what the log holds with the options it was started "
                         f"with; drop {', '.join(ignored)} (a new task is a new cap run)")
    if is_url(path):
        raise UsageError(f"--resume {path}: a shared log's runs are picked up by another node: "
                         f"cap node --log {path} --take-over (once the dead node's lease "
                         "lapsed)")
    if not os.path.isfile(path):
        raise UsageError(f"--resume {path}: no such log file")
    log = open_log(path, args.fsync)  # the writer lock: a second resume is refused here
    try:
        point, state = _point(log, path)
    except BaseException:
        trio.run(log.aclose)
        raise
    say_torn_tail("cap", path, log)
    if finished(point):
        trio.run(log.aclose)
        print(f"cap: {path}: the run already ended ({point.status}); nothing to resume",
              file=sys.stderr)
        return EXIT_OK if point.status == "completed" else 1
    run = point.run
    if point.session_id is None:  # died before its session existed: start it afresh
        trio.run(log.aclose)
        print(f"cap: {path}: the run died before its session started; running it again",
              file=sys.stderr)
        return run_command(_fresh_args(args, run))
    print(f"cap: resuming session {point.session_id} of {path} (after seq {point.after_seq})",
          file=sys.stderr)
    plan = _plan(args, run, path)
    try:
        outcome = trio.run(_resume, args, log, plan, point)
    except BaseException as exc:
        failure = _write_failure(exc)
        if failure is None:
            raise
        print(f"cap: --resume {path}: cannot write the log: {failure}; the run stopped",
              file=sys.stderr)
        return 1
    finally:
        print(f"cap: log written to {path} (see: cap log show {path})", file=sys.stderr)
    del state
    return explain(outcome)


def _point(log: FileEventLog, path: str) -> tuple[ResumePoint, object]:
    state = replay(log, skip=("transcript",))  # every projection, rebuilt from the log
    statuses = {sid: view.status for sid, view in state.sessions.sessions.items()}
    try:
        point = find_resume_point(log.read(), statuses)
    except CannotResume as exc:
        raise UsageError(f"--resume {path}: {exc}") from None
    return point, state


def _fresh_args(args: argparse.Namespace, run) -> argparse.Namespace:
    fresh = argparse.Namespace(**vars(args))
    fresh.resume = None
    fresh.log = args.resume
    fresh.task, fresh.task_file = run.tasks[0], None
    fresh.next = list(run.tasks[1:])
    _apply_run(fresh, run)
    return fresh


def _apply_run(args: argparse.Namespace, run) -> None:
    """The dead run's options replace this command line's (they are the run's)."""
    args.agent, args.binding, args.model = run.agent, run.binding, run.model
    args.cwd, args.script = run.cwd, run.script
    args.permissions, args.allow_high_risk = run.permissions, run.allow_high_risk
    args.budget_usd, args.record = run.budget_usd, run.record
    args.turn_timeout, args.idle_timeout = run.turn_timeout, run.idle_timeout
    args.headless = True if run.permissions != "ask" else args.headless


def _plan(args: argparse.Namespace, run, path: str) -> Plan_:
    _apply_run(args, run)
    if run.permissions == "ask" and not sys.stdin.isatty():
        raise UsageError(f"--resume {path}: the run used --permissions ask, which needs a "
                         "terminal on stdin")
    return plan_for(run, trio.run(resolve_checked, run.agent, run.binding), path)


def plan_for(run, agent, log_path: str) -> Plan_:  # type: ignore[no-untyped-def]
    """The dead run's plan (``run.started``) with its agent resolved again."""
    return Plan_(agent=agent, task=run.tasks[0], cwd=run.cwd, script=brain_script(run.script),
                 policy=run.permissions, policy_defaulted=False,
                 interactive=run.permissions == "ask", log_path=log_path,
                 turn_timeout=run.turn_timeout, idle_timeout=run.idle_timeout)


def args_for(run) -> argparse.Namespace:  # type: ignore[no-untyped-def]
    """A command line for a run picked up without one (a node taking over): the run's own."""
    args = argparse.Namespace(json=False, headless=True, fsync=None, token_file=None)
    _apply_run(args, run)
    return args


@attrs.define
class _How:
    how: str
    reason: str
    resume_id: str | None
    system_prompt: str | None


def _how(plan: Plan_, point: ResumePoint, machine: SessionMachine) -> _How:
    manifest = plan.agent.manifest
    binding = next((e.event.binding for e in reversed(point.recorded)  # type: ignore[attr-defined]
                    if type(e.event).__name__ == "SessionStarting"), None)
    can = bool(manifest.extensions.get(RESUME_CAPABILITY)) and binding == "stream-json"
    agent_session = point.agent_session_id
    if can and agent_session:
        return _How("resumed", f"the agent continues its session {agent_session}",
                    agent_session, machine.config.system_prompt)
    if binding == "acp" and agent_session and acp_loads_sessions(point):
        # the transcript is the fallback: the ACP client gives it to a new session only,
        # when the load is refused (agent.raw load_failed / resume_unsupported says why)
        return _How("resumed", f"the agent loads its session {agent_session} (ACP "
                    "session/load); should the load fail, a new session gets the transcript "
                    "so far", agent_session,
                    transcript_context(point, machine.config.system_prompt))
    if binding == "a2a":
        from trio_cap.actors.replay.resume_a2a import a2a_resume

        found = a2a_resume(point)
        if found is not None:  # the remote agent outlived the run: its context goes on
            return _How("resumed", found[1], found[0], machine.config.system_prompt)
    if binding == "acp":
        why = ("its ACP agent did not declare loadSession" if agent_session
               else "it never reported a session id to resume")
    elif binding == "a2a":
        why = "the remote agent never gave it a context to continue"
    else:
        why = ("its manifest does not declare capabilities.x-session-resume" if not can
               else "it never reported a session id to resume")
    return _How("restarted", f"a new agent with the transcript so far: {why}", None,
                transcript_context(point, machine.config.system_prompt))


async def _resume(args: argparse.Namespace, log: FileEventLog, plan: Plan_,
                  point: ResumePoint) -> Outcome:
    out = Outcome()
    with trio.open_signal_receiver(*SIGNALS) as signals:
        async with log, played_back(plan.agent) as agent, open_orchestrator(log) as orch, \
                trio.open_nursery() as nursery:
            plan = attrs.evolve(plan, agent=agent)
            orch.default_timeouts = Timeouts(idle=DEFAULT_IDLE_TIMEOUT)
            orch.record = args.record
            nursery.start_soon(_signals, signals, out, orch, nursery.cancel_scope)
            await resume_session(orch, args, plan, point, out)
            nursery.cancel_scope.cancel()
    return out


async def resume_session(orch: Orchestrator, args: argparse.Namespace, plan: Plan_,
                         point: ResumePoint, out: Outcome, *, follow: bool = True) -> str:
    """Pick ``point``'s session up in ``orch`` and run what is left of its run; ``out`` says
    how it ended, and the answer how it went on (``resumed`` or ``restarted``).

    ``follow``: print its events as ``cap run`` does (a node does not: it may run many).
    """
    machine = rebuild(point)
    how = _how(plan, point, machine)
    event = resumed_event(point, machine, how.how, how.reason)
    texts = {e.seq: e.event.text for e in point.recorded  # type: ignore[attr-defined]
             if type(e.event) is InputInjected}
    target = event.turns_done + len(machine.in_flight) + len(machine.queue)

    def restore(fresh: SessionMachine) -> SessionMachine:
        machine.resumed = event
        machine.policy = fresh.policy
        reconcile(machine, event, texts, fresh.config)
        return machine

    await _continue(orch, args, plan, point, how, restore, target, out, follow)
    if out.session is not None:
        _read_back(orch, out)
    return how.how


async def _continue(orch: Orchestrator, args, plan: Plan_, point: ResumePoint, how: _How,
                    restore, target: int, out: Outcome, follow: bool) -> None:
    try:
        session = await orch.start_session(
            plan.agent, args.binding, cwd=plan.cwd, model=args.model, script=plan.script,
            permissions=plan.policy, allow_high_risk=args.allow_high_risk,
            human=plan.interactive, budget_usd=args.budget_usd,
            turn_timeout=plan.turn_timeout, idle_timeout=plan.idle_timeout,
            session_id=point.session_id, session_resume_id=how.resume_id,
            system_prompt=how.system_prompt, restore=restore)
    except UnknownAgent as exc:
        raise UsageError(str(exc)) from None
    out.session = session
    follower = Follower(orch, session, plan.interactive, args.json)
    async with trio.open_nursery() as printing:
        if follow:
            printing.start_soon(follower.run)
        try:
            if target:  # the re-queued turns run first, as the machine sends them
                await session._until(
                    lambda s: (v := s.sessions.sessions[session.id]).ended_turn >= target
                    or v.status in TERMINAL_STATUSES, f"turn {target} never ended")
            out.turn = session.view.ended_turn if session.view else None
            out.stop_reason = session.view.last_stop_reason if session.view else None
        except SessionEnded:
            pass
        remaining = list(point.run.tasks[len(point.injected):])
        if not remaining:
            # nothing more to send (the dead run may have finished every turn and died
            # before it closed): close only once the resumed connection is up, or the
            # close cancels a session that is still starting
            await _until_up_again(orch, session)
        await run_turns(session, remaining, out, gate_first=True)
        with trio.move_on_after(2):
            await session.gone.wait()
        printing.cancel_scope.cancel()


async def _until_up_again(orch: Orchestrator, session) -> None:  # type: ignore[no-untyped-def]
    """Wait for the resumed connection's ``session.ready`` (or the session's end): the
    projection still shows the dead run's status, so it cannot tell."""
    resumed = False
    async with trio.open_nursery() as nursery:
        async def watch_end() -> None:
            await session.gone.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch_end)
        async for batch in orch.log.subscribe(1, session.id):
            for env in batch:
                kind = type(env.event)
                resumed = resumed or kind is RunResumed
                if resumed and (kind is SessionReady or kind in TERMINAL_EVENTS):
                    nursery.cancel_scope.cancel()
                    return


async def _signals(signals, out: Outcome, orch: Orchestrator, everything) -> None:
    async for signum in signals:
        out.signal = signum
        orch.shutdown_reason = f"cap run --resume received {signal.Signals(signum).name}"
        everything.cancel()
        return


__all__ = ["RunFailed", "resume_command"]
