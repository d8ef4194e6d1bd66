"""What the agent side is asked to do, read from Claude Code's own command line.

SDK clients exec ``cli_path`` with Claude Code's flags (stream-json.md §4.3 and
the TS differences in §5): ``--flag value`` and ``--flag=value`` forms,
an empty ``--system-prompt ""``, many flags we have no use for.  The parser is
hand-written rather than argparse because it must *tolerate* every unknown
flag — a client that is newer than us must still be able to drive us — and
argparse can only reject or mis-assign them.

Pure: it reads neither the process's working directory nor any file.  Flags
that name files (``--system-prompt-file``) are kept as paths, and the shell
(:func:`~trio_cap.actors.bindings.stream_json.agent_shell.resolve_options`)
reads them and fills in the working directory before the machine starts.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

PERMISSION_MODES = (
    "default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto", "manual",
)

# Claude Code flags that take no value; anything else that is unknown and not
# written ``--flag=value`` takes the next argument when it does not look like a flag.
_BOOLEAN = {
    "--verbose", "-p", "--print", "--include-partial-messages", "--continue", "-c",
    "--fork-session", "--strict-mcp-config", "--include-hook-events", "--debug", "-d",
    "--dangerously-skip-permissions", "--allow-dangerously-skip-permissions",
    "--replay-user-messages", "--ide", "--no-session-persistence", "--bare",
    "--resume-drops-turn", "--session-mirror", "--no-workspace-diff", "--cap-manifest",
}
_VERSION = {"-v", "--version"}
_HELP = {"-h", "--help"}


@attrs.define
class AgentOptions:
    """Everything the stream-json agent side needs to know before the first frame."""

    cwd: str | None = None
    """The session's working directory; None: the process's, filled in by the shell."""
    model: str | None = None
    system_prompt: str | None = None
    append_system_prompt: str | None = None
    system_prompt_file: str | None = None
    """``--system-prompt-file F``: read by the shell into ``system_prompt``."""
    append_system_prompt_file: str | None = None
    max_turns: int | None = None
    budget_usd: float | None = None
    permission_mode: str = "default"
    permission_prompt_tool: str | None = None
    partial_messages: bool = False
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    tools: tuple[str, ...] | None = None
    session_id: str | None = None
    resume: str | None = None
    input_format: str = "stream-json"
    output_format: str = "stream-json"
    prompt: str | None = None
    # trio-cap's own
    script: str | None = None
    bridge: str | None = None
    """``--bridge AGENT``: drive AGENT through trio-cap and speak for it (the bridge brain)."""
    bridge_binding: str | None = None
    fleet: str | None = None
    """``--fleet FLEET``: run the fleet file per prompt and speak for it (the fleet face)."""
    log: str | None = None
    fsync: str = "batch"
    transcript_file: str | None = None
    """``--transcript-file F``: the session's whole transcript, written there at exit."""
    diff_every: int = 1000
    diff_interval: float = 2.0
    workspace_diff: bool = True
    max_line: int = 512 * 1024
    show_version: bool = False
    show_help: bool = False
    show_manifest: bool = False
    warnings: list[str] = attrs.field(factory=list)

    @property
    def prompts_on_stdio(self) -> bool:
        return self.permission_prompt_tool == "stdio"


class OptionsError(ValueError):
    """A flag we understand has a value we cannot use (exit code 2)."""


def split_rules(value: str) -> tuple[str, ...]:
    """``--allowedTools "Bash,Write"`` or ``"Bash Write"``; brackets keep their commas."""
    out, depth, cur = [], 0, []
    for ch in value:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        if depth == 0 and (ch == "," or ch.isspace()):
            if cur:
                out.append("".join(cur))
                cur = []
            continue
        cur.append(ch)
    if cur:
        out.append("".join(cur))
    return tuple(out)


def checked_rules(flag: str, value: str) -> tuple[str, ...]:
    """:func:`split_rules`, refusing a rule that does not parse as ``Tool`` or
    ``Tool(pattern)``: a malformed deny rule would deny nothing, so it is never guessed at."""
    rules = split_rules(value)
    for rule in rules:
        name, paren, rest = rule.partition("(")
        depth = 0
        for ch in paren + rest:
            depth += 1 if ch == "(" else -1 if ch == ")" else 0
            if depth < 0:
                break
        if not name or not name.replace("_", "").replace("-", "").isalnum() \
                or (paren and (not rest.endswith(")") or depth != 0)):
            raise OptionsError(f"{flag}: {rule!r} is not a rule: write Tool or "
                               "Tool(pattern), e.g. Bash(git status:*)")
    return rules


def _number(flag: str, value: str, kind: type) -> int | float:
    try:
        number = kind(value)
    except ValueError:
        raise OptionsError(f"{flag}: expected a number, got {value!r}") from None
    if not number >= 0:  # nan too
        raise OptionsError(f"{flag}: must not be negative" if number < 0 else
                           f"{flag}: expected a number, got {value!r}")
    return number


