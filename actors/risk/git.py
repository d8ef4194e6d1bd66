"""``git``: which sub-commands stay inside the workspace and keep work recoverable.

Why sub-commands and not flags alone: ``git push`` reaches the network,
``reset --hard``/``clean -f``/``checkout .``/``restore`` discard uncommitted
work that nothing can bring back, ``branch -D``/``stash drop`` lose commits,
and global options (``-c``, ``--git-dir``, ``--exec-path``) change which
programs git runs.  Rules:

==========================================  ===========================================
``git``                                      rating
==========================================  ===========================================
global ``-C DIR`` (judged), ``--no-pager``   allowed; any other global option: high
read sub-commands (:data:`READ`)             low
``add commit init mv merge cherry-pick       medium (paths judged)
revert apply am format-patch switch``
``rm`` with ``-r``/``-f``, ``reset --hard``,  high
``clean`` (unless ``-n``), ``checkout``
of paths or ``.`` or ``-f``, ``restore`` of
the work tree, ``switch -f``, ``branch -d``,
``tag -d``, ``stash drop|clear``
network and history rewriting (``push``,    high (not listed)
``pull``, ``fetch``, ``clone``, ``rebase``,
``gc`` …) and aliases
==========================================  ===========================================
"""

from __future__ import annotations

from trio_cap.actors.risk.commands import Args, paths
from trio_cap.actors.risk.shell import Judge

READ = frozenset(
    {"status", "diff", "log", "show", "blame", "annotate", "ls-files", "ls-tree", "rev-parse",
     "rev-list", "describe", "shortlog", "show-ref", "cat-file", "whatchanged", "show-branch",
     "merge-base", "name-rev", "count-objects", "version", "help", "check-ignore",
     "check-attr", "diff-tree", "diff-files", "diff-index", "for-each-ref", "cherry",
     "range-diff", "grep"}
)
WRITE = frozenset(
    {"add", "commit", "init", "mv", "merge", "cherry-pick", "revert", "apply", "am",
     "format-patch", "switch", "checkout", "restore", "rm", "reset", "clean", "branch", "tag",
     "stash", "reflog", "remote", "config", "worktree", "notes"}
)
_NOT_PATHS = frozenset(
    {"-m", "--message", "--author", "--date", "--format", "--pretty", "--grep", "--since",
     "--until", "--after", "--before", "--committer", "-n", "--max-count", "--abbrev",
     "--color", "--decorate", "-S", "-G", "--fixup", "--squash", "-c", "-C", "--sort",
     "-U", "--unified", "--stat", "--word-diff", "--diff-filter", "--skip", "-b", "-B",
     "--trailer", "-e"}
)
_GLOBAL_OK = frozenset({"--no-pager", "-P", "--no-optional-locks", "--paginate", "-p",
                        "--no-replace-objects", "--literal-pathspecs"})


def rate_git(judge: Judge, args: Args) -> None:
    rest = list(args)
    while rest:
        arg = rest[0]
        if arg is None:
            judge.high("git gets an argument computed at run time")
        if arg == "-C" and len(rest) > 1:
            directory = rest[1]
            if directory is None:
                judge.high("git -C a computed directory")
            with judge.within(directory):
                rate_git(judge, rest[2:])
            return
        if arg in ("--version", "--help"):
            return
        if not arg.startswith("-"):
            break
        if arg not in _GLOBAL_OK:
            judge.high(f"git {arg} changes which programs or repository git uses")
        rest.pop(0)
    if not rest:
        return
    sub, tail = rest[0], rest[1:]
    assert sub is not None
    if sub in READ:
        operands = tail
        if sub == "grep" and any(a is not None and a.startswith(("-O", "--open-files-in-pager"))
                                 for a in tail):
            judge.high("git grep -O runs a pager program")
        if sub == "grep":
            operands = [a for a in tail if a is None or a.startswith("-")] + _after_pattern(tail)
        paths(judge, operands, what=f"git {sub} reads", not_paths=_NOT_PATHS)
        return
    if sub not in WRITE:
        judge.high(f"git {sub} may reach the network, rewrite history or run other programs")
    words = [a for a in tail if a is not None]
    if len(words) != len(tail):
        judge.high(f"git {sub} gets an argument computed at run time")
    problem = _discards(sub, words)
    if problem == "read":
        paths(judge, tail, what=f"git {sub} reads", not_paths=_NOT_PATHS)
        return
    if problem:
        judge.high(f"git {sub} {problem}")
    paths(judge, tail, write=sub in ("mv", "apply", "format-patch"), what=f"git {sub}",
          not_paths=_NOT_PATHS)
    judge.medium(f"git {sub} changes the repository inside the workspace")


def _after_pattern(tail: Args) -> list[str | None]:
    operands = [a for a in tail if a is None or not a.startswith("-")]
    return operands[1:]


def _flags(words: list[str]) -> set[str]:
    out: set[str] = set()
    for word in words:
        if word.startswith("--"):
            out.add(word.partition("=")[0])
        elif word.startswith("-") and len(word) > 1:
            out.update("-" + ch for ch in word[1:])
    return out


def _discards(sub: str, words: list[str]) -> str | None:
    """Why this use loses work or reaches out ("read" when it only reads); else None."""
    flags = _flags(words)
    operands = [w for w in words if not w.startswith("-")]
    if sub in ("apply", "am") and "--unsafe-paths" in flags:
        return "applies a patch to paths outside the work tree"
    if sub == "rm" and flags & {"-r", "-f", "--force"}:
        return "removes recursively or by force"
    if sub == "reset" and flags & {"--hard", "--merge", "--keep"}:
        return "discards uncommitted work"
    if sub == "clean":
        return "read" if flags & {"-n", "--dry-run"} and not flags & {"-f", "--force"} else (
            "deletes untracked files")
    if sub == "checkout":
        if flags & {"-f", "--force", "-p", "--patch", "--ours", "--theirs"} or "--" in words:
            return "overwrites files in the work tree"
        if "." in operands or len(operands) > 1 + ("-b" in flags or "-B" in flags):
            return "overwrites files in the work tree"
    if sub == "restore" and not ({"--staged", "-S"} & flags and not
                                 {"--worktree", "-W"} & flags):
        return "discards uncommitted work"
    if sub == "switch" and flags & {"-f", "--force", "--discard-changes"}:
        return "discards uncommitted work"
    if sub == "branch":
        if flags & {"-d", "-D", "--delete", "-f", "--force", "-M", "-C", "-m", "-c"}:
            return "deletes, moves or overwrites branches"
        return "read" if not operands else None
    if sub == "tag":
        if flags & {"-d", "--delete", "-f", "--force"}:
            return "deletes or overwrites tags"
        return "read" if not operands or flags & {"-l", "--list"} else None
    if sub == "stash":
        action = operands[0] if operands else "push"
        if action in ("list", "show"):
            return "read"
        return None if action in ("push", "save", "apply", "pop") else f"{action} loses work"
    if sub == "reflog":
        return "read" if not operands or operands[0] == "show" else "expires history"
    if sub == "remote":
        return "read" if not operands else "changes or contacts remotes"
    if sub == "config":
        return "read" if flags & {"--get", "--get-all", "--list", "-l", "--get-regexp"} else (
            "changes configuration that can run programs")
    if sub == "worktree":
        return "read" if operands[:1] == ["list"] else "creates or removes work trees"
    if sub == "notes":
        return "read" if not operands or operands[0] in ("list", "show") else None
    return None
