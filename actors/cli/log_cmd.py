"""``cap log show``, ``cap replay`` and ``cap log repair``: read a log without changing it.

Readers never cut and never stop at damage: they show everything readable,
name every damaged span on stderr (byte range, last good seq, what was
lost), and exit 2 when anything was lost, so a script cannot take a partial
listing for the whole log.  A torn final append (a crash mid-write) and
events of a newer trio-cap are reported but are not damage: exit 0.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator

import msgspec

from trio_cap.actors.cli import export_cmd, log_pg_cmd
from trio_cap.actors.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, UsageError
from trio_cap.actors.cli.render import line
from trio_cap.events.envelope import Envelope, to_json_obj
from trio_cap.events.kinds import LogLost, LogUndecodable
from trio_cap.events.log import FileEventLog, LogFormatError
from trio_cap.events.log.file import describe_gap
from trio_cap.events.log.opener import is_url
from trio_cap.events.log.records import MADE_ON_READ
from trio_cap.events.log.repair import RepairError, repair
from trio_cap.events.log.scan import Damage, SeqGap
from trio_cap.events.replay import replay

_WINDOW = 4096
_MAX_NOTES = 20  # per kind of note; the rest are counted


def register(sub: argparse._SubParsersAction) -> None:
    log = sub.add_parser("log", help="inspect or repair a run's event log")
    log_sub = log.add_subparsers(dest="log_command", metavar="SUBCOMMAND", required=True)
    show = log_sub.add_parser(
        "show",
        help="print a log's events",
        description="Print every event of a .caplog file: one readable line per event, or one "
        "JSON object per line with --json.  The file is opened read-only and read as a "
        "stream.  Damage is stepped over and reported on stderr (exit 2 when events were "
        "lost; recover with `cap log repair`); a torn final append is reported, not cut.  "
        "Events this build cannot decode are shown raw (their kind and payload as JSON).",
    )
    show.add_argument("log", metavar="LOG",
                      help="path of the .caplog file, or a postgresql:// URL")
    show.add_argument("--json", action="store_true", help="one JSON object per line")
    show.add_argument("--follow", action="store_true",
                      help="after the events so far, print each new one as it commits (a "
                      "postgresql:// log: every node's appends, in seq order; a file log: "
                      "what the process writing it appends, until no process has it open "
                      "for writing); Ctrl+C ends")
    show.add_argument("--session", metavar="ID", help="only events of this session")
    show.add_argument("--until", metavar="SEQ", type=int, help="stop after this seq")
    show.set_defaults(func=show_log)

    fix = log_sub.add_parser(
        "repair",
        help="copy every valid record of a damaged log into a new log",
        description="Copy every valid record of LOG, in seq order, into the new file --out "
        "(never written twice, never in place).  Seqs keep their numbers; each seq that damage "
        "destroyed becomes a log.lost placeholder, so causes still point at the right events.  "
        "Prints every damaged byte range skipped and every seq range lost.  Exit 0 when events "
        "were recovered, 1 when nothing could be (no output is left), 2 on bad usage.",
    )
    fix.add_argument("log", metavar="LOG", help="the damaged .caplog file (only read)")
    fix.add_argument("--out", metavar="NEW", required=True,
                     help="the repaired log to create (must not exist)")
    fix.set_defaults(func=repair_log)

    rep = sub.add_parser(
        "replay",
        help="rebuild and print the state a log describes",
        description="Fold the log's events into the projections (sessions, usage, plans, "
        "pending asks and permissions) up to --until and print the result.  Damage is "
        "reported on stderr as by `cap log show` (exit 2 when events were lost).",
    )
    rep.add_argument("log", metavar="LOG", help="path of the .caplog file, or a postgresql:// "
                     "URL")
    rep.add_argument("--until", metavar="SEQ", type=int, help="replay up to and including SEQ")
    rep.add_argument("--session", metavar="ID", help="only show this session")
    rep.add_argument("--json", action="store_true", help="print the state as JSON")
    rep.add_argument("--check", action="store_true",
                     help="run every session's recorded inputs (frames, commands, timers) "
                     "through fresh machines and compare each event with the log: exit 0 "
                     "when identical, else print the first divergence (seq, expected, got) "
                     "and exit 1.  Needs no agent and no network")
    rep.add_argument("--agent", metavar="SESSION_ID",
                     help="with --serve: play this session's recorded agent side back as a "
                     "live agent")
    rep.add_argument("--serve", metavar="BINDING",
                     help="the binding to serve the played-back agent on, the one it was "
                     "recorded over: stream-json or acp on stdin/stdout, pty on the terminal "
                     "it is started in, a2a on --listen")
    rep.add_argument("--listen", metavar="HOST:PORT",
                     help="with --serve a2a: the address to serve the recorded agent on "
                     "(port 0: a free one, printed)")
    rep.add_argument("--fast", action="store_true",
                     help="with --serve pty: write the recorded output as soon as the driver "
                     "has typed what the recorded one did, not with the recorded gaps")
    rep.set_defaults(func=replay_log)
    log_pg_cmd.register(log_sub)
    export_cmd.register(log_sub)


# ---- opening and reporting ----------------------------------------------------


def open_readonly(path: str) -> FileEventLog:
    """A read-only log for a path or a postgresql:// URL, or a one-line error (exit 1 or 2)."""
    return log_pg_cmd.open_reader(path)  # type: ignore[return-value]


