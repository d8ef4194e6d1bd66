"""``cap fleet merge``: a run's branches into its base branch, one member at a time.

The order is the plan's (the master plan's members first, in its order, then the rest
as the fleet file lists them), because that is the order the work was meant to build
up in.  The first conflict stops it: the merge is aborted, so the checkout is exactly as
the last clean merge left it, and the report says which members changed each
conflicting file — the person resolving it needs to know whose work meets whose.

Members' work that was never committed (an agent edits files; it rarely commits) is
committed on the member's own branch first, in its worktree, so that what is merged
is what the diff artifact showed.
"""

from __future__ import annotations

import os
import subprocess

import attrs
import trio

from trio_cap.actors.fleet.worktrees import excluding


class MergeError(Exception):
    """The merge could not start or go on; the message is one line saying what to do."""


@attrs.frozen
class Branch:
    member: str
    branch: str
    path: str
    base: str | None
    """The commit the branch started from."""
    exclude: tuple[str, ...] = ()
    """What setup copied into the worktree (``.env``): never committed."""


@attrs.frozen
class Conflict:
    member: str
    branch: str
    files: dict[str, list[str]]
    """Conflicting file → every member whose branch changed it, in merge order."""


@attrs.define
class MergeReport:
    merged: list[str] = attrs.field(factory=list)
    committed: list[str] = attrs.field(factory=list)
    """Members whose uncommitted work was committed on their branch first."""
    skipped: dict[str, str] = attrs.field(factory=dict)
    """member → why there was nothing to merge."""
    conflict: Conflict | None = None
    not_merged: list[str] = attrs.field(factory=list)


async def _git(where: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        ["git", "-C", where, *args], capture_stdout=True, capture_stderr=True, check=False,
        stdin=subprocess.DEVNULL, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})


async def _out(where: str, *args: str) -> str:
    result = await _git(where, *args)
    if result.returncode != 0:
        err = result.stderr.decode(errors="replace").strip().splitlines()
        raise MergeError(f"git {' '.join(args)} in {where}: {err[-1] if err else 'failed'}")
    return result.stdout.decode(errors="replace")


async def merge_branches(repo: str, base_ref: str, branches: list[Branch],
                         label: str) -> MergeReport:
    """Merge ``branches`` in order into ``base_ref`` checked out in ``repo``; stop (and
    abort) at the first conflict."""
    top = (await _out(repo, "rev-parse", "--show-toplevel")).strip()
    head = await _git(top, "symbolic-ref", "--quiet", "--short", "HEAD")
    current = head.stdout.decode().strip() if head.returncode == 0 else "a detached HEAD"
    if current != base_ref:
        raise MergeError(f"{top} is on {current}, not {base_ref} (the run's base branch): "
                         f"check out {base_ref} there first")
    if (await _out(top, "status", "--porcelain", "--untracked-files=no")).strip():
        raise MergeError(f"{top} has uncommitted changes: commit or stash them first")
    report = MergeReport()
    for i, br in enumerate(branches):
        if not (await _git(top, "rev-parse", "--verify", "--quiet",
                           f"refs/heads/{br.branch}")).stdout.strip():
            report.skipped[br.member] = f"branch {br.branch} is gone"
            continue
        if os.path.isdir(br.path) and (await _out(  # noqa: ASYNC240
                br.path, "status", "--porcelain", "--", ".", *excluding(br.exclude))).strip():
            await _out(br.path, "add", "-A", "--", ".", *excluding(br.exclude))
            await _out(br.path, "commit", "-q", "--no-verify", "-m",
                       f"{label}: {br.member}'s work")
            report.committed.append(br.member)
        ahead = (await _out(top, "rev-list", "--count", f"{base_ref}..{br.branch}")).strip()
        if ahead == "0":
            report.skipped[br.member] = "nothing to merge"
            continue
        merged = await _git(top, "merge", "--no-ff", "--no-edit", "-m",
                            f"{label}: merge {br.member} ({br.branch})", br.branch)
        if merged.returncode == 0:
            report.merged.append(br.member)
            continue
        files = (await _out(top, "diff", "--name-only", "--diff-filter=U")).split("\n")
        await _git(top, "merge", "--abort")
        if not [f for f in files if f]:  # failed for another reason: say git's own words
            err = (merged.stderr or merged.stdout).decode(errors="replace").strip()
            last = err.splitlines()[-1] if err else "failed"
            raise MergeError(f"git merge {br.branch}: {last} (merge aborted)")
        report.conflict = Conflict(br.member, br.branch,
                                   await _who(top, [f for f in files if f], branches))
        report.not_merged = [b.member for b in branches[i:]]
        return report
    return report


async def _who(top: str, files: list[str], branches: list[Branch]) -> dict[str, list[str]]:
    """For each file, the members whose branch changed it (against its own start)."""
    changed: dict[str, set[str]] = {}
    for br in branches:
        if br.base is None:
            continue
        result = await _git(top, "diff", "--name-only", br.base, br.branch)
        changed[br.member] = set(result.stdout.decode(errors="replace").split("\n"))
    return {f: [b.member for b in branches if f in changed.get(b.member, ())] for f in files}
