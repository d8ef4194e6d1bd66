"""The commands trio-cap knows, and what each may do to be rated below high.

Why an allow-list: a deny-list of dangerous commands is exactly what the
found spellings walked around.  A command not named here is high; a command
named here is rated by its own rule, and its flags are allow-listed where a
flag changes the effect (``rm -r``, ``find -delete``, ``python -c``,
``git -c``).  Every argument that could be a path is judged by
:meth:`Judge.path`, so ``cp a ../b``, ``tee /etc/x`` and ``sort -o ~/f`` are
high because of where they write, whatever the command.

=========================  =========================================================
group                      rule
=========================  =========================================================
read (:data:`READERS`)     low; every argument (and every ``--opt=value``) judged as a
                           path read
text (:data:`TEXT`)        low; arguments are not paths (``echo``, ``printf``, ``test``)
write (:data:`WRITERS`)    medium; arguments judged as paths written
``rm``/``rmdir``           medium; only ``-i -I -v -d`` flags: ``-r -R -f`` and every
                           long spelling (``--recursive``, ``--force``, ``--rec``) high
runners (:data:`RUNNERS`)  medium: they run the workspace's own code (``pytest``,
                           ``make``, ``ruff``); arguments judged as paths
wrappers                   ``command``, ``env``, ``nohup``, ``timeout``, ``nice``,
                           ``time``: the wrapped command is rated instead
never                      interpreters given code inline or on stdin, ``eval``,
                           ``exec``, ``xargs``, ``sudo``, network tools,
                           ``chmod``/``chown``, ``dd`` … (everything not listed): high
=========================  =========================================================

The special cases (``git``, ``python``, ``node``, ``find``, ``grep``/``rg``,
``sed``, ``awk``, ``npm``, ``cd``, ``set``) live in :mod:`.programs`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence

from trio_cap.actors.risk.shell import BENIGN_ENV, Judge

Args = Sequence[str | None]
Handler = Callable[[Judge, str, Args], None]

READERS = frozenset(
    {
        "ls", "cat", "head", "tail", "wc", "diff", "cmp", "file", "stat", "du", "df", "tree",
        "realpath", "readlink", "basename", "dirname", "cut", "nl", "comm", "join", "paste",
        "column", "fold", "rev", "tac", "od", "hexdump", "sha256sum", "sha1sum", "sha512sum",
        "md5sum", "cksum", "b2sum", "strings", "pwd", "expand", "unexpand", "fmt", "look",
    }
)
TEXT = frozenset(
    {"echo", "printf", "true", "false", ":", "sleep", "test", "[", "seq", "wait", "which",
     "type", "whoami", "id", "uname", "nproc", "tr", "yes", "arch", "tty", "dirs", "jobs",
     "exit", "return", "break", "continue", "shift"}
)
WRITERS = frozenset({"mkdir", "touch", "cp", "mv", "tee", "sort", "uniq", "truncate", "split"})
RUNNERS = frozenset(
    {"pytest", "py.test", "ruff", "mypy", "black", "flake8", "isort", "pylint", "pyright",
     "eslint", "prettier", "tsc", "unittest"}
)
NEVER: dict[str, str] = {
    "eval": "eval runs text as a command",
    "exec": "exec replaces the shell with a command",
    "builtin": "builtin bypasses the command table",
    "xargs": "xargs runs a command on arguments only known at run time",
    "parallel": "parallel runs commands on arguments only known at run time",
    "sudo": "sudo changes privilege",
    "doas": "doas changes privilege",
    "su": "su changes privilege",
    "pkexec": "pkexec changes privilege",
    "chmod": "chmod changes permissions",
    "chown": "chown changes ownership",
    "chgrp": "chgrp changes ownership",
    "dd": "dd writes raw bytes",
    "ln": "ln creates links, which can point out of the workspace",
    "alias": "alias redefines commands",
    "trap": "trap runs commands on signals",
    "export": "export changes the environment of later commands",
    "unset": "unset changes the environment of later commands",
}


def run(judge: Judge, name: str, args: Args) -> None:
    """Rate one simple command: its name, after quote removal, and its argument words."""
    from trio_cap.actors.risk import programs

    if "=" in name:  # `time PATH=/tmp ls`: bash takes it as an assignment for the command
        judge.high(f"{name.partition('=')[0]} is set for the command it runs")
    if "/" in name:
        judge.path(name, what="runs")
        judge.medium(f"runs {name} from the workspace")
        paths(judge, args)
        return
    if name in NEVER:
        judge.high(NEVER[name])
    if name in TEXT:
        if name in ("printf", "echo") or all(a is not None for a in args):
            return
        judge.high(f"{name} gets arguments computed at run time")
    if name in READERS:
        paths(judge, args, what="reads")
        return
    if name in WRITERS:
        paths(judge, args, write=True, what=f"{name} writes")
        judge.medium(f"{name} inside the workspace")
        return
    if name in ("rm", "rmdir"):
        _remove(judge, name, args)
        return
    if name in RUNNERS:
        paths(judge, args, what=f"{name} reads")
        judge.medium(f"{name} runs the workspace's own code")
        return
    wrapper = _WRAPPERS.get(name)
    if wrapper is not None:
        wrapper(judge, name, args)
        return
    handler = programs.HANDLERS.get(name) or programs.match(name)
    if handler is None:
        judge.high(f"{name!r} is not a command trio-cap knows to stay inside the workspace")
    handler(judge, name, args)


def paths(judge: Judge, args: Args, *, write: bool = False, delete: bool = False,
          what: str = "names", not_paths: Collection[str] = (),
          takes_value: Collection[str] = ()) -> None:
    """Judge every argument that could be a path.

    ``not_paths``: options whose value (``--opt=v`` or the next word) is not a path;
    ``takes_value``: options whose separate value is a path like any other word.
    """
    options = True
    skip = False
    for arg in args:
        if arg is None:
            judge.high("an argument is computed at run time")
        if skip:
            skip = False
            continue
        if options and arg == "--":
            options = False
            continue
        if options and arg.startswith("-") and arg != "-":
            key, eq, value = arg.partition("=")
            if eq:
                if key not in not_paths and value:
                    judge.path(value, write=write, what=what)
                continue
            if arg in not_paths:
                skip = True
                continue
            if arg in takes_value:
                continue
            if not arg.startswith("--") and len(arg) > 2 and _attached_path(arg[2:]):
                judge.path(arg[2:], write=write, what=what)
            continue
        if arg == "-":
            continue
        judge.path(arg, write=write, delete=delete, what=what)
        key, eq, value = arg.partition("=")
        if eq and value and "/" not in key:
            judge.path(value, write=write, what=what)  # `make CC=../x`, `of=/dev/sda`


def _attached_path(tail: str) -> bool:
    """``-o/abs``, ``-I../inc``: a short option with a path glued to it."""
    return tail.startswith(("/", "~", ".")) or "/" in tail


_RM_SHORT = frozenset("iIvd")
_RM_LONG = frozenset({"--verbose", "--dir", "--interactive", "--interactive=always",
                      "--interactive=once", "--one-file-system", "--preserve-root"})


def _remove(judge: Judge, name: str, args: Args) -> None:
    options = True
    for arg in args:
        if arg is None:
            judge.high(f"{name} gets an argument computed at run time")
        if options and arg == "--":
            options = False
            continue
        if options and arg.startswith("--"):
            if name == "rm" and arg not in _RM_LONG:
                judge.high(f"rm {arg}: a recursive, forced or unknown delete")
            if name == "rmdir" and arg not in ("--verbose", "--parents",
                                               "--ignore-fail-on-non-empty"):
                judge.high(f"rmdir {arg} is not rated")
            continue
        if options and arg.startswith("-") and arg != "-":
            allowed = _RM_SHORT if name == "rm" else frozenset("pv")
            bad = sorted(set(arg[1:]) - allowed)
            if bad:
                judge.high(f"{name} -{''.join(bad)}: a recursive, forced or unknown delete")
            continue
        judge.path(arg, delete=True, what=f"{name} deletes")
    judge.medium(f"{name} deletes inside the workspace")


# ---- wrappers: the wrapped command is what runs ------------------------------------


def _inner(judge: Judge, wrapper: str, args: Args) -> None:
    if not args:
        judge.high(f"{wrapper} with no command")
    name = args[0]
    if name is None:
        judge.high(f"{wrapper} runs a command computed at run time")
    run(judge, name, args[1:])


def _command(judge: Judge, name: str, args: Args) -> None:
    rest = list(args)
    while rest and rest[0] in ("-p", "--"):
        rest.pop(0)
    if rest and rest[0] in ("-v", "-V"):
        return  # looks a command up, runs nothing
    _inner(judge, name, rest)


def _env(judge: Judge, name: str, args: Args) -> None:
    rest = list(args)
    while rest:
        arg = rest[0]
        if arg is None or arg.startswith("-"):
            judge.high(f"env {arg or '…'} changes how the command is found or run")
        key, eq, _ = arg.partition("=")
        if not eq:
            break
        if key not in BENIGN_ENV:
            judge.high(f"env sets {key}, which can change what the command does")
        rest.pop(0)
    if not rest:
        judge.high("env alone prints the environment, secrets included")
    _inner(judge, name, rest)


_DURATION = re.compile(r"^\d+(\.\d+)?[smhd]?$")


def _timeout(judge: Judge, name: str, args: Args) -> None:
    rest = list(args)
    while rest and rest[0] is not None and rest[0].startswith("-"):
        flag = rest.pop(0)
        if flag in ("-s", "-k", "--signal", "--kill-after") and rest:
            rest.pop(0)
    if not rest or rest[0] is None or not _DURATION.match(rest[0]):
        judge.high("timeout without a fixed duration")
    _inner(judge, name, rest[1:])


def _nice(judge: Judge, name: str, args: Args) -> None:
    rest = list(args)
    while rest and rest[0] is not None and rest[0].startswith("-"):
        flag = rest.pop(0)
        value = flag[2:] if flag.startswith("-n") and len(flag) > 2 else None
        if flag == "-n" and rest:
            value = rest.pop(0)
        elif flag.startswith("--adjustment="):
            value = flag.partition("=")[2]
        elif value is None:
            value = flag[1:]
        if value is None or not value.lstrip("+").isdigit():
            judge.high("nice with a raised priority needs privilege")
    _inner(judge, name, rest)


def _plain(judge: Judge, name: str, args: Args) -> None:
    rest = list(args)
    while rest and rest[0] in ("-p", "--"):
        rest.pop(0)
    _inner(judge, name, rest)


_WRAPPERS: dict[str, Handler] = {
    "command": _command,
    "env": _env,
    "nohup": _plain,
    "time": _plain,
    "timeout": _timeout,
    "nice": _nice,
}
