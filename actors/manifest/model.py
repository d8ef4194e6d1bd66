"""The typed manifest: CAP core §5 plus the coding profile's ``[capabilities.coding]``.

Every field carries its user-facing meaning and required-ness as metadata, so
the contract table in ``docs/cap.md`` and the validator read one source.  The
value checks live in the ``Annotated`` metadata (see :mod:`.checks`); the
converter in :mod:`.convert` applies them.  Classes are frozen: a resolved
manifest is shared by every session started from it.
"""

# The helpers below return attrs.field() descriptors, which RUF009 allows but cannot see through.
# ruff: noqa: RUF009

from typing import Annotated, Any

import attrs

from trio_cap.actors.manifest import checks


@attrs.frozen
class Check:
    """Annotated marker: the whole raw value goes through ``fn``."""

    fn: Any


@attrs.frozen
class Each:
    """Annotated marker: the raw value must be an array; each element goes through ``fn``."""

    fn: Any


Str = Annotated[str, Check(checks.string)]
NonEmpty = Annotated[str, Check(checks.nonempty_string)]
Bool = Annotated[bool, Check(checks.boolean)]
Pattern = Annotated[str, Check(checks.pattern)]
Patterns = Annotated[tuple[str, ...], Each(checks.pattern)]
Strings = Annotated[tuple[str, ...], Each(checks.nonempty_string)]
Argv = Annotated[tuple[str, ...], Check(checks.argv)]
CancelMode = Annotated[str, Check(checks.one_of("graceful", "hard", "none"))]
FsScope = Annotated[str, Check(checks.one_of("workspace_only", "project_root", "unrestricted"))]
ToolPermission = Annotated[str, Check(checks.one_of("none", "confirm", "interactive"))]

REQUIRED = "yes"
OPTIONAL = "no"
IF_CODING = "when `[capabilities.coding]` is present"
IF_FS = "when any `fs.*` capability is true"
IDLE_DEFAULT = ("^>\\s*$", "^\u276f\\s*$")  # ">" and U+276F prompts


def field(
    doc: str,
    *,
    default: Any = attrs.NOTHING,
    factory: Any = None,
    required: str | None = None,
    toml: str | None = None,
) -> Any:
    """An attrs field with the metadata the docs table and the validator read."""
    if required is None:
        required = REQUIRED if default is attrs.NOTHING and factory is None else OPTIONAL
    meta = {"doc": doc, "required": required, "toml": toml}
    if factory is not None:
        return attrs.field(factory=factory, metadata=meta)
    return attrs.field(default=default, metadata=meta)


def section(cls: type, doc: str, *, required: bool = False) -> Any:
    meta = {"doc": doc, "required": REQUIRED if required else OPTIONAL, "toml": None}
    if required:
        return attrs.field(metadata=meta)
    return attrs.field(factory=cls, metadata=meta)


def optional_section(doc: str) -> Any:
    return attrs.field(default=None, metadata={"doc": doc, "required": OPTIONAL, "toml": None})


# --------------------------------------------------------------------------
# core §5
# --------------------------------------------------------------------------

@attrs.frozen
class Agent:
    name: Annotated[str, Check(checks.agent_name)] = field(
        "unique name of the agent; manifest files are called `<name>.toml`"
    )
    binary: Annotated[str, Check(checks.program)] = field(
        "the program: a plain name found on PATH or an absolute path, no shell metacharacters"
    )
    profiles: Strings = field("CAP profiles the agent implements, e.g. `coding`; may be empty")
    version_match: Pattern | None = field(
        "RE2 pattern the probed version must match", default=None
    )


@attrs.frozen
class Probe:
    command: Argv | None = field(
        "argv that prints the agent's version, e.g. `[\"claude\", \"--version\"]`", default=None
    )
    version_pattern: Pattern | None = field(
        "RE2 pattern whose first group extracts the version from the probe output", default=None
    )


@attrs.frozen
class ReadyWhen:
    pattern: Pattern = field("RE2 pattern; a PTY line matching it means the agent has started")


@attrs.frozen
class Startup:
    command: Argv = field("argv that starts the agent (PTY); an array, never a shell string")
    ready_when: ReadyWhen = section(
        ReadyWhen, "how the driver knows the agent finished starting", required=True
    )
    cwd_arg: NonEmpty | None = field(
        "flag that sets the working directory; without it the process cwd is set", default=None
    )
    model_arg: NonEmpty | None = field("flag that selects the model", default=None)
    session_id_env: Annotated[str, Check(checks.env_name)] | None = field(
        "environment variable that carries the session id", default=None
    )
    init_timeout_seconds: Annotated[float, Check(checks.positive_number)] = field(
        "seconds to wait for readiness before the start fails (trio-cap's default)",
        default=60.0,
    )


