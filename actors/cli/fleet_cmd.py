"""``cap fleet run | validate | status | clean``: several agents on one task, from a fleet file.

Every failure ends in one line and an exit code: 2 for a fleet file with problems (all of
them listed, one per line, before anything is made) or bad usage, 1 for a fleet that ran
and did not complete, or a clean that would lose work.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import trio

from trio_cap.actors.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, UsageError

_RUN = """\
Run a fleet: start every session of FLEET (a fleet.toml or fleet.yaml) in its own
working directory, send the task, route each session's results as the file's routes say,
keep the spend inside the budgets, and close every session when nothing is left to do.
Exit code: 0 when the fleet completed, 1 when it failed (a failed turn or session, a
refused budget, plan entries that never ran), 2 when the fleet file has problems, 130
when stopped with Ctrl-C (every session is closed first).

On a terminal: a live view, one row per session (state: working, needs input (with
what), idle, rate-limited until T, done, failed; binding; current plan step; tokens;
cost), the budget bar, files two sessions both changed (the moment it happens), the
latest events, and a person at the keyboard: what a session's policy leaves to a person
(permissions = "ask", high risk, an ask the auto-answerer does not answer) waits for a
key — y allow once, a allow always, n deny; an ask: a choice's number, r to type an
answer, d to decline — and i interrupts a session with a typed correction.  Each answer and
correction is an event in the log.  With --headless, or when stdout is not a terminal:
one plain line per event, and nobody is asked (those requests are refused, those asks
declined); without a terminal on stdin the view is shown but nobody is asked either.

