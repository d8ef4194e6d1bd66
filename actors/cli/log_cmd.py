"""``cap log show`` and ``cap replay``: read a log without changing it."""

from __future__ import annotations

import argparse
import sys

import msgspec

from trio_cap.actors.cli.common import EXIT_OK, UsageError
from trio_cap.actors.cli.render import line
from trio_cap.events.envelope import to_json_obj
from trio_cap.events.log import FileEventLog, LogCorrupted, LogFormatError
from trio_cap.events.replay import replay


def register(sub: argparse._SubParsersAction) -> None:
    log = sub.add_parser("log", help="inspect a run's event log")
    log_sub = log.add_subparsers(dest="log_command", metavar="SUBCOMMAND", required=True)
    show = log_sub.add_parser(
        "show",
        help="print a log's events",
        description="Print every event of a .caplog file: one readable line per event, or one "
        "JSON object per line with --json.  The file is opened read-only; a torn tail is "
        "reported, not cut.",
    )
    show.add_argument("log", metavar="LOG", help="path of the .caplog file")
    show.add_argument("--json", action="store_true", help="one JSON object per line")
    show.add_argument("--session", metavar="ID", help="only events of this session")
    show.add_argument("--until", metavar="SEQ", type=int, help="stop after this seq")
    show.set_defaults(func=show_log)

    rep = sub.add_parser(
        "replay",
        help="rebuild and print the state a log describes",
        description="Fold the log's events into the projections (sessions, usage, plans, "
        "pending asks and permissions) up to --until and print the result.",
    )
    rep.add_argument("log", metavar="LOG", help="path of the .caplog file")
    rep.add_argument("--until", metavar="SEQ", type=int, help="replay up to and including SEQ")
    rep.add_argument("--session", metavar="ID", help="only show this session")
    rep.add_argument("--json", action="store_true", help="print the state as JSON")
    rep.set_defaults(func=replay_log)


def open_readonly(path: str) -> FileEventLog:
    try:
        log = FileEventLog(path, readonly=True)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such log file") from None
    except (LogFormatError, LogCorrupted) as exc:
        raise UsageError(str(exc)) from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory, not a log file") from None
    if log.recovered:
        print(
            f"cap: {path}: the last {log.recovered.dropped_bytes} bytes are a torn or corrupt "
            f"tail ({log.recovered.detail}); showing the {log.last_seq} complete events",
            file=sys.stderr,
        )
    return log


def show_log(args: argparse.Namespace) -> int:
    log = open_readonly(args.log)
    out = sys.stdout
    encode = msgspec.json.encode
    seq = 1
    end = log.last_seq if args.until is None else min(args.until, log.last_seq)
    while seq <= end:
        envs = log.read(seq, args.session, until=min(end, seq + 4095))
        for env in envs:
            if args.json:
                out.write(encode(to_json_obj(env)).decode() + "\n")
            else:
                out.write(line(env) + "\n")
        seq += 4096
    return EXIT_OK


def replay_log(args: argparse.Namespace) -> int:
    log = open_readonly(args.log)
    state = replay(log, args.until)
    if args.json:
        print(msgspec.json.encode(_json_state(state, args.session)).decode())
        return EXIT_OK
    print(f"replayed {state.last_seq} events from {args.log}")
    sessions = state.sessions.sessions
    ids = [args.session] if args.session else list(sessions)
    if args.session and args.session not in sessions:
        raise UsageError(f"no session {args.session!r} in {args.log} up to seq {state.last_seq}")
    for sid in ids:
        view = sessions[sid]
        usage = state.usage.sessions.get(sid)
        print(f"\nsession {sid}: {view.status}")
        print(f"  agent {view.agent} via {view.binding}, cwd {view.cwd}")
        print(f"  turns {view.turns}, last stop {view.last_stop_reason or '-'}")
        if view.last_error:
            print(f"  last error {view.last_error}")
        if usage:
            budget = f" of ${usage.budget_usd:.4f}" if usage.budget_usd is not None else ""
            print(f"  usage {usage.input_tokens} in / {usage.output_tokens} out tokens, "
                  f"${usage.cost_usd:.4f}{budget}")
        plan = state.plan.plans.get(sid)
        if plan:
            print("  plan: " + "; ".join(f"{e.content} ({e.status})" for e in plan))
        for perm in state.pending.permissions.get(sid, {}).values():
            print(f"  pending permission {perm.req_id}: {perm.tool} ({perm.scope}, "
                  f"{perm.risk_level} risk)")
        for ask in state.pending.asks.get(sid, {}).values():
            print(f"  pending ask {ask.ask_id}: {ask.prompt}")
    total = state.usage.total
    print(f"\ntotal usage: {total.input_tokens} in / {total.output_tokens} out tokens, "
          f"${total.cost_usd:.4f}; pending: {state.pending.count()}")
    return EXIT_OK


def _json_state(state, session: str | None) -> dict:
    data = msgspec.to_builtins(state)
    data.pop("transcript", None)
    data["audit"] = data["audit"]["entries"]
    if session:
        data["sessions"]["sessions"] = {
            k: v for k, v in data["sessions"]["sessions"].items() if k == session
        }
    return data
