"""Where the brain's Write, Edit and Bash run under ``cap agent --cap-speak acp``.

An editor that advertises ``fs.readTextFile`` / ``fs.writeTextFile`` and
``terminal`` owns the files (its unsaved buffers included) and the
terminals, so the tools go through it: ``fs/read_text_file`` for the old
text, ``fs/write_text_file`` for the new, ``terminal/create`` →
``wait_for_exit`` → ``output`` → ``release`` for a command.  Without a
capability the tool runs here, as the core always does (``tools.py``),
confined to the workspace.  Either way every path is confined to the
workspace first (symlinks resolved, no existence oracle): a client's own
scope is its business, ours is never wider than the session's cwd.

Each write is reported (:meth:`Report.file_changed`) so the running tool
call shows the real change as a ``diff``; each client terminal is reported
(:meth:`Report.terminal_started`) so the call embeds it while it runs.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

from trio_cap.actors.agent import tools
from trio_cap.actors.bindings.acp import frames as f
from trio_cap.actors.bindings.acp.agent_effects import ClientError

Call = Callable[[str, Any], Awaitable[Any]]
"""``call(method, params)`` → the decoded result, or a :class:`ClientError`."""

OUTPUT_LIMIT = tools.OUTPUT_CAP
CLEANUP_SECONDS = 5.0
MAX_OLD_TEXT = 16 << 20


class Report(Protocol):
    async def file_changed(self, path: str, old: str | None, new: str) -> None: ...

    async def terminal_started(self, terminal_id: str) -> None: ...


class AcpToolHost:
    """The :class:`~actors.agent.core.ToolHost` of one ACP session."""

    def __init__(self, session_id: str, client: f.ClientCapabilities, call: Call,
                 report: Report) -> None:
        self.session_id = session_id
        self.reads = client.reads_files()
        self.writes = client.writes_files()
        self.terminal = client.has_terminal()
        self._call = call
        self._report = report

    async def _ask(self, method: str, params: Any) -> Any:
        value = await self._call(method, params)
        if isinstance(value, ClientError):
            raise tools.ToolError(f"the client refused {method}: {value.message} "
                                  f"({value.code})")
        return value

    # ---- files ---------------------------------------------------------------------
    async def _old_text(self, cwd: str, path: str, target: str) -> str | None:
        """The file's text before the change (None: there was no file, or it is unreadable)."""
        if self.reads:
            value = await self._call(f.FS_READ, f.ReadTextFileParams(
                session_id=self.session_id, path=target))
            return value.content if isinstance(value, f.ReadTextFileResult) else None
        return _local_text(cwd, path)

    async def write_file(self, cwd: str, path: str, content: str) -> str:
        target = str(tools.resolve_inside(cwd, path))
        old = await self._old_text(cwd, path, target)
        if self.writes:
            await self._ask(f.FS_WRITE, f.WriteTextFileParams(
                session_id=self.session_id, path=target, content=content))
            result = f"wrote {len(content.encode())} bytes to {path}"
        else:
            result = tools.write_file(cwd, path, content)
        await self._report.file_changed(target, old, content)
        return result

    async def edit_file(self, cwd: str, path: str, old: str, new: str) -> str:
        if not (self.reads and self.writes):
            target = str(tools.resolve_inside(cwd, path))
            before = await self._old_text(cwd, path, target)
            result = tools.edit_file(cwd, path, old, new)
            if before is not None:
                await self._report.file_changed(target, before, before.replace(old, new, 1))
            return result
        target = str(tools.resolve_inside(cwd, path))
        value = await self._ask(f.FS_READ, f.ReadTextFileParams(session_id=self.session_id,
                                                                path=target))
        text = value.content
        if old not in text:
            raise tools.ToolError(f"{path} does not contain the text to replace")
        after = text.replace(old, new, 1)
        await self._ask(f.FS_WRITE, f.WriteTextFileParams(session_id=self.session_id,
                                                          path=target, content=after))
        await self._report.file_changed(target, text, after)
        return f"edited {path}"

    # ---- commands ----------------------------------------------------------------------
    async def run_command(self, cwd: str, command: str,
                          seconds: float) -> tuple[int | None, str]:
        if not self.terminal:
            return await tools.run_command(cwd, command, seconds)
        program, args = terminal_argv(command)
        created = await self._ask(f.TERMINAL_CREATE, f.CreateTerminalParams(
            session_id=self.session_id, command=program, args=args,
            cwd=cwd, output_byte_limit=OUTPUT_LIMIT))
        terminal = f.TerminalParams(session_id=self.session_id,
                                    terminal_id=created.terminal_id)
        try:
            await self._report.terminal_started(created.terminal_id)
            code: int | None = None
            with trio.move_on_after(seconds) as timer:
                status = await self._ask(f.TERMINAL_WAIT, terminal)
                code = status.exit_code if status.signal is None else 128 + _signal(status)
            if timer.cancelled_caught:
                await self._ask(f.TERMINAL_KILL, terminal)
            output = await self._ask(f.TERMINAL_OUTPUT, terminal)
            text = output.output + ("\n… (output truncated from the start)"
                                    if output.truncated else "")
            if timer.cancelled_caught:
                return None, f"timed out after {seconds:g}s\n{text}"
            return code, text
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(CLEANUP_SECONDS):
                await self._call(f.TERMINAL_RELEASE, terminal)


_SHELL_SYNTAX = frozenset("|&;<>()$`\\*?[]{}~#!\n'\"=%")
_BUILTINS = frozenset({"cd", "export", "source", ".", "alias", "set", "unset", "exit",
                       "ulimit", "umask", "eval", "exec", "type", "command", "read", "trap",
                       "wait", "jobs", "fg", "bg", "shift", "local", "return"})


def terminal_argv(command: str) -> tuple[str, tuple[str, ...]]:
    """What ``terminal/create`` runs for a Bash command: a plain command line (words only)
    as its own argv, so a client that vets commands sees the program itself; anything
    using shell syntax (or a shell builtin) as ``/bin/sh -c COMMAND``."""
    words = command.split()
    if words and not (_SHELL_SYNTAX & set(command)) and words[0] not in _BUILTINS:
        return words[0], tuple(words[1:])
    return "/bin/sh", ("-c", command)


def _local_text(cwd: str, path: str) -> str | None:
    try:
        with open(tools.resolve_inside(cwd, path), "rb") as file:
            data = file.read(MAX_OLD_TEXT + 1)
    except (OSError, tools.ToolError):
        return None
    return data.decode(errors="replace") if len(data) <= MAX_OLD_TEXT else None


def _signal(status: f.TerminalExitStatus) -> int:
    """A signal name as the shell's exit code (``SIGKILL`` → 9 → 137)."""
    try:
        return int(signal.Signals[status.signal or ""])
    except KeyError:
        return 0
