"""``cap agent``: trio-cap as an agent — its manifest, and stream-json on stdio.

The same scripted brain as ``cap run --binding inproc``; ``--cap-speak``
picks the wire.  ``cap-agent`` (:mod:`trio_cap.actors.cli.cap_agent`) is this command
with Claude Code's own command line, for SDKs that exec a ``claude`` binary.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

import attrs
import trio

from trio_cap.actors.bindings.stream_json.agent_argv import (
    PERMISSION_MODES,
    AgentOptions,
    OptionsError,
    checked_rules,
)
from trio_cap.actors.cli.common import UsageError, brain_script, check_log_target
from trio_cap.actors.manifest import load_manifest
from trio_cap.actors.manifest.convert import manifest_data
from trio_cap.actors.manifest.dump import dumps
from trio_cap.actors.manifest.model import Fs, Manifest, Terminal
from trio_cap.actors.manifest.resolve import bundled_dir
from trio_cap.events.log import (
    FSYNC_POLICIES,
    FileEventLog,
    LogCorrupted,
    LogFormatError,
    LogLocked,
)
from trio_cap.events.log.memory import MemoryEventLog
from trio_cap.events.log.urls import is_url, redact

SPEAKS = ("stream-json", "pty", "acp")
"""The wires ``cap agent`` speaks on stdio; A2A, an HTTP protocol, is ``cap serve a2a``."""

_MANIFEST_HEADER = """\
# trio-cap's own agent, as this build of `cap agent` speaks it (`cap agent --cap-manifest`).
# Bindings that work: inproc (x-inproc, in the orchestrator's process), stream-json, and
# pty: [startup].command draws a TUI on its terminal that [pty] and [parse] describe;
# and acp_stdio (Agent Client Protocol v1, as editors such as Zed drive agents).
"""


def own_manifest() -> Manifest:
    """The bundled cap-agent manifest, narrowed to what this build really does."""
    m = load_manifest(bundled_dir() / "cap-agent.toml")
    fast_path = attrs.evolve(m.fast_path, a2a_serve_at=False, grpc=False,
                             acp_stdio=("cap", "agent", "--cap-speak", "acp"),
                             stream_json=("cap", "agent", "--cap-speak", "stream-json"))
    coding = m.capabilities.coding
    if coding is not None:
        # files and commands run in the agent's own process: no cap.fs / cap.terminal RPC
        coding = attrs.evolve(coding, fs=Fs(), terminal=Terminal(),
                              artifacts=("diff", "transcript"))
    capabilities = attrs.evolve(m.capabilities, coding=coding)
    return attrs.evolve(m, fast_path=fast_path, capabilities=capabilities)


def manifest_text() -> str:
    return _MANIFEST_HEADER + dumps(manifest_data(own_manifest()))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "agent",
        help="be an agent: speak stream-json, pty or ACP with trio-cap's scripted brain",
        description="Run trio-cap's own agent (the scripted brain, with --bridge an "
        "agent trio-cap drives, or with --fleet a whole fleet) on this process's stdio, "
        "speaking Claude Code's stream-json (the Claude Agent SDKs, CAP drivers), a TUI "
        "(PTY drivers) or the Agent Client Protocol (Zed and other ACP clients: --cap-speak "
        "acp), or print its manifest.  Exit code: 0 when stdin ends after the last turn, "
        "2 bad usage (a fleet file with problems included; a fleet that fails ends its "
        "turn with an error result, not the process).",
    )
    p.add_argument("--cap-manifest", action="store_true",
                   help="print this agent's manifest (TOML) and exit")
    p.add_argument("--cap-speak", choices=SPEAKS,
                   help="the wire to speak on stdio: stream-json, pty (a TUI on the "
                   "terminal, for PTY drivers) or acp (Agent Client Protocol v1, for Zed "
                   "and other ACP clients)")
    p.add_argument("--script", metavar="F", help="script file (TOML) for the scripted brain")
    p.add_argument("--bridge", metavar="AGENT",
                   help="instead of the scripted brain, drive AGENT (manifest name, path or "
                   "ad-hoc spec such as stream-json:CMD) and speak for it")
    p.add_argument("--binding", metavar="B",
                   help="with --bridge: the binding to drive AGENT over (default: its best)")
    p.add_argument("--fleet", metavar="FLEET",
                   help="instead of the scripted brain, be a whole fleet (a fleet.toml or "
                   ".yaml): each prompt is the fleet's task, its plan and members' output "
                   "stream as this agent's, members' questions are asked of the client "
                   "(stream-json or acp; see docs/fleets.md \"Fleet as an agent\")")
    p.add_argument("--log", metavar="FILE",
                   help="record the agent's events in this file log (default: in memory)")
    p.add_argument("--fsync", choices=FSYNC_POLICIES, default="batch",
                   help="log durability: always | batch (default) | never")
    claude = p.add_argument_group(
        "Claude Code's flags",
        "the same as cap-agent's, so a stream-json driver can append its usual command line")
    claude.add_argument("--output-format", choices=["stream-json"], default="stream-json",
                        help="what stdout carries (only stream-json)")
    claude.add_argument("--input-format", choices=["stream-json", "text"],
                        default="stream-json",
                        help="stdin carries frames (default) or one prompt (text)")
    claude.add_argument("--verbose", "-p", "--print", action="store_true",
                        help="accepted for Claude Code compatibility; changes nothing")
    claude.add_argument("--model", metavar="M", help="model name the agent reports")
    claude.add_argument("--system-prompt", metavar="S", help="the session's system prompt")
    claude.add_argument("--append-system-prompt", metavar="S",
                        help="text appended to the system prompt")
    claude.add_argument("--max-turns", type=int, metavar="N",
                        help="model round trips per turn (one per tool result)")
    claude.add_argument("--max-budget-usd", type=float, metavar="X", dest="budget_usd",
                        help="refuse a turn that would start with X dollars or more spent")
    claude.add_argument("--permission-mode", choices=PERMISSION_MODES, default="default",
                        help="Claude Code's permission mode (default: default)")
    claude.add_argument("--dangerously-skip-permissions", action="store_true",
                        help="the same as --permission-mode bypassPermissions")
    claude.add_argument("--permission-prompt-tool", metavar="stdio",
                        help="stdio: ask the client with can_use_tool requests; without it, "
                        "calls that need permission are denied")
    claude.add_argument("--allowedTools", "--allowed-tools", metavar="RULES", action="append",
                        default=[], dest="allowed",
                        help="tools allowed without asking: Tool, Tool(prefix:*), Tool(glob)")
    claude.add_argument("--disallowedTools", "--disallowed-tools", metavar="RULES",
                        action="append", default=[], dest="disallowed",
                        help="tools always denied (same rule forms)")
    claude.add_argument("--include-partial-messages", action="store_true",
                        help="stream_event frames with text, thinking and tool-input deltas")
    claude.add_argument("--session-id", metavar="ID",
                        help="the session id (default: a new uuid)")
    claude.add_argument("--resume", metavar="ID",
                        help="recorded as the config's session_resume_id (no sessions are "
                        "kept between runs)")
    own = p.add_argument_group("trio-cap's flags")
    own.add_argument("--tui-drop-enters", type=int, default=0, metavar="N",
                     help="--cap-speak pty: ignore the first N Enters that would send a prompt "
                     "(the text stays typed), to test a driver's submit verification")
    own.add_argument("--transcript-diff-every", type=int, default=1000, metavar="N",
                     help="send a transcript diff every N logged events (0: only at turn end)")
    own.add_argument("--transcript-diff-interval", type=float, default=2.0, metavar="S",
                     help="send pending transcript events every S seconds (0: never by time)")
    own.add_argument("--no-workspace-diff", action="store_true",
                     help="no diff artifact of the files each turn changed")
    own.add_argument("--allow-high-risk", action="store_true",
                     help="acp: a mode or rule may allow high-risk calls without asking the "
                     "client (default: high risk always asks)")
    own.add_argument("--transcript-file", metavar="F",
                     help="write the session's whole transcript (JSON) to F when the agent "
                     "exits; stdout gets nothing after the last result")
    p.set_defaults(func=agent_command)


def agent_command(args: argparse.Namespace) -> int:
    if args.cap_manifest:
        sys.stdout.write(manifest_text())
        return 0
    if not args.cap_speak:
        raise UsageError("cap agent: give --cap-speak stream-json, pty or acp "
                         "(or --cap-manifest)")
    if args.fleet and (args.bridge or args.script):
        raise UsageError("--fleet runs the agents its file names: drop "
                         f"{'--bridge' if args.bridge else '--script'}")
    for flag, value in (("--max-turns", args.max_turns), ("--max-budget-usd", args.budget_usd),
                        ("--transcript-diff-every", args.transcript_diff_every),
                        ("--transcript-diff-interval", args.transcript_diff_interval)):
        if value is not None and not value >= 0:  # nan is not >= 0 either
            raise UsageError(f"{flag} {value}: give a number >= 0")
    if args.cap_speak == "pty":
        return run_tui(args)
    if args.cap_speak == "acp":
        return run_acp_agent(args)
    options = AgentOptions(
        model=args.model, system_prompt=args.system_prompt,
        append_system_prompt=args.append_system_prompt, max_turns=args.max_turns,
        budget_usd=args.budget_usd,
        permission_mode=("bypassPermissions" if args.dangerously_skip_permissions
                         else args.permission_mode),
        permission_prompt_tool=args.permission_prompt_tool,
        allowed_tools=_rules("--allowedTools", args.allowed),
        disallowed_tools=_rules("--disallowedTools", args.disallowed),
        partial_messages=args.include_partial_messages, session_id=args.session_id,
        resume=args.resume, input_format=args.input_format, output_format=args.output_format,
        script=args.script, bridge=args.bridge, bridge_binding=args.binding,
        fleet=args.fleet, log=args.log, fsync=args.fsync,
        diff_every=args.transcript_diff_every, diff_interval=args.transcript_diff_interval,
        workspace_diff=not args.no_workspace_diff, transcript_file=args.transcript_file,
    )
    return run_agent(options)


def run_tui(args: argparse.Namespace) -> int:
    """``--cap-speak pty``: the scripted brain as a TUI on this process's terminal."""
    import os

    from trio_cap.actors.bindings.pty.tui_shell import NotATerminal, TuiOptions, serve_tui

    if args.bridge or args.fleet:
        raise UsageError(f"{'--bridge' if args.bridge else '--fleet'} speaks stream-json or "
                         "acp; drop --cap-speak pty")
    if args.tui_drop_enters < 0:
        raise UsageError("--tui-drop-enters: expected 0 or more")
    bypass = args.dangerously_skip_permissions or args.permission_mode == "bypassPermissions"
    options = TuiOptions(cwd=os.getcwd(), model=args.model, system_prompt=args.system_prompt,
                         max_turns=args.max_turns,
                         permission_mode="none" if bypass else "interactive",
                         drop_enters=args.tui_drop_enters)
    script = brain_script(args.script)
    log = _open_log(args.log, args.fsync)
    try:
        return trio.run(functools.partial(serve_tui, options, log, script=script))
    except NotATerminal as exc:
        raise UsageError(f"--cap-speak pty: {exc}") from None


