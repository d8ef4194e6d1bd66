"""``cap log migrate``, ``cap log copy`` and ``cap log show --follow``: the log past one file.

Opening a log by what the user typed (a path or a ``postgresql://`` URL) and
turning a database that cannot be reached into one line (exit 1) and a schema
this build cannot use into a usage error (exit 2) happen here, for every log
command.
"""

from __future__ import annotations

import argparse
import sys

import msgspec
import trio

from trio_cap.actors.cli.common import EXIT_OK, RunFailed, UsageError
from trio_cap.actors.cli.render import line
from trio_cap.events.envelope import to_json_obj
from trio_cap.events.log import LogCorrupted, LogFormatError
from trio_cap.events.log.base import EventLog
from trio_cap.events.log.opener import describe, is_url, open_log, open_log_sync


def register(log_sub: argparse._SubParsersAction) -> None:
    mig = log_sub.add_parser(
        "migrate",
        help="create or upgrade a PostgreSQL log's schema",
        description="Create the trio-cap tables in the database URL names (in its current "
        "schema: add ?options=-csearch_path%%3DNAME to keep several logs in one database), "
        "or apply the migrations a newer trio-cap needs.  Safe to run again and from several "
        "machines at once.  Exit 0 when the schema is current, 1 when the database cannot be "
        "reached, 2 on a bad URL or a schema newer than this trio-cap.",
    )
    mig.add_argument("url", metavar="URL", help="postgresql://USER@HOST:PORT/DB")
    mig.set_defaults(func=migrate_command)

    cp = log_sub.add_parser(
        "copy",
        help="copy a log between the file and PostgreSQL forms",
        description="Copy every event of SRC into DST, each with its seq, time, stream and "
        "cause unchanged, so `cap replay` gives the same state on both.  SRC and DST are "
        ".caplog paths or postgresql:// URLs.  DST must be empty (a new file, or a PostgreSQL "
        "log with no events); a damaged SRC is refused (cap log repair first).  All or "
        "nothing: a file is written under a temporary name and renamed, a database copy is one "
        "transaction.  Exit 0 copied, 1 a database cannot be reached, 2 refused.",
    )
    cp.add_argument("src", metavar="SRC", help="the log to read (never changed)")
    cp.add_argument("dst", metavar="DST", help="the empty log to write")
    cp.set_defaults(func=copy_command)


def open_reader(target: str) -> EventLog:
    """A read-only log for a path or URL, or the one-line error that says why not."""
    from trio_cap.events.log.postgres import SchemaError, Unavailable

    try:
        return open_log_sync(target, readonly=True)
    except Unavailable as exc:
        raise RunFailed(str(exc)) from None
    except SchemaError as exc:
        raise UsageError(str(exc)) from None
    except FileNotFoundError:
        raise UsageError(f"{target}: no such log file") from None
    except IsADirectoryError:
        raise UsageError(f"{target} is a directory, not a log file") from None
    except (LogFormatError, LogCorrupted) as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{target}: cannot read: {exc.strerror or exc}") from None
    except Exception as exc:  # psycopg refuses a malformed URL with ProgrammingError
        if is_url(target):
            raise UsageError(f"{describe(target)}: not a usable PostgreSQL URL: "
                             f"{str(exc).splitlines()[0] if str(exc) else exc}") from None
        raise


def close_reader(log: EventLog) -> None:
    log.close()  # type: ignore[attr-defined] - both read-only logs close without Trio


def migrate_command(args: argparse.Namespace) -> int:
    import psycopg

    from trio_cap.events.log.postgres_conn import connect, why
    from trio_cap.events.log.postgres_schema import LATEST, SchemaError, current_version, migrate

    if not is_url(args.url):
        raise UsageError(f"{args.url}: give a postgresql:// URL (a file log needs no migration)")
    where = describe(args.url)
    try:
        conn = connect(args.url, connect_timeout=10)
    except psycopg.ProgrammingError as exc:
        raise UsageError(f"{where}: not a usable PostgreSQL URL: {why(exc)}") from None
    except psycopg.Error as exc:
        raise RunFailed(f"{where}: cannot connect: {why(exc)}") from None
    try:
        before = current_version(conn) or 0
        applied = migrate(conn)
    except SchemaError as exc:
        raise UsageError(f"{where}: {exc}") from None
    except psycopg.Error as exc:
        raise RunFailed(f"{where}: migration failed: {why(exc)}") from None
    finally:
        conn.close()
    if applied:
        print(f"{where}: schema version {before} -> {LATEST} (applied "
              f"{', '.join(map(str, applied))})")
    else:
        print(f"{where}: schema is up to date (version {LATEST})")
    return EXIT_OK


def copy_command(args: argparse.Namespace) -> int:
    from trio_cap.events.log.copy import CopyRefused, copy_to_file, copy_to_postgres
    from trio_cap.events.log.postgres import SchemaError, Unavailable

    if args.src == args.dst:
        raise UsageError("SRC and DST are the same log")
    src = open_reader(args.src)
    try:
        if is_url(args.dst):
            report = copy_to_postgres(src, describe(args.src), args.dst)
        else:
            report = copy_to_file(src, describe(args.src), args.dst)
    except CopyRefused as exc:
        raise UsageError(str(exc)) from None
    except SchemaError as exc:
        raise UsageError(str(exc)) from None
    except Unavailable as exc:
        raise RunFailed(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{args.dst}: cannot write: {exc.strerror or exc}") from None
    finally:
        close_reader(src)
    print(f"copied {report.events} events (seqs 1–{report.last_seq}) from "
          f"{describe(args.src)} to {describe(args.dst)}")
    return EXIT_OK


def follow_show(args: argparse.Namespace) -> int:
    """``cap log show LOG --follow``: everything so far, then every event as it commits.

    Just ``subscribe()`` on the opened log, so it works for any backend whose
    reader sees other processes' appends live (PostgreSQL through LISTEN/NOTIFY).
    Ends at ``--until`` or on Ctrl+C.
    """
    from trio_cap.events.log.postgres import SchemaError, Unavailable

    if not is_url(args.log):
        raise UsageError("--follow follows a postgresql:// log in this build (a file log is "
                         "shown as it stands: drop --follow)")

    async def main() -> None:
        try:
            log = await open_log(args.log, readonly=True, listen=True,
                                 notices=lambda text: print(f"cap: {text}", file=sys.stderr))
        except Unavailable as exc:
            raise RunFailed(str(exc)) from None
        except SchemaError as exc:
            raise UsageError(str(exc)) from None
        encode = msgspec.json.encode
        async with log:
            subscription = log.subscribe(1, args.session)
            async for batch in subscription:
                for env in batch:
                    if args.until is not None and env.seq > args.until:
                        return
                    text = encode(to_json_obj(env)).decode() if args.json else line(env)
                    sys.stdout.write(text + "\n")
                sys.stdout.flush()
                if args.until is not None and subscription.next_seq > args.until:
                    return

    trio.run(main)
    return EXIT_OK
