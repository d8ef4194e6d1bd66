"""Rules for the known commands whose flags or sub-commands change what they do.

Why each rule exists, briefly: ``git`` can push, rewrite history, discard
work or run configured programs (``-c``); ``python``/``node``/``sh`` run
code given inline or on stdin, which nothing here can rate; ``find`` deletes
and executes; ``sed`` and ``awk`` scripts can write files and run commands;
``npm`` installs from the network.  Each rule lets through the read-only or
workspace-contained uses and makes everything else high.
"""

from __future__ import annotations

import re

from trio_cap.actors.risk.commands import Args, Handler, _attached_path, paths, run
from trio_cap.actors.risk.shell import Judge

# ---- cd / set ------------------------------------------------------------------------


def _cd(judge: Judge, name: str, args: Args) -> None:
    rest = [a for a in args if a not in ("-P", "-L", "-e", "-@")]
    if len(rest) != 1 or rest[0] is None or rest[0] == "-":
        judge.high("cd to the home directory, the previous one or a computed one")
    # a union, not a replacement: a ``cd`` inside ``( )`` or a pipeline does not last,
    # so later paths must be inside from every directory the shell may be in
    judge.bases = judge.bases | judge.enter(rest[0])


_SET_ARG = re.compile(r"^[-+][euxvoET]+$")
_SET_OPTIONS = frozenset({"pipefail", "errexit", "nounset", "xtrace", "verbose", "--"})


def _set(judge: Judge, name: str, args: Args) -> None:
    for arg in args:
        if arg is None or not (_SET_ARG.match(arg) or arg in _SET_OPTIONS):
            judge.high(f"set {arg or '…'} is not rated")


# ---- interpreters -----------------------------------------------------------------------

PYTHON_MODULES = frozenset(
    {"pytest", "unittest", "mypy", "ruff", "black", "flake8", "pyflakes", "isort", "pylint",
     "compileall", "py_compile", "doctest", "json.tool", "venv", "tabnanny", "coverage"}
)
"""``python -m X`` for these runs the workspace's tests or checks; other modules may reach
the network (``pip``, ``http.server``) or run code given as an argument (``timeit``)."""


def _python(judge: Judge, name: str, args: Args) -> None:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg is None:
            judge.high("python gets an argument computed at run time")
        if arg == "-":
            judge.high("python reads its program from standard input")
        if arg in ("--version", "--help", "-V", "-h"):
            return
        if arg.startswith("--"):
            judge.high(f"python {arg} is not rated")
        if arg.startswith("-"):
            k = 1
            while k < len(arg):
                ch = arg[k]
                if ch in "uBObdEIqsSvRP":
                    k += 1
                    continue
                if ch == "c":
                    judge.high("python -c runs inline code")
                if ch in "mWX":
                    value = arg[k + 1 :]
                    if not value:
                        i += 1
                        value = args[i] if i < len(args) else None
                    if value is None:
                        judge.high(f"python -{ch} without a fixed value")
                    if ch == "m":
                        if value not in PYTHON_MODULES:
                            judge.high(f"python -m {value} is not a module trio-cap rates")
                        paths(judge, args[i + 1 :], what=f"python -m {value} reads")
                        judge.medium(f"python -m {value} runs the workspace's own code")
                        return
                    break
                judge.high(f"python -{ch} is not rated")
            i += 1
            continue
        judge.path(arg, what="python runs")
        paths(judge, args[i + 1 :], what="the script gets")
        judge.medium(f"python runs {arg} from the workspace")
        return
    judge.high("python with no script reads its program from standard input")


_NODE_FLAGS = frozenset(
    {"--test", "--check", "-c", "--no-warnings", "--enable-source-maps", "--trace-warnings",
     "--no-deprecation", "--test-only"}
)


def _node(judge: Judge, name: str, args: Args) -> None:
    testing = False
    for i, arg in enumerate(args):
        if arg is None:
            judge.high("node gets an argument computed at run time")
        if arg in ("--version", "-v", "--help", "-h"):
            return
        if arg.startswith("-"):
            if arg not in _NODE_FLAGS and not arg.startswith("--test-reporter"):
                judge.high(f"node {arg} is not rated (-e, -p and --require run inline code)")
            testing = testing or arg == "--test"
            continue
        judge.path(arg, what="node runs")
        paths(judge, args[i + 1 :], what="the script gets")
        judge.medium(f"node runs {arg} from the workspace")
        return
    if not testing:
        judge.high("node with no script reads its program from standard input")
    judge.medium("node --test runs the workspace's tests")