def run_agent(options: AgentOptions) -> int:
    """Serve one stream-json session on stdio with ``options``; the process exit code."""
    from trio_cap.actors.bindings.stream_json.agent_shell import resolve_options, serve

    try:
        options = resolve_options(options)
    except OptionsError as exc:
        raise UsageError(str(exc)) from None

    if options.output_format != "stream-json":
        raise UsageError(f"--output-format {options.output_format}: cap-agent prints only "
                         "stream-json")
    if options.input_format not in ("stream-json", "text"):
        raise UsageError(f"--input-format {options.input_format}: expected stream-json or text")
    if options.bridge_binding and not options.bridge:
        raise UsageError("--binding is only meaningful with --bridge AGENT")
    if options.fleet and (options.bridge or options.script):
        raise UsageError("--fleet runs the agents its file names: drop "
                         f"{'--bridge' if options.bridge else '--script'}")
    fleet = _fleet(options.fleet) if options.fleet else None
    if options.fsync not in FSYNC_POLICIES:
        raise UsageError(f"--fsync {options.fsync}: expected one of {', '.join(FSYNC_POLICIES)}")
    script = brain_script(options.script)
    for warning in options.warnings:
        print(f"cap-agent: {warning}", file=sys.stderr)
    log = _open_log(options.log, options.fsync)
    make_core = None
    if options.bridge:  # the bridge runs an orchestrator; a plain agent start needs none
        from trio_cap.actors.bridge import bridge_core

        _check_bridge(options.bridge, options.bridge_binding)

        make_core = bridge_core(options, script)
    elif fleet is not None:
        from trio_cap.actors.fleet_face import fleet_core

        make_core = fleet_core(fleet, log=_fleet_log(fleet, options.log))
    return trio.run(functools.partial(serve, options, log, script=script, make_core=make_core))


