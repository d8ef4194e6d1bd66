"""Each member's own working directory: a git worktree on its own branch, or a plain folder.

Why worktrees: members edit the same files without seeing each other's half-done work,
and each one's result is a branch that can be reviewed and merged.  Each *run* gets its
own folder and branches (``.cap-worktrees/<fleet>/<run>/<member>``, ``cap/<fleet>/<run>/<member>``),
so a fleet file can run again, or twice at once, while the last run's work waits for review.
Everything here refuses rather than guesses: a path or branch that exists already is
someone's work, which only ``cap fleet clean`` (told by the log it made them) may remove.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import attrs
import trio

WORKTREE_DIR = ".cap-worktrees"
DIFF_LIMIT = 256 * 1024
"""Characters of a member's diff kept in its artifact; the branch holds the whole."""


class WorktreeError(Exception):
    """A working directory could not be made or removed; the message says why and what to do."""


@attrs.frozen
class Workdir:
    member: str
    path: str
    mode: str  # git | dir | none
    branch: str | None = None
    base: str | None = None
    """The base branch's commit the branch started from (git)."""
    base_ref: str | None = None
    """The base branch's name (git): what ``cap fleet merge`` merges into."""
    source: str | None = None
    """The checkout it was made from: where setup steps copy files from."""


async def git(repo: str | os.PathLike[str], *args: str, env: dict[str, str] | None = None,
              check: bool = True) -> str:
    result = await trio.run_process(
        ["git", "-C", str(repo), *args], capture_stdout=True, capture_stderr=True, check=False,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})})
    if check and result.returncode != 0:
        err = result.stderr.decode(errors="replace").strip().splitlines()
        raise WorktreeError(f"git {' '.join(args)}: {err[-1] if err else 'failed'}")
    return result.stdout.decode(errors="replace")


async def is_git_repo(repo: str) -> bool:
    try:
        out = await git(repo, "rev-parse", "--is-inside-work-tree", check=False)
    except FileNotFoundError:
        raise WorktreeError("git is not installed: set worktrees = \"dirs\" in the fleet "
                            "file for plain directories") from None
    return out.strip() == "true"


def branch_name(fleet: str, run: str, member: str) -> str:
    return f"cap/{fleet}/{run}/{member}"


def run_root(top: str | os.PathLike[str], fleet: str, run: str) -> Path:
    """The folder of one run's working directories."""
    return Path(top) / WORKTREE_DIR / fleet / run


async def prepare(fleet: str, repo: str, mode: str, base: str | None,
                  members: tuple[str, ...], run: str) -> list[Workdir]:
    """Check everything first (repo, base, free paths and branches), then make them all."""
    if not os.path.isdir(repo):  # noqa: ASYNC240 - one stat
        raise WorktreeError(f"repo {repo} is not a directory")
    if mode == "none":
        return [Workdir(m, repo, "none") for m in members]
    root = run_root(repo, fleet, run)
    paths = {m: root / m for m in members}
    if mode == "dirs":
        for path in paths.values():
            if path.exists() and any(path.iterdir()):
                raise WorktreeError(f"{path} exists and is not empty (a last run's work?): "
                                    "`cap fleet clean` removes it")
        out = []
        for m, path in paths.items():
            path.mkdir(parents=True, exist_ok=True)
            out.append(Workdir(m, str(path), "dir", source=repo))
        return out
    if not await is_git_repo(repo):
        raise WorktreeError(f"repo {repo} is not a git repository (worktrees = \"git\"): "
                            "run git init there, or set worktrees = \"dirs\" for plain "
                            "directories")
    top = (await git(repo, "rev-parse", "--show-toplevel")).strip()
    if base is None:
        base = (await git(top, "rev-parse", "--abbrev-ref", "HEAD")).strip()
    sha = (await git(top, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}",
                     check=False)).strip()
    if not sha:
        raise WorktreeError(f"base branch {base!r} does not exist in {top} (an empty "
                            "repository needs a first commit)")
    root = run_root(top, fleet, run)
    for m in members:
        path, branch = root / m, branch_name(fleet, run, m)
        if path.exists():
            raise WorktreeError(f"{path} exists already (run id {run} used twice?): "
                                "`cap fleet clean` removes what a fleet made")
        if (await git(top, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}",
                      check=False)).strip():
            raise WorktreeError(f"branch {branch} exists already (run id {run} used twice?): "
                                "`cap fleet clean` removes what a fleet made")
    _exclude(top)
    ref = base if base != "HEAD" else None
    out = []
    for m in members:
        path, branch = root / m, branch_name(fleet, run, m)
        await git(top, "worktree", "add", "--quiet", "-b", branch, str(path), sha)
        out.append(Workdir(m, str(path), "git", branch, sha, ref, top))
    return out