def _source(judge: Judge, name: str, args: Args) -> None:
    """``source .venv/bin/activate``: workspace code run in the shell itself (medium)."""
    if not args or args[0] is None or args[0].startswith("-"):
        judge.high(f"{name} of a computed file")
    judge.path(args[0], what=f"{name} runs")
    paths(judge, args[1:], what="the script gets")
    judge.medium(f"{name} runs {args[0]} from the workspace in the shell")


_READ_FLAGS = frozenset({"-r", "-s", "-e"})


def _read(judge: Judge, name: str, args: Args) -> None:
    """``read line``: sets shell variables from standard input; never PATH or IFS."""
    for arg in args:
        if arg is None or (arg.startswith("-") and arg not in _READ_FLAGS):
            judge.high(f"read {arg or '…'} is not rated")
        if not arg.startswith("-") and not re.fullmatch(r"[a-z_][a-z0-9_]*", arg):
            judge.high(f"read sets {arg}, which can change what commands do")


def _shell(judge: Judge, name: str, args: Args) -> None:
    if not args or args[0] is None or args[0].startswith("-") or args[0].startswith("+"):
        judge.high(f"{name} given code inline or on standard input")
    judge.path(args[0], what=f"{name} runs")
    paths(judge, args[1:], what="the script gets")
    judge.medium(f"{name} runs {args[0]} from the workspace")


# ---- find, grep, rg, jq --------------------------------------------------------------------

_FIND_ACTIONS = frozenset(
    {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}
)
_FIND_VALUES = frozenset(
    {"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex",
     "-type", "-xtype", "-perm", "-size", "-mtime", "-mmin", "-atime", "-amin", "-ctime",
     "-cmin", "-maxdepth", "-mindepth", "-user", "-group", "-uid", "-gid", "-printf",
     "-fstype", "-links", "-inum", "-newermt", "-regextype", "-lname", "-ilname", "-used"}
)


def _find(judge: Judge, name: str, args: Args) -> None:
    skip = False
    for arg in args:
        if arg is None:
            judge.high("find gets an argument computed at run time")
        if skip:
            skip = False
            continue
        if arg in _FIND_ACTIONS:
            judge.high(f"find {arg} deletes, runs commands or writes files")
        if arg in _FIND_VALUES:
            skip = True
            continue
        if arg.startswith("-") or arg in ("(", ")", "!", ","):
            continue
        judge.path(arg, what="find searches")


_GREP_PATTERN = frozenset({"-e", "--regexp"})
_GREP_FILE = frozenset({"-f", "--file", "--ignore-file"})
_GREP_VALUE = frozenset(
    {"-A", "-B", "-C", "-m", "--max-count", "-d", "-D", "--label", "--include", "--exclude",
     "--exclude-dir", "--color", "--colour", "--context", "--after-context",
     "--before-context", "--devices", "--directories", "--binary-files"}
)
_RG_VALUE = _GREP_VALUE | frozenset(
    {"-g", "--glob", "--iglob", "-t", "--type", "-T", "--type-not", "-r", "--replace", "-M",
     "--max-columns", "-j", "--threads", "-E", "--encoding", "--max-depth", "--sort",
     "--sortr", "--type-add"}
) - {"-d", "-D"}


def _grep(judge: Judge, name: str, args: Args) -> None:
    have_pattern = any(
        a is not None and (a in _GREP_PATTERN or a in _GREP_FILE or a.startswith("--regexp=")
                           or a.startswith("--file=")) for a in args
    )
    options = True
    i = 0
    while i < len(args):
        arg = args[i]
        if arg is None:
            judge.high(f"{name} gets an argument computed at run time")
        if options and arg == "--":
            options = False
        elif options and arg.startswith("-") and arg != "-":
            key = arg.partition("=")[0]
            if key in ("--pre", "--pre-glob") or (key == "--search-zip" and name == "rg"):
                judge.high(f"{name} {key} runs other programs")
            if key in _GREP_FILE:
                if "=" in arg:
                    judge.path(arg.partition("=")[2], what=f"{name} reads")
                elif i + 1 < len(args):
                    i += 1
                    judge.path(args[i] or "", what=f"{name} reads")
            elif "=" not in arg and (arg in (_RG_VALUE if name == "rg" else _GREP_VALUE)
                                     or arg in _GREP_PATTERN):
                i += 1
            elif not arg.startswith("--") and len(arg) > 2 and _attached_path(arg[2:]):
                judge.path(arg[2:], what=f"{name} reads")  # `-f/etc/x`
        elif not have_pattern:
            have_pattern = True  # the first operand is the pattern, not a path
        elif arg != "-":
            judge.path(arg, what=f"{name} reads")
        i += 1


