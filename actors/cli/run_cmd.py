"""``cap run``: one session, one task, progress on the terminal, everything in the log."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import msgspec
import trio

from trio_cap.actors.cli.common import EXIT_FAILED, EXIT_OK, UsageError, brain_script
from trio_cap.actors.cli.render import describe
from trio_cap.actors.ids import run_id
from trio_cap.actors.orchestrator import Orchestrator, Session, UnknownAgent, open_orchestrator
from trio_cap.actors.session.policy import POLICIES
from trio_cap.events.envelope import Envelope, to_json_obj
from trio_cap.events.kinds import (
    AskUserAnswer,
    CapSessionReady,
    PermissionResponse,
    SessionCancelled,
    SessionCompleted,
    SessionConfig,
    SessionFailed,
    SessionIdle,
    SessionInputRequired,
    TextChunk,
    UserInputInject,
)
from trio_cap.events.log import (
    FSYNC_POLICIES,
    FileEventLog,
    LogCorrupted,
    LogFormatError,
    LogLocked,
)

_QUIET = (SessionConfig, UserInputInject, PermissionResponse, AskUserAnswer, CapSessionReady,
          SessionIdle)
_TERMINAL = (SessionCompleted, SessionCancelled, SessionFailed)


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run",
        help="run one task with one agent",
        description="Start a session with an agent, send it the task, print its progress and "
        "close the session when the turn ends.  Every event goes to the log (default "
        ".cap/runs/<run-id>.caplog under the current directory); its path is printed.  "
        "Exit code: 0 completed, 1 failed/refused/cancelled, 2 bad usage, 130 interrupted.",
    )
    run.add_argument("--agent", default="cap-agent", metavar="NAME|PATH|SPEC",
                     help="agent to run: a manifest name (see `cap manifest list`), a manifest "
                     "path, or an ad-hoc spec pty:CMD, stream-json:CMD, acp:CMD, a2a:URL "
                     "(default: cap-agent, trio-cap's own scripted agent)")
    run.add_argument("--binding", choices=["inproc", "stream-json", "acp", "a2a", "pty"],
                     help="force one binding (default: the best the agent's manifest declares, "
                     "falling back down the list; this build connects over inproc)")
    task = run.add_mutually_exclusive_group(required=True)
    task.add_argument("--task", metavar="TEXT", help="the prompt to send")
    task.add_argument("--task-file", metavar="F", help="read the prompt from a file")
    run.add_argument("--cwd", metavar="DIR", help="the session's working directory (default: .)")
    run.add_argument("--model", metavar="M", help="model name passed to the agent")
    run.add_argument("--log", metavar="FILE", help="event log file (appended to if it exists)")
    run.add_argument("--fsync", choices=FSYNC_POLICIES, default="batch",
                     help="log durability: always | batch (default) | never")
    run.add_argument("--script", metavar="F",
                     help="script file (TOML) for the scripted agent's brain")
    run.add_argument("--permissions", choices=POLICIES,
                     help="who decides tool permissions: ask (a human; default with a terminal), "
                     "allow (all but high risk), deny (default without a terminal), bypass "
                     "(the agent's own no-prompt mode; warned and logged)")
    run.add_argument("--allow-high-risk", action="store_true",
                     help="let the allow/bypass policies approve high-risk requests too")
    run.add_argument("--budget-usd", type=float, metavar="X",
                     help="refuse turns once the session has spent X dollars")
    run.add_argument("--headless", action="store_true",
                     help="never prompt on the terminal (asks are declined)")
    run.add_argument("--json", action="store_true",
                     help="print the session's events as JSON lines instead of progress")
    run.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    interactive = sys.stdin.isatty() and not args.headless
    policy = args.permissions or ("ask" if interactive else "deny")
    if policy == "ask" and not interactive:
        raise UsageError("--permissions ask needs a terminal on stdin; use allow, deny or bypass")
    if args.task_file:
        try:
            task = Path(args.task_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--task-file {args.task_file}: {exc.strerror or exc}") from None
    else:
        task = args.task
    cwd = os.path.abspath(args.cwd or ".")
    if not os.path.isdir(cwd):
        raise UsageError(f"--cwd {cwd}: not a directory")
    script = brain_script(args.script)
    log_path = args.log or os.path.join(".cap", "runs", f"{run_id()}.caplog")
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    try:
        log = FileEventLog(log_path, fsync=args.fsync)
    except (LogFormatError, LogCorrupted, LogLocked, IsADirectoryError) as exc:
        raise UsageError(f"--log {log_path}: {exc}") from None
    if log.recovered:
        print(f"cap: {log_path}: cut a torn tail of {log.recovered.dropped_bytes} bytes "
              f"({log.recovered.detail})", file=sys.stderr)
    print(f"cap: logging to {log_path}", file=sys.stderr)
    status = "failed"
    try:
        status = trio.run(_run, args, log, task, cwd, script, policy, interactive)
    finally:
        print(f"cap: log written to {log_path} (see: cap log show {log_path})", file=sys.stderr)
    return EXIT_OK if status == "completed" else EXIT_FAILED


async def _run(args, log: FileEventLog, task: str, cwd: str, script, policy: str,
               interactive: bool) -> str:
    async with log, open_orchestrator(log) as orch:
        try:
            session = await orch.start_session(
                args.agent, args.binding, cwd=cwd, model=args.model, script=script,
                permissions=policy, allow_high_risk=args.allow_high_risk,
                human=interactive, budget_usd=args.budget_usd,
            )
        except UnknownAgent as exc:
            raise UsageError(str(exc)) from None
        async with trio.open_nursery() as nursery:
            follower = _Follower(orch, session, interactive, args.json)
            nursery.start_soon(follower.run)
            await session.run_turn(task)
            view = await session.close()
        return view.status


class _Follower:
    """Prints the session's events as they are logged and asks the human when needed."""

    def __init__(self, orch: Orchestrator, session: Session, human: bool, as_json: bool) -> None:
        self.orch = orch
        self.session = session
        self.human = human
        self.as_json = as_json
        self.in_text = False

    async def run(self) -> None:
        async for batch in self.orch.log.subscribe(1, self.session.id):
            for env in batch:
                self._print(env)
                if isinstance(env.event, SessionInputRequired) and self.human:
                    await self._ask_human(env.event)
                if isinstance(env.event, _TERMINAL):
                    return

    def _print(self, env: Envelope) -> None:
        out = sys.stdout
        ev = env.event
        if self.as_json:
            out.write(msgspec.json.encode(to_json_obj(env)).decode() + "\n")
            out.flush()
            return
        if isinstance(ev, TextChunk) and ev.channel == "assistant":
            out.write(ev.text)
            self.in_text = True
            out.flush()
            return
        if isinstance(ev, _QUIET):
            return
        if self.in_text:
            out.write("\n")
            self.in_text = False
        out.write(f"· {describe(ev)}\n")
        out.flush()

    async def _ask_human(self, ev: SessionInputRequired) -> None:
        pending = self.orch.state.pending
        await self.orch.wait_until(lambda s: s.last_seq >= self.orch.log.last_seq)
        if ev.reason == "permission":
            request = pending.permissions.get(self.session.id, {}).get(ev.ref)
            if request is None:
                return
            reply = await _prompt(f"Allow {request.tool} {describe_intent(request.intent)}? "
                                  "[y]es once / [a]lways / [n]o: ")
            choice = {"y": "allow_once", "yes": "allow_once", "a": "allow_always",
                      "always": "allow_always"}.get(reply.strip().lower(), "deny")
            await self.session.decide(ev.ref, choice)  # type: ignore[arg-type]
        else:
            ask = pending.asks.get(self.session.id, {}).get(ev.ref)
            if ask is None:
                return
            options = [c.get("const") for c in (ask.form or {}).get("oneOf", [])]
            hint = f" [{'|'.join(map(str, options))}]" if options else ""
            while True:
                reply = (await _prompt(f"{ask.prompt}{hint}: ")).strip()
                if not options or reply in options or not reply:
                    break
                print(f"  please answer one of: {', '.join(map(str, options))}")
            await self.session.answer(ev.ref, reply or None)


def describe_intent(intent: dict) -> str:
    for key in ("command", "path", "file_path", "url"):
        if key in intent:
            return str(intent[key])
    return msgspec.json.encode(intent).decode()[:100]


async def _prompt(text: str) -> str:
    try:
        return await trio.to_thread.run_sync(input, text, abandon_on_cancel=True)
    except EOFError:
        return ""