def run_acp_agent(args: argparse.Namespace) -> int:
    """Serve ACP on stdio: one core per ``session/new``; with ``--bridge`` each session's
    bridge drives its own session of AGENT, logged beside ``--log`` (one file per session)."""
    from trio_cap.actors import __version__
    from trio_cap.actors.bindings.acp.agent_shell import serve
    from trio_cap.actors.bindings.acp.agent_side import MODES, AgentSettings

    mode = "bypassPermissions" if args.dangerously_skip_permissions else args.permission_mode
    if mode not in MODES:
        raise UsageError(f"--permission-mode {mode}: with --cap-speak acp, one of "
                         f"{', '.join(MODES)}")
    if args.binding and not args.bridge:
        raise UsageError("--binding is only meaningful with --bridge AGENT")
    if args.input_format != "stream-json" or args.include_partial_messages:
        raise UsageError("--input-format and --include-partial-messages are stream-json "
                         "flags; an ACP client sends prompts as session/prompt")
    for flag, value in (("--session-id", args.session_id), ("--resume", args.resume),
                        ("--transcript-file", args.transcript_file)):
        if value:
            raise UsageError(f"{flag} is a stream-json flag; with --cap-speak acp the client "
                             "names sessions (session/new, session/load of a --log FILE)")
    prompt = args.system_prompt
    if args.append_system_prompt:
        prompt = f"{prompt}\n{args.append_system_prompt}" if prompt else args.append_system_prompt
    settings = AgentSettings(
        mode=mode, allowed=_rules("--allowedTools", args.allowed),
        disallowed=_rules("--disallowedTools", args.disallowed),
        allow_high_risk=args.allow_high_risk, model=args.model,
        system_prompt=prompt, max_turns=args.max_turns,
        budget_usd=args.budget_usd, agent_version=__version__, bridged=args.bridge)
    script = brain_script(args.script)
    fleet = _fleet(args.fleet) if args.fleet else None
    log = _open_log(args.log, args.fsync)
    make_core = None
    if fleet is not None:
        from trio_cap.actors.fleet_face import FleetCore

        def make_core(emit, session_id):  # type: ignore[no-untyped-def]
            # one fleet log per ACP session: each session runs the fleet on its own
            return FleetCore(fleet, emit, session_id=session_id,
                             log=_fleet_log(fleet, args.log, session_id))
    elif args.bridge:  # the bridge runs an orchestrator; a plain agent start needs none
        from trio_cap.actors.bridge import BridgeCore, bridge_log_path

        _check_bridge(args.bridge, args.binding)

        base = bridge_log_path(args.log)

        def make_core(emit, session_id):  # type: ignore[no-untyped-def]
            path = None
            if base is not None:
                root, ext = os.path.splitext(base)
                path = f"{root}.{session_id}{ext}"
            return BridgeCore(args.bridge, emit, binding=args.binding, session_id=session_id,
                              log=path, script=script)

    return trio.run(functools.partial(serve, settings, log, script=script, make_core=make_core))