def _exclude(top: str) -> None:
    """Keep the worktrees out of the main checkout's ``git status``."""
    exclude = Path(top) / ".git" / "info" / "exclude"
    if not exclude.parent.is_dir():
        return  # a worktree or submodule as repo: its .git is a file
    text = exclude.read_text() if exclude.exists() else ""
    if f"/{WORKTREE_DIR}/" not in text.split("\n"):
        exclude.write_text(text + ("" if text.endswith("\n") or not text else "\n")
                           + f"/{WORKTREE_DIR}/\n")


def excluding(paths: tuple[str, ...] | list[str]) -> list[str]:
    """Pathspecs that leave ``paths`` out: what setup copied in (``.env``) is no one's work
    and must never reach a diff or a commit."""
    return [f":(exclude,literal){p}" for p in paths]


async def diff(workdir: Workdir, exclude: tuple[str, ...] = ()) -> str:
    """Everything the member changed against the commit its branch started from, untracked
    files included (except ``exclude``: the files setup copied in), without touching its
    index (a throwaway index file)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        await git(workdir.path, "read-tree", "HEAD", env=env)
        await git(workdir.path, "add", "-A", "--", ".", *excluding(exclude), env=env)
        return await git(workdir.path, "diff", "--cached", "--binary", workdir.base or "HEAD",
                         env=env)


async def unsaved_work(path: str, branch: str | None, base: str | None,
                       copied: tuple[str, ...] = ()) -> str | None:
    """Why removing this worktree would lose work, or None (what setup ``copied`` in is
    nobody's work)."""
    if not os.path.isdir(path):  # noqa: ASYNC240
        return None
    if branch is None:
        return "it has files" if os.listdir(path) else None
    status = (await git(path, "status", "--porcelain", "--", ".", *excluding(copied),
                        check=False)).strip()
    if status:
        return f"uncommitted changes ({len(status.splitlines())} files)"
    if base:
        ahead = (await git(path, "rev-list", "--count", f"{base}..HEAD", check=False)).strip()
        if ahead and ahead != "0":
            merged = await git(path, "branch", "--contains", "HEAD", "--format=%(refname)",
                               check=False)
            others = [r for r in merged.split() if r != f"refs/heads/{branch}"]
            if not others:
                return f"{ahead} commits on {branch} that no other branch has"
    return None


async def remove(repo: str, path: str, branch: str | None) -> list[str]:
    """Remove one worktree (or folder) and its branch; returns what was removed."""
    removed = []
    if branch is None:
        if os.path.isdir(path):  # noqa: ASYNC240
            shutil.rmtree(path)
            removed.append(path)
        return removed
    if os.path.isdir(path):  # noqa: ASYNC240
        await git(repo, "worktree", "remove", "--force", path)
        removed.append(path)
    else:
        await git(repo, "worktree", "prune", check=False)
    if (await git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}",
                  check=False)).strip():
        await git(repo, "branch", "-D", "--quiet", branch)
        removed.append(f"branch {branch}")
    return removed


def prune_empty(path: str) -> None:
    """Remove the run's and the fleet's folders once their last working directory went;
    never above ``.cap-worktrees``, never a folder with anything left in it."""
    parent = Path(path).parent
    while parent.name != WORKTREE_DIR and WORKTREE_DIR in parent.parts:
        try:
            parent.rmdir()
        except OSError:
            return  # not empty (another run's, or someone's files), or gone already
        parent = parent.parent