class Reporter:
    """Says on stderr what a reader stepped over, and whether that lost events."""

    def __init__(self, log: FileEventLog) -> None:
        self.log = log
        self.path = log.path
        self.lost = 0  # events lost to damage
        self.damaged = False
        self.unreadable = 0
        self.skipped = False  # bytes no record could be read from
        self._seen_ranges = {(g.from_seq, g.to_seq) for g in getattr(log, "damage", [])
                             if isinstance(g, SeqGap)}
        for note in self._open_notes():
            self._say(note)

    def _say(self, text: str) -> None:
        print(f"cap: {self.path}: {text}", file=sys.stderr)

    def _open_notes(self) -> Iterator[str]:
        found = getattr(self.log, "damage", [])  # a PostgreSQL log has no byte damage
        i = 0
        while i < len(found):
            item = found[i]
            if isinstance(item, SeqGap):
                self.damaged = True
                yield describe_gap(item)
                i += 1
                continue
            assert isinstance(item, Damage)
            if item.torn:
                yield (f"the last {item.end - item.start} bytes (from byte {item.start}, after "
                       f"seq {item.after_seq}) are a torn final append; a writer would cut them")
                i += 1
                continue
            self.damaged = True
            self.skipped |= not item.kept
            text = f"{'damaged' if item.kept else 'skipped damaged'} {item.describe()}"
            nxt = found[i + 1] if i + 1 < len(found) else None
            if isinstance(nxt, SeqGap) and nxt.at_offset == item.end:
                text += f"; seqs {nxt.from_seq}–{nxt.to_seq} are lost"
                i += 1
            yield text
            i += 1

    def envelope(self, env: Envelope) -> None:
        """Note placeholders met while streaming (each lost range once)."""
        event = env.event
        if isinstance(event, LogLost):
            key = (event.from_seq, event.to_seq)
            made_on_read = bool(event.meta and event.meta.get(MADE_ON_READ))
            if made_on_read:  # damage met now, not a placeholder a repair stored
                self.lost += 1
                self.damaged = True
            if key not in self._seen_ranges:
                self._seen_ranges.add(key)
                if made_on_read:
                    self._say(f"seqs {event.from_seq}–{event.to_seq} are unreadable: "
                              f"{event.reason}")
                else:
                    self._say(f"seqs {event.from_seq}–{event.to_seq} were lost before a repair "
                              f"({event.reason})")
        elif isinstance(event, LogUndecodable) and event.meta and event.meta.get(MADE_ON_READ):
            self.unreadable += 1
            if self.unreadable <= _MAX_NOTES:
                self._say(f"seq {env.seq}: {event.original_kind or 'an event'} is not "
                          f"readable by this build ({event.error}); shown raw")

    def seen(self, envs: list[Envelope]) -> None:
        """:func:`replay`'s window hook: the placeholders of lost or unreadable events."""
        for env in envs:
            if type(env.event) in (LogLost, LogUndecodable):
                self.envelope(env)

    def finish(self) -> int:
        if self.unreadable > _MAX_NOTES:
            self._say(f"{self.unreadable - _MAX_NOTES} more events not readable by this build")
        if not self.damaged:
            return EXIT_OK
        if self.lost:
            lost = f"{self.lost} events lost"
        elif self.skipped:
            lost = "what the skipped bytes held is lost"
        else:
            lost = "no event lost"
        print(f"cap: error: {self.path} is damaged ({lost}); everything readable was used, and "
              f"a writer refuses the file. Recover with: cap log repair {self.path} --out NEW",
              file=sys.stderr)
        return EXIT_USAGE


def _windows(log: FileEventLog, until: int | None) -> Iterator[list[Envelope]]:
    """The log a window of seqs at a time: memory stays flat however long the log."""
    end = log.last_seq if until is None else min(until, log.last_seq)
    seq = 1
    while seq <= end:
        yield log.read(seq, until=min(end, seq + _WINDOW - 1))
        seq += _WINDOW