def _jq(judge: Judge, name: str, args: Args) -> None:
    operands = [a for a in args if a is None or not a.startswith("-")]
    if any(a is None for a in args):
        judge.high("jq gets an argument computed at run time")
    if any(a in ("-f", "--from-file", "--rawfile", "--slurpfile") for a in args):
        judge.high("jq reading programs or data from named files is not rated")
    paths(judge, operands[1:], what="jq reads")


# ---- sed, awk -----------------------------------------------------------------------------

_SED_FLAGS = frozenset({"-n", "-E", "-r", "-s", "-u", "-z", "--quiet", "--silent",
                        "--regexp-extended", "--separate", "--unbuffered", "--null-data",
                        "--posix", "--debug", "--sandbox"})
_ADDRESS = r"(?:\d+|\$|/(?:[^/\\]|\\.)*/)"
_SED_SIMPLE = re.compile(rf"^(?:{_ADDRESS}(?:,{_ADDRESS})?)?!?\s*[pdqQ=]?$")


def _sed_script_ok(script: str) -> bool:
    """Only ``s///`` with harmless flags and ``p``/``d``/``q``: ``w``, ``r``, ``e`` are
    refused (they write, read other files, or run commands)."""
    for part in _sed_commands(script):
        if part is None:
            return False
        if part and not _SED_SIMPLE.match(part):
            return False
    return True


def _sed_commands(script: str) -> list[str | None]:
    """Split on ``;`` and newlines outside ``s`` commands; ``s`` commands are checked here."""
    out: list[str | None] = []
    i, n = 0, len(script)
    current = ""
    while i < n:
        ch = script[i]
        if ch in ";\n":
            out.append(current.strip())
            current = ""
            i += 1
            continue
        if ch == "s" and i + 1 < n and script[i + 1] not in "\\\n":
            delim = script[i + 1]
            j = i + 2
            fields = 0
            while j < n and fields < 2:
                if script[j] == "\\":
                    j += 2
                    continue
                if script[j] == delim:
                    fields += 1
                j += 1
            if fields < 2:
                return [None]
            k = j
            while k < n and script[k] not in ";\n}":
                k += 1
            if not re.fullmatch(r"[gpiIm0-9\s]*", script[j:k]):
                return [None]
            address = current.strip()
            if address and not re.fullmatch(rf"{_ADDRESS}(?:,{_ADDRESS})?!?", address):
                return [None]
            current = ""
            out.append("")
            i = k
            continue
        current += ch
        i += 1
    out.append(current.strip())
    return out


def _sed(judge: Judge, name: str, args: Args) -> None:
    scripts: list[str] = []
    files: list[str] = []
    in_place = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg is None:
            judge.high("sed gets an argument computed at run time")
        if arg in ("-e", "--expression") and i + 1 < len(args):
            i += 1
            scripts.append(args[i] or "\x00")
        elif arg.startswith("--expression="):
            scripts.append(arg.partition("=")[2])
        elif arg == "-i" or arg.startswith(("-i", "--in-place")):
            suffix = arg[2:] if arg.startswith("-i") else arg.partition("=")[2]
            if "/" in suffix:
                judge.high("sed -i with a backup name that is a path")
            in_place = True
        elif arg.startswith("-") and arg != "-":
            if arg not in _SED_FLAGS and not re.fullmatch(r"-[nErsuz]+", arg):
                judge.high(f"sed {arg} is not rated (-f reads a script, -e/--file …)")
        elif not scripts:
            scripts.append(arg)
        else:
            files.append(arg)
        i += 1
    if not scripts or not all(_sed_script_ok(s) for s in scripts):
        judge.high("the sed script may write files or run commands (w, r, e)")
    for path in files:
        judge.path(path, write=in_place, what="sed edits" if in_place else "sed reads")
    if in_place:
        judge.medium("sed edits files inside the workspace")


