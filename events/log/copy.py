"""``cap log copy``: a log moved between the file and PostgreSQL forms, envelopes intact.

Seq, time, stream, cause and event of every envelope arrive unchanged, so a
replay of the copy equals a replay of the source.  Rules:

* the destination must be empty (a new file, or a PostgreSQL log with no
  events): a copy never merges into or renumbers an existing history;
* a source with damage, or with events this build cannot decode, is refused
  (repair it first, or copy with the trio-cap that wrote it): a copy must not
  silently turn lost or unreadable events into placeholders;
* the file copy is written to a temporary name, fsync'd and renamed; the
  PostgreSQL copy is one transaction.  Either way there is all of it or none.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

import attrs

from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import LogLost, LogUndecodable
from trio_cap.events.log.base import EventLog
from trio_cap.events.log.records import MADE_ON_READ, MAGIC, encode_into

WINDOW = 4096


class CopyRefused(Exception):
    """The copy was not made (the reason says why); nothing was written."""


@attrs.frozen
class CopyReport:
    events: int
    last_seq: int


def windows(log: EventLog) -> Iterator[list[Envelope]]:
    end = log.last_seq
    seq = 1
    while seq <= end:
        yield log.read(seq, until=min(end, seq + WINDOW - 1))
        seq += WINDOW


def _check(env: Envelope, where: str) -> None:
    event = env.event
    if isinstance(event, LogLost) and event.meta and event.meta.get(MADE_ON_READ):
        raise CopyRefused(f"{where} is damaged at seq {env.seq} ({event.reason}); repair it "
                          "first (cap log repair), then copy the repaired log")
    if isinstance(event, LogUndecodable) and event.meta and event.meta.get(MADE_ON_READ):
        raise CopyRefused(f"{where}: seq {env.seq} ({event.original_kind or 'an event'}) is not "
                          "readable by this build, so it cannot be copied faithfully; copy "
                          "with the trio-cap that wrote it")


def checked(log: EventLog, where: str) -> Iterator[list[Envelope]]:
    damage = [d for d in getattr(log, "damage", []) if not getattr(d, "torn", False)]
    if damage:
        raise CopyRefused(f"{where} is damaged; repair it first (cap log repair), then copy "
                          "the repaired log")
    expected = 1
    for envs in windows(log):
        for env in envs:
            _check(env, where)
            if env.seq != expected:
                raise CopyRefused(f"{where}: seq {expected} is missing")
            expected += 1
        yield envs


def copy_to_file(source: EventLog, where: str, out: str | os.PathLike[str]) -> CopyReport:
    out = os.fspath(out)
    try:
        st = os.stat(out)
    except FileNotFoundError:
        pass
    else:  # an empty regular file may be replaced; a device, FIFO or socket never is
        if not stat.S_ISREG(st.st_mode) or st.st_size > 0:
            raise CopyRefused(f"{out} already exists; copy into a new file")
    tmp = f"{out}.copying-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    count = 0
    try:
        buf = bytearray(MAGIC)
        for envs in checked(source, where):
            encode_into(envs, buf)
            count += len(envs)
            if len(buf) >= 1 << 22:
                _write_all(fd, buf)
                buf.clear()
        _write_all(fd, buf)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, out)
    return CopyReport(count, count)


def _write_all(fd: int, data: bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def copy_to_postgres(source: EventLog, where: str, url: str) -> CopyReport:
    from trio_cap.events.log.postgres import PostgresEventLog

    dst = PostgresEventLog(url, readonly=False)
    try:
        return dst.import_envelopes(checked(source, where))
    finally:
        dst.close_sync()