# ---- cap log show ---------------------------------------------------------------


def show_log(args: argparse.Namespace) -> int:
    if args.follow and is_url(args.log):
        return log_pg_cmd.follow_show(args)
    log = open_readonly(args.log)
    report = Reporter(log)
    out = sys.stdout
    encode = msgspec.json.encode
    shown_lost: set[tuple[int, int]] = set()

    def show(envs) -> None:
        for env in envs:
            report.envelope(env)
            event = env.event
            if args.session is not None and env.stream != args.session and \
                    not isinstance(event, LogLost):
                continue
            if args.json:
                out.write(encode(_json(env)).decode() + "\n")
            elif isinstance(event, LogLost):
                key = (event.from_seq, event.to_seq)
                if key not in shown_lost:
                    shown_lost.add(key)
                    out.write(f"{env.seq:>6}  {'-':<12}  {'-':<17} {'log.lost':<24} seqs "
                              f"{event.from_seq}–{event.to_seq} lost: {event.reason}\n")
            elif isinstance(event, LogUndecodable):
                out.write(_raw_line(env, event) + "\n")
            else:
                out.write(line(env) + "\n")
        if args.follow:
            out.flush()

    if args.follow and args.until is None:  # a file log another process may be writing
        import trio

        from trio_cap.actors.cli.replay_cmd import follow

        trio.run(follow, log, 1, show)
    else:
        for envs in _windows(log, args.until):
            show(envs)
    log.close()
    return report.finish()


def _json(env: Envelope) -> dict:
    event = env.event
    if isinstance(event, LogUndecodable) and isinstance(event.payload, dict):
        return {"seq": env.seq, "at": env.at, "stream": env.stream, "cause": env.cause,
                **event.payload}
    return to_json_obj(env)


def _raw_line(env: Envelope, event: LogUndecodable) -> str:
    """Like :func:`line`, with the stored kind and the raw payload as JSON."""
    body = msgspec.json.encode(event.payload).decode()
    if len(body) > 300:
        body = body[:299] + "…"
    stamp = time.strftime("%H:%M:%S", time.localtime(env.at)) + f".{int(env.at * 1000) % 1000:03d}"
    return (f"{env.seq:>6}  {stamp}  {env.stream or '-':<17} {event.original_kind or '?':<24} "
            f"(raw: not readable by this build) {body}")


# ---- cap log repair --------------------------------------------------------------


def repair_log(args: argparse.Namespace) -> int:
    if args.out == args.log:
        raise UsageError("--out must name a new file, not the damaged log itself")
    try:
        report = repair(args.log, args.out)
    except (RepairError, LogFormatError) as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{exc.filename or args.log}: {exc.strerror or exc}") from None
    for span in report.skipped:
        what = "torn final append, " if span.torn else "damaged " if not span.kept else ""
        print(f"{'repaired' if span.kept else 'skipped'} {what}{span.describe()}")
    for first, last in report.lost:
        print(f"seqs {first}–{last} lost: written as log.lost placeholders")
    for note in report.unreadable[:_MAX_NOTES]:
        print(f"note: {note}")
    if not report.recovered:
        print(f"cap: error: nothing in {args.log} could be recovered; {args.out} was not "
              "written", file=sys.stderr)
        return EXIT_FAILED
    placeholders = sum(last - first + 1 for first, last in report.lost)
    clean = "" if report.skipped or report.lost else " (nothing was damaged)"
    print(f"recovered {report.events} events in {report.records} records, seqs 1–"
          f"{report.last_seq} with {placeholders} placeholders, into {args.out}{clean}")
    return EXIT_OK


# ---- cap replay ------------------------------------------------------------------


def replay_log(args: argparse.Namespace) -> int:
    if args.agent is not None or args.serve is not None:
        from trio_cap.actors.cli.replay_cmd import serve_log

        return serve_log(args)
    log = open_readonly(args.log)
    report = Reporter(log)
    if args.check:
        from trio_cap.actors.cli.replay_cmd import check_log

        return check_log(args, log, report)

    # the transcript is never printed here, and it is what grows with every text chunk
    state = replay(log, args.until, batch=_WINDOW, skip=("transcript",), seen=report.seen)
    log.close()
    if args.json:
        print(msgspec.json.encode(_json_state(state, args.session)).decode())
        return report.finish()
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
    return report.finish()


def _json_state(state, session: str | None) -> dict:
    data = msgspec.to_builtins(state)
    data.pop("transcript", None)
    data["audit"] = msgspec.to_builtins(state.audit.entries())  # every stream's, seq order
    if session:
        data["sessions"]["sessions"] = {
            k: v for k, v in data["sessions"]["sessions"].items() if k == session
        }
    return data