@attrs.frozen
class FastPath:
    stream_json: Annotated[bool | tuple[str, ...], Check(checks.bool_or_argv)] = field(
        "stream-json binding: `false`, `true` (startup.command speaks it) or its own argv",
        default=False,
    )
    acp_stdio: Annotated[bool | tuple[str, ...], Check(checks.bool_or_argv)] = field(
        "ACP-stdio binding: `false`, `true` (startup.command speaks it) or its own argv",
        default=False,
    )
    a2a_serve_at: Annotated[bool | str, Check(checks.false_or_url)] = field(
        "A2A binding: `false` or the http(s) base URL of the agent's A2A server", default=False
    )
    grpc: Annotated[bool | str, Check(checks.bool_or_address)] = field(
        "gRPC binding: `false`, `true` or an address; accepted but skipped with a warning",
        default=False,
    )
    x_inproc: Bool = field(
        "experimental: the agent is trio-cap's own brain and can run in the orchestrator's "
        "process (only `cap-agent`)",
        default=False,
        toml="x-inproc",
    )


@attrs.frozen
class Pty:
    cols: Annotated[int, Check(checks.terminal_size)] = field("starting PTY width in columns")
    rows: Annotated[int, Check(checks.terminal_size)] = field("starting PTY height in rows")
    bracketed_paste: Bool = field(
        "wrap long or multi-line input in bracketed-paste escapes", default=False
    )
    sigint_cancels_turn: CancelMode = field(
        "what Ctrl-C does to a turn: one of `graceful`, `hard`, `none`", default="hard"
    )
    queued_input_supported: Bool = field("the TUI accepts typed input mid-turn", default=False)
    x_idle_ms: Annotated[float, Check(checks.positive_number)] = field(
        "trio-cap: milliseconds without output before the screen counts as settled (CAP "
        "Appendix A3's idle window)",
        default=200.0,
        toml="x-idle-ms",
    )
    x_enter_delay_ms: Annotated[float, Check(checks.positive_number)] = field(
        "trio-cap: milliseconds between typing a prompt and pressing Enter",
        default=30.0,
        toml="x-enter-delay-ms",
    )
    x_redraw: Bool = field(
        "trio-cap: the TUI repaints its main screen in place, new lines above its input box "
        "(Ink: Gemini CLI); its turn output is read as on an alternate screen",
        default=False,
        toml="x-redraw",
    )
    x_cancel_keys: Strings = field(
        "trio-cap: what is typed to cancel a graceful turn, one write per item 100 ms apart "
        "(default Ctrl-C; opencode quits on Ctrl-C and interrupts on Esc Esc)",
        default=("\x03",),
        toml="x-cancel-keys",
    )


@attrs.frozen
class Parse:
    idle: Patterns = field(
        "RE2 patterns; the agent is idle when the last non-empty line matches one",
        default=IDLE_DEFAULT,
    )
    tool_call_start: Pattern | None = field(
        "RE2 pattern for a line that starts a tool call (groups `tool`, `args`)", default=None
    )
    tool_call_end: Pattern | None = field(
        "RE2 pattern for a line that ends a tool call (groups `tool`, `status`)", default=None
    )
    plan_section: Pattern | None = field("RE2 pattern for the line opening a plan", default=None)
    thought_section: Pattern | None = field(
        "RE2 pattern for the line opening a thought", default=None
    )
    ask_yes_no: Pattern | None = field("RE2 pattern for a yes/no question", default=None)
    ask_options: Pattern | None = field(
        "RE2 pattern for a pick-one-of-several question", default=None
    )
    error_lines: Patterns = field("RE2 patterns for lines that report an error", default=())
    x_blocked: Patterns = field(
        "trio-cap: RE2 patterns for dialogs that block the TUI (trust, login, update); added "
        "to trio-cap's built-ins",
        default=(),
        toml="x-blocked",
    )
    x_chrome: Patterns = field(
        "trio-cap: RE2 patterns for redraw chrome that is never turn text; added to "
        "trio-cap's built-ins",
        default=(),
        toml="x-chrome",
    )
    x_busy: Patterns = field(
        "trio-cap: RE2 patterns for lines a TUI shows while it works (Gemini's `esc to "
        "cancel`, `Initializing...`); while one is on screen the agent is neither ready nor "
        "idle, whatever its last line says",
        default=(),
        toml="x-busy",
    )
    x_text_prefix: Pattern | None = field(
        "trio-cap: RE2 pattern for the glyph that opens an agent's reply lines (Claude Code's "
        "`● `, Gemini's `✦ `); what it matches at a line's start is not turn text",
        default=None,
        toml="x-text-prefix",
    )


@attrs.frozen
class AskUser:
    yes_no: Bool = field("the agent asks yes/no questions", default=False)
    options: Bool = field("the agent asks pick-one-of-several questions", default=False)
    free_text: Bool = field("the agent asks free-text questions", default=False)


# --------------------------------------------------------------------------
# coding profile §3
# --------------------------------------------------------------------------

