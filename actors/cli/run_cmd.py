"""``cap run``: one session, one task, progress on the terminal, everything in the log.

Every way this command can end is decided here and said in words:

* every argument and input file is checked before anything is created, so a
  usage error (exit 2) leaves no empty log behind;
* the session's end is read back from the log and explained on stderr: a
  failure with its cause (for a binding that cannot start, one line per
  binding with what to do), a refused or cut-short turn (exit 1), a clean
  completion (exit 0);
* SIGINT, SIGTERM and SIGHUP are handled alike: the session is cancelled at
  the agent (CAP cancel, then its process group is ended), the log gets
  ``session.cancelled`` and is closed, and the exit code is 128 + the signal
  (130 / 143 / 129); a second signal skips the grace.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
from pathlib import Path

import attrs
import msgspec
import trio

from trio_cap.actors.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    RunFailed,
    UsageError,
    brain_script,
    check_log_target,
    read_text_file,
)
from trio_cap.actors.cli.errors import SINK_ERRNOS
from trio_cap.actors.cli.follow import Follower
from trio_cap.actors.ids import run_id
from trio_cap.actors.manifest import BindingNotOffered, Resolved
from trio_cap.actors.nodes import DEFAULT_LEASE, open_node
from trio_cap.actors.orchestrator import (
    Orchestrator,
    Session,
    UnknownAgent,
    open_orchestrator,
    resolve,
)
from trio_cap.actors.recording import RECORD_MODES
from trio_cap.actors.session.actor import CommandRefused, SessionEnded
from trio_cap.actors.session.policy import POLICIES
from trio_cap.actors.session.timers import Timeouts
from trio_cap.events.kinds import CapError, Plan, RunStarted, SessionCancelled, SessionFailed
from trio_cap.events.log import (
    FSYNC_POLICIES,
    FileEventLog,
    LogCorrupted,
    LogFormatError,
    LogLocked,
    LogWriteError,
)
from trio_cap.events.log.opener import describe, is_url

DEFAULT_IDLE_TIMEOUT = 600.0
"""``cap run``'s idle timeout when neither the flag nor the manifest sets one: ten minutes of
silence from the agent mid-turn is a hang, not work (long tools stream output or finish)."""

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_DESCRIPTION = """\
Start a session with an agent, send it the task, print its progress and close
the session when the turn ends.  Every event goes to the log (default
.cap/runs/<run-id>.caplog under the current directory); its path is printed.