Git worktrees (worktrees = "git", the default): one per session and run at
<repo>/.cap-worktrees/<fleet>/<run-id>/<session-id>/ on branch
cap/<fleet>/<run-id>/<session-id> off the base branch, after the file's [setup] steps
ran in it; kept after the run, with each one's diff in the log; `cap fleet clean` removes
them, `cap fleet merge LOG` merges their branches.  Permissions come from the file
(per fleet and per session); high-risk requests are refused unless a person allows them
or the file sets allow_high_risk = true.
"""


def register(sub: argparse._SubParsersAction) -> None:
    fleet = sub.add_parser("fleet", help="run, check, inspect and clean up fleets of agents",
                           description="Several agent sessions on one task, coordinated "
                                       "by trio-cap (see docs/fleets.md).")
    verbs = fleet.add_subparsers(dest="fleet_command", metavar="COMMAND")

    run = verbs.add_parser("run", help="run a fleet to its end", description=_RUN,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("fleet", metavar="FLEET", help="the fleet file (.toml, .yaml or .yml)")
    run.add_argument("--log", metavar="FILE",
                     help="the event log (default <repo>/.cap/fleets/<name>/<run-id>.caplog)")
    run.add_argument("--task", metavar="TEXT", help="the task, instead of the file's")
    run.add_argument("--headless", action="store_true",
                     help="plain event lines for CI, no live view, nobody asked")
    run.set_defaults(func=run_command)

    check = verbs.add_parser("validate", help="check a fleet file without running anything",
                             description="Check a fleet file: every problem is listed as "
                                         "FILE: field.path: problem (exit 2); agents are "
                                         "resolved too.  Nothing is created.")
    check.add_argument("fleet", metavar="FLEET", help="the fleet file")
    check.set_defaults(func=validate_command)

    status = verbs.add_parser("status", help="each fleet in a log: members, spend, plan",
                              description="What a fleet log says, from its projections: "
                                          "each member's state (working, needs input, idle, "
                                          "rate-limited until T, done, failed), the spend "
                                          "against the budgets, the master plan, the "
                                          "messages and the files two members both changed.")
    status.add_argument("log", metavar="LOG", help="a fleet's event log")
    status.set_defaults(func=status_command)

    clean = verbs.add_parser(
        "clean", help="remove the worktrees and branches a fleet made",
        description="Remove the worktrees, branches and directories that the fleet's logs "
                    "say it made (nothing else).  Work that is not committed, or commits "
                    "no other branch has, is kept unless --force: then nothing is removed "
                    "and the exit code is 1.")
    clean.add_argument("fleet", metavar="FLEET", help="the fleet file")
    clean.add_argument("--log", metavar="FILE", action="append",
                       help="a log of the fleet's runs (repeatable; default: every log in "
                            "<repo>/.cap/fleets/<name>/)")
    clean.add_argument("--force", action="store_true",
                       help="remove them even with uncommitted or unmerged work")
    clean.set_defaults(func=clean_command)

    merge = verbs.add_parser(
        "merge", help="merge a run's branches into its base branch",
        description="Merge the branches of the fleet run in LOG into the base branch they "
                    "started from (checked out, clean, in the repo), one member at a time in "
                    "plan order; a member's uncommitted work is committed on its own branch "
                    "first.  The first conflict stops it: that merge is aborted, the members "
                    "who changed each conflicting file are listed, exit code 1.")
    merge.add_argument("log", metavar="LOG", help="the log of the fleet's run")
    merge.add_argument("--fleet", metavar="NAME", help="which fleet, when LOG holds several")
    merge.set_defaults(func=merge_command)

    from trio_cap.actors.cli import fleet_resume

    fleet_resume.register(verbs)

    fleet.set_defaults(func=lambda _args: (fleet.print_help(), EXIT_USAGE)[1])


def load_checked(path: str, task: str | None = None):
    """The fleet file, every problem of it (agents resolved too) a usage error."""
    from trio_cap.actors.fleet import FleetInvalid, check_agents, load_fleet

    try:
        fleet = load_fleet(path, task=task)
    except FleetInvalid as exc:
        raise UsageError(str(exc)) from None
    problems = trio.run(check_agents, fleet)
    if problems:
        raise UsageError("\n".join(problems))
    return fleet


def validate_command(args: argparse.Namespace) -> int:
    fleet = load_checked(args.fleet)
    print(f"{args.fleet}: ok: fleet {fleet.name}, {len(fleet.sessions)} sessions, "
          f"{len(fleet.routes)} routes, {len(fleet.plan)} plan entries")
    return EXIT_OK


def default_log(fleet, rid: str) -> str:
    return str(Path(fleet.repo) / ".cap" / "fleets" / fleet.name / f"{rid}.caplog")


def run_command(args: argparse.Namespace) -> int:
    from trio_cap.actors.cli.run_cmd import open_log
    from trio_cap.actors.ids import run_id

    if args.task is not None and not args.task.strip():
        raise UsageError("--task: the task is empty")
    fleet = load_checked(args.fleet, task=args.task)
    if not fleet.task.strip():
        raise UsageError(f"{args.fleet}: no task: give task or task_file in the file, or --task")
    rid = run_id()  # the default log and the worktrees share it
    path = args.log or default_log(fleet, rid)
    log = open_log(path, "batch")
    try:
        outcome = trio.run(_run, fleet, log, rid, args.headless)
    except BaseException:
        if log.last_seq == 0 and not args.log:
            Path(path).unlink(missing_ok=True)  # nothing ran: leave no empty log behind
        raise
    if outcome.completed:
        print(f"cap fleet: {fleet.name} completed (spent ${outcome.spent_usd:.4f}); "
              f"log {path}", file=sys.stderr)
        return EXIT_OK
    print(f"cap fleet: {fleet.name} failed: {outcome.reason}; log {path}", file=sys.stderr)
    return EXIT_FAILED


async def _run(fleet, log, rid: str, headless: bool = True):
    from trio_cap.actors.cli.render import line
    from trio_cap.actors.fleet import FleetSetupError, run_fleet
    from trio_cap.actors.orchestrator import open_orchestrator
    from trio_cap.actors.session.timers import Timeouts

    def show(env) -> None:
        if env.kind not in ("frame.in", "frame.out"):
            print(line(env), flush=True)

    console = None
    if not headless and sys.stdout.isatty():
        from rich.console import Console

        from trio_cap.actors.cli import fleet_live

        console = Console()
        if not fleet_live.wanted(console):
            console = None  # a terminal that cannot redraw (TERM=dumb): plain lines
    try:
        async with open_orchestrator(log) as orch:
            orch.default_timeouts = Timeouts(idle=600.0)
            try:
                if console is not None:
                    return await fleet_live.run_live(orch, fleet, rid, console,
                                                     fleet_live.keyboard())
                return await run_fleet(orch, fleet, on_event=show, run_id=rid)
            except* FleetSetupError as group:
                raise UsageError(str(group.exceptions[0])) from None
    finally:
        await log.aclose()


def status_command(args: argparse.Namespace) -> int:
    from trio_cap.actors.cli.log_cmd import Reporter, open_readonly
    from trio_cap.actors.cli.log_pg_cmd import close_reader
    from trio_cap.events.replay import replay

    log = open_readonly(args.log)
    report = Reporter(log)  # damage is said, as cap replay says it: the status may lack it
    try:
        state = replay(log, seen=report.seen)
    finally:
        close_reader(log)
    if not state.fleets.fleets:
        print(f"cap fleet status: {args.log} has no fleet in it", file=sys.stderr)
        return report.finish() or EXIT_FAILED
    for view in state.fleets.fleets.values():
        budget = f" of ${view.budget_usd:.4f}" if view.budget_usd is not None else ""
        reason = f": {view.reason}" if view.reason else ""
        print(f"fleet {view.name}: {view.status}{reason}; spent ${view.spent_usd:.4f}{budget}")
        for mid, member in view.members.items():
            needs = f" ({member.needs})" if member.needs else ""
            mbudget = f" of ${member.budget_usd:.4f}" if member.budget_usd is not None else ""
            where = member.branch or member.cwd
            print(f"  {mid:<16} {_state(member)}{needs}; {member.turns} turns; "
                  f"${member.spent_usd:.4f}{mbudget}; {where}")
        for entry in view.plan:
            who = (entry.meta or {}).get("cap.assigned_to", "")
            print(f"  plan {entry.id}: {entry.status} ({who}) {entry.content}")
        states: dict[str, int] = {}
        for msg in view.messages.values():
            states[msg.state] = states.get(msg.state, 0) + 1
        latest = {c.path: c for c in view.conflicts}  # each names every member so far
        for conflict in latest.values():
            print(f"  conflict {conflict.path}: changed by {', '.join(conflict.members)}")
        refused = sum(1 for row in view.audit if row.kind.endswith("refused"))
        print(f"  messages: {len(view.messages)} "
              f"({', '.join(f'{n} {s}' for s, n in sorted(states.items())) or 'none'}); "
              f"{refused} refused")
        for ask in view.asks:
            print(f"  ask {ask.member} {ask.ask_id}: {_ask_line(ask)}")
    return report.finish()


def _ask_line(ask) -> str:
    """Who answered a member's question: the archive (and from where), a person, or
    nobody — and why the auto-answerer passed it on."""
    said = f" {json.dumps(ask.value)[:60]}" if ask.value is not None else ""
    if ask.provenance:
        where = ", ".join(f"{p.get('file')} #{p.get('passage')}" for p in ask.provenance)
        return f"answered from the archive ({where}):{said}"
    passed = f" (auto-answerer: {ask.escalated})" if ask.escalated else ""
    if ask.state == "pending":
        return f"waiting for a person{passed}"
    who = "declined" if ask.value is None else f"answered by {ask.by}:{said}"
    return who + passed


def _state(member) -> str:
    """A member's status, or ``rate-limited until HH:MM:SS`` while the fleet waits out
    its agent's rate limit."""
    if member.paused_until is not None and member.status not in ("done", "failed"):
        import time

        return "rate-limited until " + time.strftime("%H:%M:%S",
                                                     time.localtime(member.paused_until))
    return member.status