def _rules(flag: str, values: list[str]) -> tuple[str, ...]:
    """Every ``--allowedTools``/``--disallowedTools`` value's rules; a malformed one is a
    usage error (a deny rule that does not parse would deny nothing)."""
    try:
        return tuple(r for v in values for r in checked_rules(flag, v))
    except OptionsError as exc:
        raise UsageError(str(exc)) from None


def _check_bridge(agent: str, binding: str | None) -> None:
    """``--bridge AGENT [--binding B]`` resolved at start, as ``cap run --agent`` is: an
    unknown agent or a binding it does not offer is a usage error now, not at the first
    turn a client sends."""
    from trio_cap.actors.cli.run_cmd import resolve_checked

    trio.run(resolve_checked, agent, binding)


def _fleet(path: str):  # type: ignore[no-untyped-def]
    """``--fleet FLEET`` loaded and checked (agents resolved): every problem is exit 2."""
    from trio_cap.actors.cli.fleet_cmd import load_checked

    return load_checked(path)


def _fleet_log(fleet, agent_log: str | None,  # type: ignore[no-untyped-def]
               session_id: str | None = None) -> str:
    """Where the fleet's runs are logged: beside ``--log`` (``run.caplog`` →
    ``run.fleet.caplog``), else where ``cap fleet run`` logs, so that ``cap fleet clean``
    finds the worktrees the face's runs made; said on stderr (stdout is the protocol)."""
    from trio_cap.actors.cli.fleet_cmd import default_log
    from trio_cap.actors.fleet_face import fleet_log_path
    from trio_cap.actors.ids import run_id

    path = fleet_log_path(agent_log) or default_log(fleet, run_id())
    if session_id is not None:
        root, ext = os.path.splitext(path)
        path = f"{root}.{session_id}{ext}"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    print(f"cap agent: fleet {fleet.name} logs to {path}", file=sys.stderr, flush=True)
    return path


def _open_log(path: str | None, fsync: str) -> MemoryEventLog | FileEventLog:
    """The agent's own transcript log: a file (the bridge's and the fleet face's logs are
    named beside it), or memory when none is given."""
    if not path:
        return MemoryEventLog()
    check_log_target(path)
    if is_url(path):
        raise UsageError(f"--log {redact(path)}: cap agent writes its transcript to a file; "
                         "give a file path (cap run --log takes a postgresql:// URL)")
    try:
        return FileEventLog(path, fsync=fsync)  # type: ignore[arg-type]
    except OSError as exc:
        raise UsageError(f"--log {path}: {exc.strerror or exc}") from None
    except (LogFormatError, LogCorrupted, LogLocked) as exc:
        raise UsageError(f"--log {path}: {exc}") from None