_AWK_DANGER = re.compile(r"system|getline|[|>]|@|ENVIRON|PROCINFO|close|fflush")


def _awk(judge: Judge, name: str, args: Args) -> None:
    program: str | None = None
    files: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg is None:
            judge.high(f"{name} gets an argument computed at run time")
        if arg in ("-F", "-v") and i + 1 < len(args):
            i += 1
        elif (arg.startswith(("-F", "-v")) and len(arg) > 2) or arg == "--":
            pass
        elif arg.startswith("-"):
            judge.high(f"{name} {arg} is not rated (-f, -i, -l, -e load or run programs)")
        elif program is None:
            program = arg
        else:
            files.append(arg)
        i += 1
    if program is None or _AWK_DANGER.search(program):
        judge.high(f"the {name} program may write files or run commands")
    for path in files:
        if "=" not in path:
            judge.path(path, what=f"{name} reads")


# ---- make, npm ------------------------------------------------------------------------------

_MAKE_FLAGS = re.compile(r"^-(?:[kisnBqwe]+|j\d*|-keep-going|-silent|-always-make|-dry-run|"
                         r"-question|-jobs(?:=\d+)?|-no-print-directory|-print-directory)$")


def _make(judge: Judge, name: str, args: Args) -> None:
    rest = list(args)
    for i, arg in enumerate(rest[:-1]):
        if arg in ("-C", "--directory"):
            directory = rest[i + 1]
            if directory is None:
                judge.high("make -C a computed directory")
            with judge.within(directory):
                _make(judge, name, rest[:i] + rest[i + 2 :])
            return
    targets: list[str | None] = []
    while rest:
        arg = rest.pop(0)
        if arg is None:
            judge.high("make gets an argument computed at run time")
        if arg in ("-f", "--file", "--makefile") and rest:
            judge.path(rest.pop(0) or "", what="make reads")
        elif arg.startswith("-"):
            if not _MAKE_FLAGS.match(arg):
                judge.high(f"make {arg} is not rated (--eval and -E run given text)")
        else:
            targets.append(arg)
    paths(judge, targets, what="make names")
    judge.medium("make runs the workspace's own build")


_NPM_SUBCOMMANDS = {
    "npm": frozenset({"test", "t", "tst", "run", "run-script", "ls", "list", "--version",
                      "-v"}),
    "yarn": frozenset({"test", "run", "lint", "build", "--version", "-v"}),
    "pnpm": frozenset({"test", "t", "run", "ls", "list", "--version", "-v"}),
}


def _npm(judge: Judge, name: str, args: Args) -> None:
    sub = args[0] if args else None
    if sub is None or sub not in _NPM_SUBCOMMANDS[name]:
        judge.high(f"{name} {sub or ''} may install from the network or run given code".strip())
    paths(judge, args[1:], what=f"{name} {sub} gets")
    judge.medium(f"{name} {sub} runs the project's own scripts")


def match(name: str) -> Handler | None:
    """Handlers chosen by pattern (``python3.12``)."""
    if re.fullmatch(r"python[0-9.]*", name):
        return _python
    return None


HANDLERS: dict[str, Handler] = {
    "cd": _cd,
    "source": _source,
    ".": _source,
    "read": _read,
    "set": _set,
    "node": _node,
    "bash": _shell,
    "sh": _shell,
    "dash": _shell,
    "zsh": _shell,
    "find": _find,
    "grep": _grep,
    "egrep": _grep,
    "fgrep": _grep,
    "rg": _grep,
    "jq": _jq,
    "sed": _sed,
    "awk": _awk,
    "gawk": _awk,
    "mawk": _awk,
    "make": _make,
    "npm": _npm,
    "yarn": _npm,
    "pnpm": _npm,
}


def _git(judge: Judge, name: str, args: Args) -> None:
    from trio_cap.actors.risk.git import rate_git

    rate_git(judge, args)


HANDLERS["git"] = _git
__all__ = ["HANDLERS", "match", "run"]