def parse_claude_argv(argv: Sequence[str], *, cwd: str | None = None) -> AgentOptions:
    """Options from a Claude Code command line; unknown flags become ``warnings``."""
    opts = AgentOptions(cwd=cwd, input_format="text")  # Claude Code's default
    positional: list[str] = []
    i = 0
    args = list(argv)
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            positional.extend(args[i:])
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        if arg in _VERSION:
            opts.show_version = True
            continue
        if arg in _HELP:
            opts.show_help = True
            continue
        flag, eq, inline = arg.partition("=")
        if flag in _BOOLEAN and not eq:
            _boolean(opts, flag)
            continue
        if eq:
            value = inline
        elif flag in _VALUED or (i < len(args) and not args[i].startswith("-")):
            if i >= len(args):
                raise OptionsError(f"{flag}: expected a value")
            value = args[i]
            i += 1
        else:
            if flag not in _VALUED:
                opts.warnings.append(f"ignored unknown flag {flag}")
            continue
        _valued(opts, flag, value)
    if positional:
        opts.prompt = " ".join(positional)
    return opts


def _boolean(opts: AgentOptions, flag: str) -> None:
    if flag == "--include-partial-messages":
        opts.partial_messages = True
    elif flag == "--dangerously-skip-permissions":
        opts.permission_mode = "bypassPermissions"
    elif flag == "--no-workspace-diff":
        opts.workspace_diff = False
    elif flag == "--cap-manifest":
        opts.show_manifest = True
    elif flag in ("--continue", "-c"):
        opts.warnings.append("--continue: cap-agent keeps no sessions between runs; starting anew")


def _valued(opts: AgentOptions, flag: str, value: str) -> None:
    match flag:
        case "--output-format":
            opts.output_format = value
        case "--input-format":
            opts.input_format = value
        case "--model":
            opts.model = value or None
        case "--system-prompt":
            opts.system_prompt = value or None
        case "--system-prompt-file":
            opts.system_prompt_file = value
        case "--append-system-prompt":
            opts.append_system_prompt = value or None
        case "--append-system-prompt-file":
            opts.append_system_prompt_file = value
        case "--max-turns":
            opts.max_turns = int(_number(flag, value, int)) or None
        case "--max-budget-usd":
            opts.budget_usd = float(_number(flag, value, float))
        case "--permission-mode":
            if value not in PERMISSION_MODES:
                raise OptionsError(f"--permission-mode: {value!r} is not one of "
                                   f"{', '.join(PERMISSION_MODES)}")
            opts.permission_mode = value
        case "--permission-prompt-tool":
            opts.permission_prompt_tool = value
            if value != "stdio":
                opts.warnings.append(f"--permission-prompt-tool {value}: only 'stdio' is "
                                     "supported; permission requests will be denied")
        case "--allowedTools" | "--allowed-tools":
            opts.allowed_tools += checked_rules(flag, value)
        case "--disallowedTools" | "--disallowed-tools":
            opts.disallowed_tools += checked_rules(flag, value)
        case "--tools":
            opts.tools = None if value == "default" else split_rules(value)
        case "--session-id":
            opts.session_id = value
        case "--resume" | "-r":
            opts.resume = value
            opts.warnings.append("--resume: cap-agent keeps no sessions between runs; the id "
                                 "is recorded as session_resume_id and a new session starts")
        case "--script":
            opts.script = value
        case "--bridge":
            opts.bridge = value
        case "--binding":
            opts.bridge_binding = value
        case "--fleet":
            opts.fleet = value
        case "--log":
            opts.log = value
        case "--fsync":
            opts.fsync = value
        case "--transcript-file":
            opts.transcript_file = value
        case "--transcript-diff-every":
            opts.diff_every = int(_number(flag, value, int))
        case "--transcript-diff-interval":
            opts.diff_interval = float(_number(flag, value, float))
        case _:
            opts.warnings.append(f"ignored {flag}")


_VALUED = {
    "--output-format", "--input-format", "--model", "--system-prompt", "--system-prompt-file",
    "--append-system-prompt", "--append-system-prompt-file", "--max-turns", "--max-budget-usd",
    "--permission-mode", "--permission-prompt-tool", "--allowedTools", "--allowed-tools",
    "--disallowedTools", "--disallowed-tools", "--tools", "--session-id", "--resume", "-r",
    "--script", "--bridge", "--binding", "--fleet", "--log", "--fsync", "--transcript-diff-every",
    "--transcript-file",
    "--transcript-diff-interval",
    "--fallback-model", "--add-dir", "--mcp-config", "--settings", "--setting-sources",
    "--betas", "--plugin-dir", "--thinking", "--max-thinking-tokens", "--thinking-display",
    "--effort", "--json-schema", "--debug-file", "--task-budget", "--agent", "--agents",
    "--resume-session-at", "--permission-prompts", "--channels",
}