permissions (who answers the agent's permission requests):
  ask     a human, on this terminal; the default when stdin is a terminal.
          Needs a terminal and cannot be combined with --headless.
  allow   trio-cap approves low and medium risk, refuses high risk (unless
          --allow-high-risk).  The risk is trio-cap's own rating.
  deny    trio-cap refuses every request (the model is told to rerun with
          --permissions); the default without a terminal or with --headless.
  bypass  the agent runs in its OWN no-prompt mode (e.g. Claude Code's
          bypassPermissions): it sends trio-cap NO permission requests at
          all, so nothing is reviewed and high-risk protection does not
          apply.  Warned on stderr and logged.

timeouts (a hung agent never holds cap run forever):
  --turn-timeout S  a turn may run S seconds in all (default: none).
  --idle-timeout S  the agent may be silent S seconds during a turn (default
                    600; waits on a human do not count).
  On expiry the turn is cancelled (CAP cancel; if the agent does not end the
  turn within 5 s its process is ended), a cap.error turn_timeout /
  idle_timeout is logged and the run exits 1.  0 turns a limit off; the
  manifest can set them ([capabilities] x-turn-timeout-seconds,
  x-idle-timeout-seconds); the flags win.

exit codes:
  0    the task completed
  1    the session failed (no binding could start the agent, it died, the
       turn failed or timed out), the task was refused (budget), the turn
       was cut short (cancelled mid-turn, e.g. by --budget-usd), or the log
       could not be written.  A budget crossed only as the turn ended
       exits 0 and says so
  2    bad usage or an invalid input file (nothing is created)
  70   an internal error in trio-cap (CAP_DEBUG=1 shows the traceback)
  129, 130, 143
       SIGHUP, Ctrl+C (SIGINT), SIGTERM: the session was cancelled, the
       agent's processes ended and the log closed with session.cancelled
"""


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run",
        help="run one task with one agent",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--agent", default="cap-agent", metavar="NAME|PATH|SPEC",
                     help="agent to run: a manifest name (see `cap manifest list`), a manifest "
                     "path, or an ad-hoc spec stream-json:CMD, acp:CMD, a2a:URL (a remote "
                     "A2A agent, either spelling), pty:CMD or replay:LOG#SESSION (a recorded "
                     "agent played back over the binding it was recorded on: stream-json, ACP "
                     "and PTY on stdio, A2A served on a free 127.0.0.1 port for the run). "
                     "Default: cap-agent, trio-cap's own scripted agent")
    run.add_argument("--binding", metavar="B",
                     help="use only this binding: inproc, stream-json, acp, a2a, pty, or one "
                     "a plug-in registers (entry point group trio_cap.bindings). Default: the "
                     "best the agent's manifest declares, falling back down the list")
    task = run.add_mutually_exclusive_group()
    task.add_argument("--task", metavar="TEXT", help="the prompt to send")
    task.add_argument("--task-file", metavar="F", help="read the prompt from a UTF-8 text file")
    run.add_argument("--cwd", metavar="DIR",
                     help="the session's working directory (default: the current directory)")
    run.add_argument("--model", metavar="M", help="model name passed to the agent")
    run.add_argument("--log", metavar="FILE|URL",
                     help="event log file, appended to if it exists (default: "
                     ".cap/runs/<run-id>.caplog), or a shared PostgreSQL log "
                     "postgresql://USER@HOST/DB (created if the database has none; this run "
                     "is then a node: see --node)")
    run.add_argument("--node", metavar="ID",
                     help="with a postgresql:// log: this run's node id, which owns its session "
                     "and heartbeats (default: HOSTNAME-PID)")
    run.add_argument("--lease", type=float, metavar="S", default=DEFAULT_LEASE,
                     help="with a postgresql:// log: seconds a heartbeat holds the session "
                     f"(default {DEFAULT_LEASE:g}); after that another node may take it over "
                     "(cap node --take-over)")
    run.add_argument("--fsync", choices=FSYNC_POLICIES, default="batch",
                     help="log durability: always | batch (default) | never")
    run.add_argument("--script", metavar="F",
                     help="script file (TOML) for cap-agent's scripted brain")
    run.add_argument("--permissions", choices=POLICIES,
                     help="who answers permission requests: ask | allow | deny | bypass "
                     "(see above; default: ask with a terminal, else deny)")
    run.add_argument("--allow-high-risk", action="store_true",
                     help="let allow approve high-risk requests too (bypass never sees any)")
    run.add_argument("--budget-usd", type=float, metavar="X",
                     help="cancel the turn once the session has spent more than X dollars and "
                     "refuse further turns (exit 1)")
    run.add_argument("--headless", action="store_true",
                     help="nobody is at the terminal: never prompt; the agent's questions get "
                     "no answer and permissions default to deny (ask is refused)")
    run.add_argument("--token-file", metavar="F",
                     help="a2a binding: the bearer token for the remote agent, one line in F "
                     "(wins over the manifest's fast_path.x-a2a-token-file and the "
                     "CAP_A2A_TOKEN environment variable; never logged)")
    run.add_argument("--turn-timeout", type=float, metavar="S",
                     help="cancel a turn that runs longer than S seconds (default: none)")
    run.add_argument("--idle-timeout", type=float, metavar="S",
                     help="cancel a turn when the agent is silent for S seconds (default: 600)")
    run.add_argument("--next", action="append", default=[], metavar="TEXT",
                     help="a further prompt, sent as its own turn once the previous one ended "
                     "well (repeatable: the turns run in order)")
    run.add_argument("--record", choices=RECORD_MODES, default="frames",
                     help="log the agent connection's wire traffic as frame.in/frame.out "
                     "events for `cap replay --check`: off | frames (default: every wire "
                     "frame) | raw (also raw terminal bytes)")
    run.add_argument("--resume", metavar="LOG",
                     help="pick up the run LOG holds after its cap run died (killed, power "
                     "loss): rebuild its state, resume or restart the agent, and run the "
                     "turns it had not finished; the other options come from the log")
    run.add_argument("--json", action="store_true",
                     help="print the session's events as JSON lines instead of progress")
    run.set_defaults(func=run_command)


@attrs.frozen
class Plan_:
    """Everything ``cap run`` decided from its arguments, before any file exists."""

    agent: Resolved
    task: str
    cwd: str
    script: object
    policy: str
    policy_defaulted: bool
    interactive: bool
    log_path: str
    turn_timeout: float | None
    idle_timeout: float | None


@attrs.define
class Outcome:
    session: Session | None = None
    turn: int | None = None
    stop_reason: str | None = None
    refused: CapError | None = None
    status: str | None = None
    terminal: object = None
    errors: list[CapError] = attrs.field(factory=list)
    plan: Plan | None = None
    signal: int | None = None


def _timeout(flag: str, value: float | None) -> float | None:
    if value is not None and not (value >= 0 and math.isfinite(value)):
        raise UsageError(f"{flag} {value}: give seconds as a number >= 0 (0 turns it off)")
    return value


def _check_token_file(path: str) -> None:
    """Readable, and one token on one line; its content is never shown."""
    from trio_cap.actors.bindings.a2a.connector import read_token_file
    from trio_cap.actors.connection import ConnectError

    try:
        read_token_file(path)
    except ConnectError as exc:
        raise UsageError(f"--token-file: {exc}") from None


def check_arguments(args: argparse.Namespace) -> Plan_:
    """Every usage error ``cap run`` can find without starting anything."""
    if args.task is None and args.task_file is None:
        raise UsageError("give the prompt: --task TEXT or --task-file F (or --resume LOG)")
    on_terminal = sys.stdin.isatty()
    interactive = on_terminal and not args.headless
    if args.permissions == "ask" and args.headless:
        raise UsageError("--permissions ask means a human answers on this terminal, but "
                         "--headless means nobody is asked; drop --headless, or use "
                         "--permissions allow, deny or bypass")
    if args.permissions == "ask" and not on_terminal:
        raise UsageError("--permissions ask needs a terminal on stdin to ask a human (stdin is "
                         "not a terminal); use --permissions allow, deny or bypass")
    policy = args.permissions or ("ask" if interactive else "deny")
    if args.budget_usd is not None and not (args.budget_usd >= 0
                                            and math.isfinite(args.budget_usd)):
        raise UsageError(f"--budget-usd {args.budget_usd}: give dollars as a number >= 0")
    turn_timeout = _timeout("--turn-timeout", args.turn_timeout)
    if args.token_file is not None:
        _check_token_file(args.token_file)
    idle_timeout = _timeout("--idle-timeout", args.idle_timeout)
    task = read_text_file("--task-file", args.task_file) if args.task_file else args.task
    if not task.strip():
        raise UsageError("the task is empty" + (f" (--task-file {args.task_file})"
                                                if args.task_file else ""))
    cwd = os.path.abspath(args.cwd or ".")
    if not os.path.isdir(cwd):
        raise UsageError(f"--cwd {cwd}: not a directory")
    script = brain_script(args.script)
    agent = trio.run(resolve_checked, args.agent, args.binding)
    log_path = args.log or os.path.join(".cap", "runs", f"{run_id()}.caplog")
    check_log_target(log_path)
    return Plan_(agent=agent, task=task, cwd=cwd, script=script, policy=policy,
                 policy_defaulted=args.permissions is None, interactive=interactive,
                 log_path=log_path, turn_timeout=turn_timeout, idle_timeout=idle_timeout)


async def resolve_checked(agent: str, binding: str | None) -> Resolved:
    """The agent's manifest and that it offers ``binding``: refused before any file exists."""
    try:
        resolved = await resolve(agent)
        resolved.plan(force=binding)
    except UnknownAgent as exc:
        raise UsageError(str(exc)) from None
    except BindingNotOffered as exc:
        from trio_cap.actors.bindings.registry import ConnectorRegistry, plugin_plan

        if binding not in ConnectorRegistry() or plugin_plan(resolved.manifest, binding) is None:
            raise UsageError(f"--binding {binding}: {exc}") from None
    return resolved


def open_log(path: str, fsync: str) -> FileEventLog:
    """The run's file log; a file that is not a usable log is a usage error naming it."""
    if is_url(path):
        return open_shared_log(path)  # type: ignore[return-value]
    check_log_target(path)
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--log {path}: cannot create its directory: "
                         f"{exc.strerror or exc}") from None
    try:
        return FileEventLog(path, fsync=fsync)  # type: ignore[arg-type]
    except (LogFormatError, LogCorrupted, LogLocked, IsADirectoryError) as exc:
        raise UsageError(f"--log {path}: {exc}") from None
    except (LogWriteError, OSError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise RunFailed(f"--log {path}: cannot write the log: {why}") from None


def open_shared_log(url: str):
    """A PostgreSQL log for ``--log URL``: unreachable is exit 1, an unusable schema exit 2."""
    from trio_cap.events.log.postgres import PostgresEventLog, SchemaError, Unavailable

    try:
        return PostgresEventLog(url, notices=lambda text: print(f"cap: {text}", file=sys.stderr))
    except Unavailable as exc:
        raise RunFailed(f"--log {exc}") from None
    except SchemaError as exc:
        raise UsageError(f"--log {exc}") from None
    except Exception as exc:  # psycopg refuses a malformed URL with ProgrammingError
        raise UsageError(f"--log {describe(url)}: not a usable PostgreSQL URL: "
                         f"{str(exc).splitlines()[0] if str(exc) else exc}") from None


def run_command(args: argparse.Namespace) -> int:
    if args.resume is not None:
        from trio_cap.actors.cli.resume_cmd import resume_command

        return resume_command(args)
    plan = check_arguments(args)
    if not (args.lease > 0 and math.isfinite(args.lease)):
        raise UsageError(f"--lease {args.lease}: give seconds as a number > 0")
    log = open_log(plan.log_path, args.fsync)
    shown = describe(plan.log_path)
    if getattr(log, "recovered", None):
        print(f"cap: {plan.log_path}: cut a torn tail of {log.recovered.dropped_bytes} bytes "
              f"({log.recovered.detail})", file=sys.stderr)
    print(f"cap: logging to {shown}", file=sys.stderr)
    if plan.policy == "bypass":
        print("cap: WARNING: --permissions bypass: the agent runs in its own no-prompt mode and "
              "sends trio-cap no permission requests, so nothing it does is reviewed and "
              "high-risk protection does not apply", file=sys.stderr)
    try:
        outcome = trio.run(_run, args, log, plan)
    except BaseException as exc:
        failure = _write_failure(exc)
        if failure is None:
            raise
        print(f"cap: --log {shown}: cannot write the log: {failure}; the run stopped "
              "(the log keeps every event written before this)", file=sys.stderr)
        return EXIT_FAILED
    finally:
        print(f"cap: log written to {shown} (see: cap log show {shown})",
              file=sys.stderr)
    return explain(outcome)


def _write_failure(exc: BaseException) -> str | None:
    """Why the log could not be written, if that is what ``exc`` (a group, perhaps) says."""
    from trio_cap.actors.cli.common import leaves

    for e in leaves(exc):
        if isinstance(e, LogWriteError):
            return str(e)
        if isinstance(e, OSError) and e.errno in SINK_ERRNOS:
            return e.strerror or str(e)
    return None


async def _run(args: argparse.Namespace, log: FileEventLog, plan: Plan_) -> Outcome:
    out = Outcome()
    with trio.open_signal_receiver(*SIGNALS) as signals:
        async with log, _as_node(args, log) as node, played_back(plan.agent) as agent, \
                open_orchestrator(log) as orch, trio.open_nursery() as nursery:
            plan = attrs.evolve(plan, agent=agent)
            orch.node = node
            orch.default_timeouts = Timeouts(idle=DEFAULT_IDLE_TIMEOUT)
            if args.token_file is not None:
                from trio_cap.actors.bindings.a2a.connector import A2aConnector

                orch.connectors["a2a"] = A2aConnector(token_file=args.token_file)
            orch.record = args.record
            work = trio.CancelScope()
            nursery.start_soon(_watch_signals, signals, out, orch, work, nursery.cancel_scope)
            with work:
                await _session(orch, nursery, args, plan, out)
            if out.signal is not None and out.session is not None:
                # the projection folds the log a step behind its writers: judge whether the
                # agent has anything to cancel by all that is logged, not a lagging view
                with trio.move_on_after(orch.system.grace):
                    await orch.caught_up()
            view = out.session.view if out.session is not None else None
            if out.signal is not None and view is not None and view.status not in (
                "created", "starting",  # still connecting: nothing at the agent to cancel yet
            ):
                # graceful first: the agent hears CAP cancel, then its group is ended
                name = signal.Signals(out.signal).name
                with trio.move_on_after(orch.system.grace):
                    try:
                        await out.session.cancel("session", reason=f"cap run received {name}")
                        await out.session.wait_terminal()
                    except (SessionEnded, CommandRefused):
                        pass
            if out.session is not None:
                _read_back(orch, out)
            nursery.cancel_scope.cancel()
    return out


def played_back(agent: Resolved):  # type: ignore[no-untyped-def]
    """A recorded A2A agent (``replay:LOG#SESSION``) served on a port for the run; any other
    agent as it is."""
    from trio_cap.actors.manifest.adhoc import A2A_PLAYBACK

    if A2A_PLAYBACK not in agent.manifest.extensions:
        return contextlib.nullcontext(agent)
    from trio_cap.actors.cli.serve_replay_a2a import playback_agent

    return playback_agent(agent)


def _as_node(args: argparse.Namespace, log):
    """A shared (PostgreSQL) log makes this run a node: it owns its session and heartbeats."""
    if not is_url(args.log or "") and args.node is None:
        return contextlib.nullcontext()
    return open_node(log, args.node, lease=args.lease)


async def _watch_signals(signals, out: Outcome, orch: Orchestrator, work: trio.CancelScope,
                         everything: trio.CancelScope) -> None:
    async for signum in signals:
        if out.signal is None:
            out.signal = signum
            orch.shutdown_reason = f"cap run received {signal.Signals(signum).name}"
            work.cancel()
        else:
            everything.cancel()  # a second signal: no more grace


async def _session(orch: Orchestrator, nursery: trio.Nursery, args: argparse.Namespace,
                   plan: Plan_, out: Outcome) -> None:
    sid = orch.ids.new("sess")  # named in run.started: the run is found by its session
    await log_run_started(orch, args, plan, sid)
    try:
        session = await orch.start_session(
            plan.agent, args.binding, cwd=plan.cwd, model=args.model, script=plan.script,
            permissions=plan.policy, allow_high_risk=args.allow_high_risk,
            human=plan.interactive, budget_usd=args.budget_usd,
            turn_timeout=plan.turn_timeout, idle_timeout=plan.idle_timeout,
            permissions_chosen=not plan.policy_defaulted, session_id=sid,
        )
    except UnknownAgent as exc:
        raise UsageError(str(exc)) from None
    out.session = session
    follower = Follower(orch, session, plan.interactive, args.json)
    done = trio.Event()

    async def follow() -> None:
        await follower.run()
        done.set()

    nursery.start_soon(follow)
    try:
        await run_turns(session, [plan.task, *args.next], out)
    except LogWriteError as exc:
        from trio_cap.events.log.errors import EventRejected

        if isinstance(exc, EventRejected):
            flag = f"--task-file {args.task_file}" if args.task_file else "--task"
            orch.shutdown_reason = f"the task was refused: {flag} is too large to log"
            raise UsageError(f"{flag}: the task cannot be logged: {exc}") from None
        raise
    with trio.move_on_after(2):  # let the progress printer reach the terminal event
        await done.wait()


async def run_turns(session: Session, texts: list[str], out: Outcome, *,
                    gate_first: bool = False) -> None:
    """Each prompt as its own turn, the next only after one that ended well; then close.

    ``gate_first``: the turn before the first (``--resume``'s re-run) must have ended well too.
    """
    try:
        for i, text in enumerate(texts):
            if (i or gate_first) and out.stop_reason not in (None, "end_turn"):
                break  # None: no turn has ended yet (a session that ended says so itself)
            result = await session.run_turn(text)
            out.turn, out.stop_reason = result.turn, result.stop_reason
        await session.close()
    except SessionEnded:
        pass
    except CommandRefused as exc:
        out.refused = exc.error
        try:
            await session.close()
        except SessionEnded:
            pass


async def log_run_started(orch: Orchestrator, args: argparse.Namespace, plan: Plan_,
                          session_id: str) -> None:
    """The run's plan, for ``--resume``; prompts too large to log are left out (the session
    then refuses the task itself, and says so)."""
    from trio_cap.events.log.errors import EventRejected

    started = run_started(args, plan, session_id)
    try:
        await orch.log.append([started])
    except EventRejected:
        await orch.log.append([msgspec.structs.replace(started, tasks=())])


def run_started(args: argparse.Namespace, plan: Plan_, session_id: str | None = None
                ) -> RunStarted:
    return RunStarted(
        agent=args.agent, tasks=(plan.task, *args.next), cwd=plan.cwd, binding=args.binding,
        model=args.model, script=os.path.abspath(args.script) if args.script else None,
        permissions=plan.policy, allow_high_risk=args.allow_high_risk,
        budget_usd=args.budget_usd, record=args.record, turn_timeout=plan.turn_timeout,
        idle_timeout=plan.idle_timeout, session_id=session_id)


def _read_back(orch: Orchestrator, out: Outcome) -> None:
    """How the session ended, from the log: the one account of what happened."""
    assert out.session is not None
    view = out.session.view
    out.status = view.status if view is not None else None
    for env in orch.log.read(1, out.session.id):
        ev = env.event
        if isinstance(ev, SessionFailed | SessionCancelled):
            out.terminal = ev
        elif isinstance(ev, CapError):
            out.errors.append(ev)
            if ev.code == "cap_budget_exceeded" and (ev.details or {}).get("input_seq"):
                out.refused = out.refused or ev
        elif isinstance(ev, Plan):
            out.plan = ev


def explain(out: Outcome) -> int:
    """One account of the run on stderr, and the exit code that goes with it."""
    def say(text: str) -> None:
        print(f"cap: {text}", file=sys.stderr)

    if out.plan is not None and out.plan.entries:
        steps = "; ".join(f"{e.content} ({e.status})" for e in out.plan.entries)
        say(f"plan at the end: {steps}")
    if out.signal is not None:
        name = signal.Signals(out.signal).name
        say(f"{'interrupted' if out.signal == signal.SIGINT else name}: the session was "
            "cancelled, the agent stopped and the log closed")
        return 128 + out.signal
    terminal = out.terminal
    if isinstance(terminal, SessionFailed):
        if terminal.code == "cap_binding_unavailable":
            agent = out.session.view.agent if out.session and out.session.view else "the agent"
            say(f"could not start {agent}: no binding worked")
            for line in terminal.message.splitlines()[1:] or [terminal.message]:
                say(f"  {line.strip()}")
        else:
            say(f"the session failed: {terminal.code}: {terminal.message}")
        return EXIT_FAILED
    if isinstance(terminal, SessionCancelled):
        say(f"the session was cancelled: {terminal.reason}")
        return EXIT_FAILED
    if out.refused is not None:
        say(f"the task was refused: {out.refused.message}")
        return EXIT_FAILED
    if out.status != "completed":
        say(f"the session ended {out.status or 'before it started'}")
        return EXIT_FAILED
    budget = next((e for e in out.errors if e.code == "cap_budget_exceeded"), None)
    if out.stop_reason in ("cancelled", "error"):
        why = budget.message if budget is not None else (
            out.errors[-1].message if out.errors else "")
        say(f"turn {out.turn} was cut short ({out.stop_reason})" + (f": {why}" if why else ""))
        return EXIT_FAILED
    if budget is not None:
        spent = budget.message.split(":", 1)[0]
        say(f"budget exceeded: {spent}; turn {out.turn} had already finished when it was "
            "crossed, so nothing was cut short, but no further turn would start")
    return EXIT_OK