def clean_command(args: argparse.Namespace) -> int:
    from trio_cap.actors.fleet import FleetInvalid, load_fleet

    try:
        fleet = load_fleet(args.fleet)
    except FleetInvalid as exc:
        raise UsageError(str(exc)) from None
    logs = args.log or sorted(str(p) for p in (Path(fleet.repo) / ".cap" / "fleets"
                                                / fleet.name).glob("*.caplog"))
    made = _made_by(fleet.name, logs)
    if not made:
        print(f"cap fleet clean: no log says fleet {fleet.name} made anything "
              f"({len(logs)} logs read)", file=sys.stderr)
        return EXIT_OK
    return trio.run(_clean, fleet.repo, made, args.force)


def _made_by(name: str, logs: list[str]) -> list:
    from trio_cap.actors.cli.log_cmd import open_readonly
    from trio_cap.actors.cli.log_pg_cmd import close_reader
    from trio_cap.actors.fleet.runner import fleet_stream
    from trio_cap.events.kinds import FleetWorktree

    made: dict[str, tuple[FleetWorktree, list[str]]] = {}
    for path in logs:
        log = open_readonly(path)
        where: dict[str, str] = {}  # member → its worktree, in this log's run
        try:
            for env in log.read(1, fleet_stream(name)):
                if type(env.event) is FleetWorktree:
                    made[env.event.path] = (env.event, [])
                    where[env.event.member] = env.event.path
                elif env.kind == "fleet.setup" and env.event.action == "copy" \
                        and env.event.member in where:
                    made[where[env.event.member]][1].append(env.event.what)
        finally:
            close_reader(log)
    return [(wt, tuple(copied)) for wt, copied in made.values()]


async def _clean(repo: str, made: list, force: bool) -> int:
    from trio_cap.actors.fleet import worktrees

    if not force:
        kept = []
        for wt, copied in made:
            why = await worktrees.unsaved_work(wt.path, wt.branch, wt.base, copied)
            if why:
                kept.append(f"{wt.path}: {why}")
        if kept:
            print(f"cap fleet clean: nothing removed, work would be lost in {'; '.join(kept)} "
                  "(--force removes it anyway)", file=sys.stderr)
            return EXIT_FAILED
    for wt, _copied in made:
        try:
            removed = await worktrees.remove(repo, wt.path, wt.branch)
        except worktrees.WorktreeError as exc:
            print(f"cap fleet clean: {wt.path}: {exc}", file=sys.stderr)
            return EXIT_FAILED
        worktrees.prune_empty(wt.path)
        for what in removed:
            print(f"removed {what}")
    return EXIT_OK


def merge_command(args: argparse.Namespace) -> int:
    from trio_cap.actors.cli.fleet_merge import merge_log

    return merge_log(args.log, args.fleet)
