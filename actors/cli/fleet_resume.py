"""``cap fleet resume LOG [--fleet NAME]``: pick a fleet run up after its ``cap fleet run`` died.

The log is opened for writing first, which takes its writer lock: while another process
(the first run, or a second resume) has it, the resume is refused (exit 2).  Then the
fleet's state is rebuilt from the log (:mod:`~trio_cap.actors.fleet.resume`), its file is
read again from where ``fleet.started`` says (and must still say what the run started
with), and the run goes on (:mod:`~trio_cap.actors.fleet.resume_shell`) to its end, with
``cap fleet run``'s exit codes.  A fleet that already ended is said in one line: exit 0
when it had completed, 1 when it had failed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import trio

from trio_cap.actors.cli.common import EXIT_FAILED, EXIT_OK, UsageError, say_torn_tail

HELP = """\
Pick up a fleet run whose `cap fleet run` died (killed, a crash, a power loss): every
projection is rebuilt from LOG, the fleet's decisions are replayed and checked, and the
run goes on in the same working directories.  Members whose sessions had not ended are
picked up as `cap run --resume` picks up a session (their cut turns run again with the
same input); a message queued but not delivered is delivered once, one delivered whose
turn the crash cut reaches the re-run turn once, a consumed one is never sent again;
budgets, plans, route rounds and rate-limit pauses carry over (a paused member is woken
at its `until`).  The resume is logged as `fleet.run_resumed`.  Refused (exit 2) while
another process writes LOG, for a log with no fleet, or when the fleet file changed.
Exit code: 0 completed, 1 failed (or it had already failed), 2 usage.
"""


def register(verbs: argparse._SubParsersAction) -> None:
    resume = verbs.add_parser("resume", help="pick up a fleet run whose orchestrator died",
                              description=HELP,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    resume.add_argument("log", metavar="LOG", help="the log of the fleet's run (a file)")
    resume.add_argument("--fleet", metavar="NAME", help="which fleet, when LOG holds several")
    resume.set_defaults(func=resume_command)


def resume_command(args: argparse.Namespace) -> int:
    from trio_cap.actors.cli.run_cmd import open_log
    from trio_cap.actors.fleet.resume import CannotResumeFleet, pick_fleet, rebuild_fleet
    from trio_cap.events.log.opener import is_url

    path = args.log
    if is_url(path):
        raise UsageError(f"cap fleet resume {path}: fleets run on a file log; give its path")
    if not os.path.isfile(path):
        raise UsageError(f"cap fleet resume: {path}: no such log file")
    log = open_log(path, "batch")  # the writer lock: a second resume is refused here
    try:
        envs = list(log.read(1))
        try:
            name = pick_fleet(envs, args.fleet)
            fleet = _fleet_file(envs, name, path)
            point = rebuild_fleet(fleet, envs)
        except CannotResumeFleet as exc:
            raise UsageError(f"cap fleet resume: {path} {exc}") from None
    except BaseException:
        trio.run(log.aclose)
        raise
    say_torn_tail("cap fleet resume", path, log)
    if point.ended is not None:
        trio.run(log.aclose)
        print(f"cap fleet resume: fleet {name} in {path} already ended ({point.ended}); "
              "nothing to resume", file=sys.stderr)
        return EXIT_OK if point.ended == "completed" else EXIT_FAILED
    started = f"; {len(point.missing)} to start" if point.machine is None else ""
    print(f"cap fleet resume: resuming fleet {name} of {path} (after seq {point.after_seq}): "
          f"{len(point.live_sessions)} sessions to pick up{started}", file=sys.stderr)
    outcome = trio.run(_resume, fleet, log, point)
    if outcome.completed:
        print(f"cap fleet: {fleet.name} completed (spent ${outcome.spent_usd:.4f}); "
              f"log {path}", file=sys.stderr)
        return EXIT_OK
    print(f"cap fleet: {fleet.name} failed: {outcome.reason}; log {path}", file=sys.stderr)
    return EXIT_FAILED


def _fleet_file(envs, name: str, path: str):  # type: ignore[no-untyped-def]
    """The fleet file the run started from, checked to still say what the run began with
    (the log holds the run's events, not its routes: those come from the file)."""
    from trio_cap.actors.cli.fleet_cmd import load_checked
    from trio_cap.actors.fleet.resume import started_of

    _, started = started_of(envs, name)
    source = Path(started.source)
    candidates = [source] if source.is_absolute() else [source, Path(started.repo) / source]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        raise UsageError(f"cap fleet resume: {path}: the fleet file {started.source} "
                         "that started the run is not there")
    fleet = load_checked(str(found), task=started.task)
    then = (started.members, started.budget_usd, started.hop_limit, started.permissions,
            started.worktrees, fleet.name)
    now = (fleet.ids, fleet.budget_usd, fleet.hop_limit, fleet.permissions, fleet.worktrees,
           name)
    if then != now:
        raise UsageError(f"cap fleet resume: {path}: the fleet file {found} changed since the "
                         "run started (members, budget, hop limit, permissions or "
                         "worktrees): the run cannot go on by rules it did not start with")
    return fleet


async def _resume(fleet, log, point):  # type: ignore[no-untyped-def]
    from trio_cap.actors.cli.render import line
    from trio_cap.actors.fleet import FleetSetupError
    from trio_cap.actors.fleet.resume_shell import resume_fleet
    from trio_cap.actors.orchestrator import open_orchestrator
    from trio_cap.actors.session.timers import Timeouts

    def show(env) -> None:  # type: ignore[no-untyped-def]
        if env.kind not in ("frame.in", "frame.out"):
            print(line(env), flush=True)

    try:
        async with open_orchestrator(log) as orch:
            orch.default_timeouts = Timeouts(idle=600.0)
            try:
                return await resume_fleet(orch, fleet, point, on_event=show)
            except FleetSetupError as exc:
                raise UsageError(f"cap fleet resume: {exc}") from None
    finally:
        await log.aclose()