@attrs.frozen
class Fs:
    read: Bool = field("the agent calls `cap.fs.read`", default=False)
    write: Bool = field("the agent calls `cap.fs.write`", default=False)
    list: Bool = field("the agent calls `cap.fs.list`", default=False)
    exists: Bool = field("the agent calls `cap.fs.exists`", default=False)
    delete: Bool = field("the agent calls `cap.fs.delete`", default=False)
    watch: Bool = field("the agent calls `cap.fs.watch`", default=False)
    scope: FsScope | None = field(
        "where fs calls may reach: one of `workspace_only`, `project_root`, `unrestricted`",
        default=None,
        required=IF_FS,
    )

    def any_enabled(self) -> bool:
        return any((self.read, self.write, self.list, self.exists, self.delete, self.watch))


@attrs.frozen
class Terminal:
    enabled: Bool = field("the agent calls `cap.terminal.*`", default=False)
    concurrent_max: Annotated[int, Check(checks.positive_int)] | None = field(
        "most terminals the agent keeps open at once", default=None
    )


@attrs.frozen
class Coding:
    tool_permission: ToolPermission = field(
        "how terminal commands are vetted: one of `none`, `confirm`, `interactive`",
        required=IF_CODING,
    )
    revision: Annotated[str, Check(checks.revision)] | None = field(
        "coding-profile revision the section follows (YYYY-MM-DD)", default=None
    )
    fs: Fs = section(Fs, "filesystem reverse RPC")
    terminal: Terminal = section(Terminal, "terminal reverse RPC")
    tools_allowed: Strings = field("allow-list of tools; empty permits all", default=())
    tools_denied: Strings = field("deny-list of tools, applied after the allow-list", default=())
    artifacts: Annotated[tuple[str, ...], Each(checks.artifact)] = field(
        "coding artifact types the agent produces (`diff`, `commit`, …)", default=()
    )
    git_aware: Bool = field("the agent understands git context", default=False)
    language_servers: Strings = field("language servers the agent relies on", default=())
    test_runners: Strings = field("test runners the agent knows how to drive", default=())


@attrs.frozen
class Capabilities:
    streaming_output: Bool = field("the agent streams its text as it is produced")
    queued_input: Bool = field("input sent mid-turn is queued, not lost", default=False)
    mid_turn_cancel: CancelMode = field(
        "how a turn can be cancelled: one of `graceful`, `hard`, `none`", default="hard"
    )
    multi_session: Bool = field("one process serves several sessions", default=False)
    streaming_tool_output: Bool = field("tool output arrives in deltas", default=False)
    input_modalities: Strings = field("kinds of input accepted", default=("text",))
    output_modalities: Strings = field("kinds of output produced", default=("text",))
    ask_user: AskUser = section(AskUser, "the kinds of questions the agent asks")
    coding: Coding | None = optional_section("coding profile capabilities")
    x_turn_timeout_seconds: Annotated[float, Check(checks.positive_number)] | None = field(
        "trio-cap: cancel a turn that runs longer than this many seconds (`cap run "
        "--turn-timeout` wins; unset: no limit)",
        default=None,
        toml="x-turn-timeout-seconds",
    )
    x_idle_timeout_seconds: Annotated[float, Check(checks.positive_number)] | None = field(
        "trio-cap: cancel a turn when the agent sends nothing for this many seconds (`cap run "
        "--idle-timeout` wins; unset: `cap run`'s 600, no limit when embedded)",
        default=None,
        toml="x-idle-timeout-seconds",
    )


@attrs.frozen
class Cost:
    metered: Bool = field("the agent reports usage and cost (`cap.usage`)", default=False)
    currency: Annotated[str, Check(checks.currency)] = field(
        "currency of reported costs", default="USD"
    )


@attrs.frozen
class Manifest:
    agent: Agent = section(Agent, "who the agent is", required=True)
    startup: Startup = section(Startup, "how to start it", required=True)
    pty: Pty = section(Pty, "the universal PTY binding", required=True)
    capabilities: Capabilities = section(Capabilities, "what it can do", required=True)
    revision: Annotated[str, Check(checks.revision)] | None = field(
        "manifest schema revision (YYYY-MM-DD) for backward-compatible additions", default=None
    )
    probe: Probe | None = optional_section("how to read its version")
    fast_path: FastPath = section(FastPath, "structured bindings it offers")
    parse: Parse = section(Parse, "patterns for reading its PTY screen")
    cost: Cost = section(Cost, "whether it reports cost")
    extensions: dict[str, Any] = attrs.field(
        factory=dict, metadata={"internal": True, "toml": None}
    )
    """Unknown ``x-*`` keys (CAP §14.1 experimental fields), by dotted path."""

    @property
    def name(self) -> str:
        return self.agent.name


SECTION_ORDER = (
    "revision", "agent", "probe", "startup", "fast_path", "pty", "parse", "capabilities", "cost",
)
