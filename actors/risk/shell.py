"""Shell commands rated by what they do, from a real parse (tree-sitter-bash).

Why a parser and not patterns: the same effect has endless spellings
(``'rm' -rf``, ``r\\m -rf``, ``X=-rf; rm $X``, ``find . -delete``, a
pipe into ``sh``), and every pattern list misses one.  So the command is
parsed, every word is evaluated the way bash would quote-remove it, and the
rating is built up from the parts; a part that is not fully understood makes
the whole command high.

Rules, in the order they are applied:

=============================================  ==========================================
what                                           rating
=============================================  ==========================================
text bash cannot parse, NUL bytes, > 64 KiB    high
``cmd &`` (runs beyond the turn)                high
lists, pipes, ``( )``, ``{ }``, ``!``,          every part rated; a loop variable must be
``[[ ]]``, ``if``, ``for``, ``while``,         lower case (``for PATH in …`` is high)
``until``, ``case``
any other construct                            high (functions, C-style ``for``,
                                               ``declare``/``local``, arithmetic …)
a variable assignment, alone, as a             high, unless the name is harmless
``VAR=x cmd`` prefix or ``export``             (:data:`BENIGN_ENV`) and the value fixed,
                                               or ``PYTHONPATH``/``NODE_PATH`` inside
``$(…)``, backticks, ``<(…)``                  the inner commands are rated too, and the
                                               word becomes unknown
a command name not fixed before it runs        high (``$X``, ``$(…)``, ``$'\\x72m'``)
a path argument or redirect target not fixed   high
a path outside the workspace (lexically, see   high
:mod:`.paths`; or found to resolve outside)
a command not in :mod:`.commands`' table       high
a known command's own rules                    low (reads) / medium (writes, runs
                                               workspace code) / high
=============================================  ==========================================

The rating is the highest of its parts.  Alongside it the judge collects
every workspace path the command names (absolute, not normalised), so the
session actor can check which of them resolve outside through a symlink.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import tree_sitter
import tree_sitter_bash

from trio_cap.actors.risk.paths import (
    READ_DEVICES,
    WRITE_DEVICES,
    Workspace,
    git_internal,
    secret,
)
from trio_cap.events.kinds import RiskLevel

MAX_COMMAND = 64 * 1024
_LANGUAGE = tree_sitter.Language(tree_sitter_bash.language())

BENIGN_ENV = frozenset(
    {
        "CI", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "TERM", "COLUMNS", "LINES", "LANG",
        "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED", "PYTHONHASHSEED", "PYTHONWARNINGS", "PYTHONUTF8", "NODE_ENV",
        "RUST_BACKTRACE", "DEBUG", "VERBOSE", "GIT_TERMINAL_PROMPT",
    }
)
"""Variables that change output, never which program runs, where, or with what code."""

PATHLIKE_ENV = frozenset({"PYTHONPATH", "NODE_PATH"})
"""Variables that choose code to import: allowed when every entry is inside the workspace."""

_CONTAINERS = frozenset(
    {"program", "list", "pipeline", "compound_statement", "subshell", "negated_command"}
)
_COMPOUND = frozenset(
    {"if_statement", "elif_clause", "else_clause", "while_statement", "for_statement",
     "do_group", "case_statement", "case_item"}
)
"""Control flow whose parts are statements and words: rated by walking them all."""
_WORDS = frozenset(
    {"word", "string", "raw_string", "concatenation", "simple_expansion", "expansion",
     "number", "ansi_c_string", "translated_string", "command_substitution",
     "process_substitution", "extglob_pattern"}
)
_LOOP_VARIABLE = re.compile(r"^[a-z_][a-z0-9_]*$")
"""A loop or ``read`` variable in lower case cannot be PATH, IFS, LD_PRELOAD, PS4 …"""
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_SUBSTITUTIONS = frozenset({"command_substitution", "process_substitution"})


class High(Exception):
    """A part of the command is high risk: the rating stops there."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class Judge:
    """The rating of one request as it is built up, and the workspace paths it names."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.level: RiskLevel = "low"
        self.why = "reads inside the workspace"
        self.paths: list[str] = []
        self.bases: set[str] = {""}
        """Directories (relative to the root) a command may run in, after ``cd``s."""

    def high(self, why: str) -> NoReturn:
        raise High(why)

    def medium(self, why: str) -> None:
        if self.level == "low":
            self.level, self.why = "medium", why

    def path(self, word: str, *, write: bool = False, delete: bool = False,
             what: str = "names") -> None:
        """Judge one path argument from every directory the command may run in."""
        if word in READ_DEVICES or word in WRITE_DEVICES:
            if write and word not in WRITE_DEVICES:
                self.high(f"{what} the device {word}")
            return
        for base in sorted(self.bases):
            rel = self.workspace.locate(word, base)
            if rel is None:
                self.high(f"{what} {word!r}, outside the workspace")
            why = secret(rel)
            if why:
                self.high(f"{what} {word!r}: {why}")
            if (write or delete) and git_internal(rel):
                self.high(f"{what} {word!r} inside .git (hooks and config run programs)")
            if delete and rel == "":
                self.high(f"{what} the workspace itself")
            absolute = self.workspace.absolute(word, base)
            if absolute is not None:
                self.paths.append(absolute)
        if delete:
            self.medium(f"deletes {word} inside the workspace")
        elif write:
            self.medium(f"writes {word} inside the workspace")

    def enter(self, word: str) -> set[str]:
        """The directories a ``cd word`` may lead to (each inside, or high)."""
        self.path(word, what="changes directory to")
        out = set()
        for base in self.bases:
            rel = self.workspace.locate(word, base)
            assert rel is not None  # path() refused otherwise
            out.add(rel)
        return out

    @contextmanager
    def within(self, word: str) -> Iterator[None]:
        """Judge the rest of one command from ``word`` (``git -C``, ``make -C``)."""
        saved = self.bases
        self.bases = self.enter(word)
        try:
            yield
        finally:
            self.bases = saved


def rate_command(command: str, workspace: Workspace) -> Judge:
    """Rate one shell command string; the judge holds level, reason and paths named."""
    judge = Judge(workspace)
    try:
        if len(command) > MAX_COMMAND:
            judge.high(f"the command is longer than {MAX_COMMAND} characters")
        if "\x00" in command:
            judge.high("the command contains a NUL byte")
        parser = tree_sitter.Parser(_LANGUAGE)
        tree = parser.parse(command.encode("utf-8", "surrogateescape"))
        if tree.root_node.has_error:
            judge.high("the shell cannot parse it")
        if not command.strip():
            judge.high("the command is empty")
        _Walk(judge).statement(tree.root_node)
    except High as exc:
        judge.level, judge.why = "high", exc.why
    except RecursionError:
        judge.level, judge.why = "high", "the command is nested too deeply to rate"
    return judge


class _Walk:
    def __init__(self, judge: Judge) -> None:
        self.judge = judge

    # ---- statements ------------------------------------------------------------------
    def statement(self, node: tree_sitter.Node) -> None:
        kind = node.type
        if kind == "comment":
            return
        if kind in _CONTAINERS:
            for child in node.children:
                if child.type == "&":
                    self.judge.high("it runs a command in the background, beyond the turn")
                if child.is_named:
                    self.statement(child)
        elif kind == "redirected_statement":
            for child in node.children:
                if child.type in _REDIRECTS:
                    self.redirect(child)
                elif child.is_named:
                    self.statement(child)
        elif kind == "command":
            self.command(node)
        elif kind == "variable_assignment":
            self.assignment(node)
        elif kind == "test_command":
            self.scan(node)
        elif kind in _COMPOUND:
            self.compound(node)
        elif kind == "declaration_command":
            self.declaration(node)
        else:
            self.judge.high(f"the shell construct {kind!r} is not rated")

    def compound(self, node: tree_sitter.Node) -> None:
        for child in node.children:
            if not child.is_named or child.type == "comment":
                continue
            if child.type == "variable_name":  # `for NAME in …`
                name = (child.text or b"").decode(errors="replace")
                if not _LOOP_VARIABLE.match(name):
                    self.judge.high(f"the loop sets {name}, which can change what commands do")
            elif child.type in _WORDS:
                self.scan(child)
            else:
                self.statement(child)

    def declaration(self, node: tree_sitter.Node) -> None:
        """``export NAME=value``: like a ``NAME=value`` prefix; other declarations are high."""
        keyword = node.children[0].type if node.children else ""
        if keyword != "export":
            self.judge.high(f"the shell construct {keyword!r} is not rated")
        for child in node.children[1:]:
            if child.type == "variable_assignment":
                self.assignment(child)
            elif child.type != "variable_name":
                self.judge.high("export with options is not rated")

    def redirect(self, node: tree_sitter.Node) -> None:
        if node.type == "herestring_redirect":
            self.scan(node)
            return
        if node.type == "heredoc_redirect":
            for child in node.children:
                if child.type == "file_redirect":
                    self.redirect(child)
                elif child.type == "heredoc_body":
                    self.scan(child)
                elif child.is_named and child.type not in ("heredoc_start", "heredoc_end"):
                    self.statement(child)
            return
        ops = [c.type for c in node.children if not c.is_named]
        op = ops[0] if ops else ">"
        target = node.child_by_field_name("destination")
        if target is None:
            return  # `>&-`: closes a descriptor
        self.scan(target)
        if op in (">&", "<&") and target.type == "number":
            return  # duplicates a descriptor
        word = static(target)
        if word is None:
            self.judge.high("a redirection target is computed at run time")
        if op in (">&", "<&") and word == "-":
            return
        if op == "<":
            self.judge.path(word, what="reads")
        else:
            self.judge.path(word, write=True, what="redirects output to")

    def assignment(self, node: tree_sitter.Node) -> None:
        self.scan(node)
        name_node = node.child_by_field_name("name")
        name = name_node.text.decode(errors="replace") if name_node and name_node.text else "?"
        value = node.child_by_field_name("value")
        fixed = "" if value is None else static(value)
        if name in BENIGN_ENV and fixed is not None:
            return
        if name in PATHLIKE_ENV and fixed:
            for part in fixed.split(":"):
                if part:
                    self.judge.path(part, what=f"{name} points at")
            return
        self.judge.high(f"it sets {name}, which can change what later commands do")

    def command(self, node: tree_sitter.Node) -> None:
        name_node = None
        args: list[tree_sitter.Node] = []
        for child in node.children:
            if child.type == "variable_assignment":
                self.assignment(child)
            elif child.type == "command_name":
                name_node = child
            elif child.type in _REDIRECTS:
                self.redirect(child)
            elif child.is_named and child.type != "comment":
                args.append(child)
        if name_node is None:
            return
        self.scan(name_node)
        for arg in args:
            self.scan(arg)
        name = static(name_node)
        if name is None:
            self.judge.high("the command name is computed at run time")
        from trio_cap.actors.risk.commands import run

        run(self.judge, name, [static(a) for a in args])

    def scan(self, node: tree_sitter.Node) -> None:
        """Rate the commands hidden inside a word; arithmetic may run them too."""
        stack = [node]
        while stack:
            current = stack.pop()
            kind = current.type
            if kind in _SUBSTITUTIONS:
                for child in current.children:
                    if child.is_named:
                        self.statement(child)
                continue
            if kind in ("arithmetic_expansion", "arithmetic_expression"):
                self.judge.high("arithmetic expansion can run commands through array indices")
            stack.extend(current.children)


# ---- words ---------------------------------------------------------------------------


def static(node: tree_sitter.Node) -> str | None:
    """The word after quote removal, or None when it depends on run time."""
    kind = node.type
    text = (node.text or b"").decode("utf-8", "surrogateescape")
    if kind == "command_name":
        parts = [static(c) for c in node.children]
        return None if any(p is None for p in parts) else "".join(parts)  # type: ignore[arg-type]
    if kind == "word":
        return _unescape_word(text)
    if kind == "number":
        return text
    if kind == "raw_string":
        return text[1:-1]
    if kind == "string":
        out = []
        for child in node.children:
            if child.type == '"':
                continue
            if child.type != "string_content":
                return None
            out.append(_unescape_double((child.text or b"").decode("utf-8", "surrogateescape")))
        return "".join(out)
    if kind == "concatenation":
        parts = [static(c) for c in node.children]
        return None if any(p is None for p in parts) else "".join(parts)  # type: ignore[arg-type]
    return None


def _unescape_word(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _unescape_double(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in '"\\$`\n':
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)

