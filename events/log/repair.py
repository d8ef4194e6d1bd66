"""``cap log repair``: copy every valid record of a damaged log into a new, clean log.

Why a copy and never an in-place fix: the damaged file stays as evidence and
as a second chance; the copy is checked by the same scanner a writer uses.

Rules:

* the source is scanned exactly as a reader scans it (every offset after
  damage is tried), and read a few MiB at a time;
* a valid record is copied byte for byte (events of a newer trio-cap
  included), after its payload was checked against its header; a record
  whose length field alone was damaged is copied with the length put right;
* seqs stay what they were, so every ``cause`` still points at its event:
  each seq no valid record holds becomes a ``log.lost`` placeholder naming
  the lost range and the damaged bytes;
* a seq is never written twice (a record repeating seqs is skipped), and
  what follows the last valid record (torn or damaged) is left out;
* the output must not exist yet; it is written whole, fsync'd, or removed.
  When nothing at all was recovered no output is left (and ``cap`` exits 1).
"""

from __future__ import annotations

import os
import stat

import attrs

from trio_cap.events.log.errors import LogFormatError
from trio_cap.events.log.file import describe_gap, scan_file
from trio_cap.events.log.records import (
    MAGIC,
    decode_payload,
    encode_into,
    frame,
    lost_envelopes,
)
from trio_cap.events.log.scan import Damage, Record, Scanner, SeqGap

MAX_FILL = 1_000_000
"""Most placeholders one seq gap may need; a larger jump is not a damaged log of ours."""
_FLUSH = 4 * 1024 * 1024


class RepairError(Exception):
    """The log cannot be repaired into that output (it exists, or the source is not a log)."""


@attrs.define
class RepairReport:
    source: str
    out: str
    records: int = 0
    events: int = 0
    """Events copied (placeholders not counted)."""
    lost: list[tuple[int, int]] = attrs.Factory(list)
    """Seq ranges written as ``log.lost`` placeholders."""
    skipped: list[Damage] = attrs.Factory(list)
    """Byte ranges left out, in file order."""
    unreadable: list[str] = attrs.Factory(list)
    """Problems inside copied or dropped records (undecodable events, header mismatches)."""
    last_seq: int = 0

    @property
    def recovered(self) -> bool:
        return self.events > 0


def repair(source: str | os.PathLike[str], out: str | os.PathLike[str]) -> RepairReport:
    source, out = os.fspath(source), os.fspath(out)
    report = RepairReport(source, out)
    try:
        src = os.open(source, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except IsADirectoryError:
        raise RepairError(f"{source} is a directory, not a log file") from None
    except FileNotFoundError:
        raise RepairError(f"{source}: no such log file") from None
    try:
        info = os.fstat(src)
        if not stat.S_ISREG(info.st_mode):
            raise RepairError(f"{source} is not a regular file, so it cannot hold an event log")
        size = info.st_size
        head = os.pread(src, len(MAGIC), 0)
        if head != MAGIC:  # still a log if valid records follow (checked at the end)
            report.skipped.append(Damage(0, len(MAGIC), 0, "damaged magic header"))
        try:
            dst = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            raise RepairError(f"{out} already exists; repair writes a new file") from None
        try:
            _copy(src, size, dst, report)
            os.fsync(dst)
        except BaseException:
            os.close(dst)
            os.unlink(out)
            raise
        os.close(dst)
        if not report.recovered:
            os.unlink(out)
            if head != MAGIC:
                raise LogFormatError(f"{source} is not a trio-cap event log (bad magic header, "
                                     "and no valid record in it)")
    finally:
        os.close(src)
    return report


def _copy(src: int, size: int, dst: int, report: RepairReport) -> None:
    buf = bytearray(MAGIC)
    written = 0
    at = 0.0
    reason = "no record holds these seqs"
    for found in scan_file(src, size, Scanner(keep_payload=True)):
        if isinstance(found, Damage):
            report.skipped.append(found)
            reason = f"damaged bytes {found.start}–{found.end} of {report.source}: {found.detail}"
            continue
        if isinstance(found, SeqGap):
            _fill(buf, found.from_seq, found.to_seq, reason, at, report, describe_gap(found))
            reason = "no record holds these seqs"
            continue
        assert isinstance(found, Record) and found.payload is not None
        decoded = decode_payload(found.payload, found.first_seq, found.count)
        if decoded.problem:
            report.unreadable.append(f"record at byte {found.offset}: {decoded.problem}")
        if decoded.lost:
            # the payload is unusable or disagrees with its header: keep the seqs, not the bytes
            _fill(buf, found.first_seq, found.last_seq, f"record at byte {found.offset} of "
                  f"{report.source}: {decoded.problem}", at, report, None)
        else:
            buf += frame(found.first_seq, found.count, found.payload)
            report.records += 1
            report.events += found.count
            at = decoded.envs[-1].at
        report.last_seq = found.last_seq
        if len(buf) >= _FLUSH:
            written += _write(dst, buf, written)
    _write(dst, buf, written)


def _fill(buf: bytearray, from_seq: int, to_seq: int, reason: str, at: float,
          report: RepairReport, gap: str | None) -> None:
    if to_seq - from_seq + 1 > MAX_FILL:
        raise RepairError(f"{report.source}: {gap or 'a seq gap'}: a jump of "
                          f"{to_seq - from_seq + 1:,} seqs is not damage this tool can fill")
    encode_into(lost_envelopes(from_seq, to_seq, reason, at=at, stored=True), buf)
    report.lost.append((from_seq, to_seq))
    report.last_seq = to_seq


def _write(fd: int, buf: bytearray, offset: int) -> int:
    view = memoryview(buf)
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], offset + done)
    view.release()
    n = len(buf)
    buf.clear()
    return n
