"""``cap fleet merge LOG``: what the log says the run made, merged in plan order.

Output: one stdout line per merged, committed or skipped member, and on a conflict one
line per conflicting file naming who changed it; stderr ends with exactly one line
summing it up (exit 0 merged, 1 stopped at a conflict or could not start).
"""

from __future__ import annotations

import sys

import trio

from trio_cap.actors.cli.common import EXIT_FAILED, EXIT_OK, UsageError


def merge_log(path: str, name: str | None) -> int:
    from trio_cap.actors.fleet.merge import MergeError, merge_branches

    fleet, repo, base_ref, branches, ended = _read(path, name)
    if not ended:
        print(f"cap fleet merge: fleet {fleet} in {path} has not ended (running, or its "
              "run died): merge once it has", file=sys.stderr)
        return EXIT_FAILED
    if not branches:
        print(f"cap fleet merge: fleet {fleet} in {path} made no git branches",
              file=sys.stderr)
        return EXIT_FAILED
    if base_ref is None:
        print(f"cap fleet merge: {path} does not name the base branch of fleet {fleet} "
              "(a log from before fleet.worktree had base_ref): merge its branches by hand",
              file=sys.stderr)
        return EXIT_FAILED
    try:
        report = trio.run(merge_branches, repo, base_ref, branches, f"cap fleet {fleet}")
    except MergeError as exc:
        print(f"cap fleet merge: {exc}", file=sys.stderr)
        return EXIT_FAILED
    by_member = {b.member: b for b in branches}
    for member in report.committed:
        print(f"committed {member}'s uncommitted work on {by_member[member].branch}")
    for member, why in report.skipped.items():
        print(f"skipped {member}: {why}")
    for member in report.merged:
        print(f"merged {member} ({by_member[member].branch}) into {base_ref}")
    merged = ", ".join(report.merged) or "nothing"
    if report.conflict is None:
        print(f"cap fleet merge: merged {merged} into {base_ref}", file=sys.stderr)
        return EXIT_OK
    c = report.conflict
    for file, who in c.files.items():
        print(f"conflict in {file}: changed by {', '.join(who) or 'nobody it knows of'}")
    files = "; ".join(f"{f} (changed by {', '.join(w)})" for f, w in c.files.items())
    print(f"cap fleet merge: stopped at {c.member} ({c.branch}): conflict in {files}; merged "
          f"{merged}; not merged {', '.join(report.not_merged)}; the merge was aborted, "
          f"{base_ref} is as the last clean merge left it", file=sys.stderr)
    return EXIT_FAILED


def _read(path: str, name: str | None):
    """(fleet, repo, base branch, branches in plan order, whether the run ended)."""
    from trio_cap.actors.cli.log_cmd import open_readonly
    from trio_cap.actors.cli.log_pg_cmd import close_reader
    from trio_cap.actors.fleet.merge import Branch
    from trio_cap.events.kinds import FleetStarted

    log = open_readonly(path)
    try:
        starts = [env for env in log.read(1) if type(env.event) is FleetStarted]
        names = [env.event.fleet for env in starts]
        if not starts:
            raise UsageError(f"{path} has no fleet in it")
        if name is None and len(set(names)) > 1:
            raise UsageError(f"{path} holds fleets {', '.join(dict.fromkeys(names))}: "
                             "say which with --fleet NAME")
        fleet = name or names[0]
        if fleet not in names:
            raise UsageError(f"{path} has no fleet {fleet} (it has {', '.join(names)})")
        started = [env.event for env in starts if env.event.fleet == fleet][-1]
        made, plan, ended = {}, (), False
        copied: dict[str, list[str]] = {}
        for env in log.read(1, f"fleet:{fleet}"):
            if env.kind == "fleet.worktree" and env.event.mode == "git":
                made[env.event.member] = env.event
            elif env.kind == "fleet.setup" and env.event.action == "copy":
                copied.setdefault(env.event.member, []).append(env.event.what)
            elif env.kind == "cap.plan":
                plan = env.event.entries
            elif env.kind in ("fleet.completed", "fleet.failed"):
                ended = True
    finally:
        close_reader(log)
    order = []
    for entry in plan:  # the master plan's members first, in its order
        who = str((entry.meta or {}).get("cap.assigned_to", "")).removeprefix("cap://")
        member = who.removeprefix(f"{fleet}.")
        if member in made and member not in order:
            order.append(member)
    order += [m for m in started.members if m in made and m not in order]
    branches = [Branch(m, made[m].branch, made[m].path, made[m].base,
                       tuple(copied.get(m, ()))) for m in order]
    base_ref = next((made[m].base_ref for m in order if made[m].base_ref), None)
    return fleet, started.repo, base_ref, branches, ended
