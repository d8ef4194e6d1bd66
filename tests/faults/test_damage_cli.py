"""Every damage class through the real ``cap``: log show, replay, run --log (reopen for
writing) and log repair, each as a process — exit code, a clear message on stderr naming
the damage, never a traceback, within a time bound."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs
import pytest

from tests.events.logfiles import (
    crc_valid_record,
    envelope_payload,
    flip,
    make_log,
    record_at,
    replace_record,
    set_length,
)
from trio_cap.events.log import FileEventLog
from trio_cap.events.log.records import HEADER_SIZE, MAX_RECORD

CAP = [sys.executable, "-m", "trio_cap.actors.cli"]
BOUND = 30.0
ALL = set(range(18))


def cap(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    started = time.monotonic()
    result = subprocess.run([*CAP, *args], cwd=cwd, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=BOUND)
    assert time.monotonic() - started < BOUND
    both = result.stdout + result.stderr
    assert "Traceback" not in both and "ExceptionGroup" not in both, both
    return result


def shown_numbers(stdout: str) -> set[int]:
    return {int(ln.rsplit("event number ", 1)[1]) for ln in stdout.splitlines()
            if "event number " in ln}


def length_flip(which: int) -> Callable:
    def damage(path: Path, spans: list) -> None:
        offset = spans[which][0]
        set_length(path, offset, record_at(path.read_bytes(), offset)[0] ^ 0x10000)
    return damage


def body_flip_then_torn(path: Path, spans: list) -> None:
    flip(path, spans[2][0] + HEADER_SIZE + 7)
    path.write_bytes(path.read_bytes()[:-9])


def body_flip_then_garbage(path: Path, spans: list) -> None:
    flip(path, spans[2][0] + HEADER_SIZE + 7)
    path.write_bytes(path.read_bytes() + b"GARBAGE!" * 8)


def count_mismatch(path: Path, spans: list) -> None:
    _, _, first, count, payload = record_at(path.read_bytes(), spans[3][0])
    replace_record(path, spans[3], crc_valid_record(first, count + 1, payload))


def undecodable_payload(path: Path, spans: list) -> None:
    replace_record(path, spans[1], crc_valid_record(4, 3, b"\x93\x95\x04" + b"\xc1" * 30))


def unknown_kind(path: Path, spans: list) -> None:
    raw = [[4, 1.5, "s", None, {"kind": "cap.hologram", "frames": [1, 2]}],
           [5, 1.5, "s", None, {"kind": "cap.text_chunk", "message_id": "m",
                                "text": "event number 4"}],
           [6, 1.5, "s", None, {"kind": "cap.text_chunk", "message_id": "m",
                                "text": "event number 5"}]]
    replace_record(path, spans[1], crc_valid_record(4, 3, envelope_payload(raw)))


def torn_header(path: Path, spans: list) -> None:
    path.write_bytes(path.read_bytes()[: spans[5][0] + 11])


def long_tail(path: Path, spans: list) -> None:
    data = path.read_bytes()
    header = bytearray(data[spans[5][0] : spans[5][0] + HEADER_SIZE + 13])
    header[0:4] = MAX_RECORD.to_bytes(4, "little")
    header[8:16] = (19).to_bytes(8, "little")
    with path.open("ab") as f:
        f.write(bytes(header) + b"\x00" * (MAX_RECORD + 64))


def seq_gap(path: Path, spans: list) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: spans[2][0]] + data[spans[3][0] :])


def repeated_record(path: Path, spans: list) -> None:
    data = path.read_bytes()
    path.write_bytes(data + data[spans[0][0] : spans[0][1]])


@attrs.frozen
class Case:
    damage: Callable
    show_exit: int
    shown: set[int]  # which "event number N" log show prints
    says: str  # on stderr of log show
    refused_at: int | None  # record index (or -1: end of the clean log) a writer refuses at
    lost: str | None  # what repair reports lost


CASES = {
    "length field, first record": Case(length_flip(0), 2, ALL, "length field is damaged", 0,
                                       None),
    "length field, middle record": Case(length_flip(2), 2, ALL, "length field is damaged", 2,
                                        None),
    "length field, last record": Case(length_flip(5), 2, ALL, "length field is damaged", 5,
                                      None),
    "body flip mid-log, then a torn tail": Case(body_flip_then_torn, 2, ALL - {6, 7, 8, 15, 16,
                                                17}, "seqs 7–9 are lost", 2, "seqs 7–9"),
    "body flip, then appended garbage": Case(body_flip_then_garbage, 2, ALL - {6, 7, 8},
                                             "seqs 7–9 are lost", 2, "seqs 7–9"),
    "header count disagrees with payload": Case(count_mismatch, 2, ALL - {9, 10, 11},
                                                "does not hold the 4 events", 3, "seqs 10–12"),
    "payload does not decode (valid CRC)": Case(undecodable_payload, 2, ALL - {3, 4, 5},
                                                "does not decode", None, "seqs 4–6"),
    "unknown kind": Case(unknown_kind, 0, ALL - {3}, "cap.hologram is not readable", None, None),
    "torn header": Case(torn_header, 0, ALL - {15, 16, 17}, "torn final append", None, None),
    "tail longer than one maximal append": Case(long_tail, 2, ALL, "skipped damaged bytes", -1,
                                                None),
    "seq gap": Case(seq_gap, 2, ALL - {6, 7, 8}, "seqs 7–9 are missing", 2, "seqs 7–9"),
    "a record repeats seqs": Case(repeated_record, 2, ALL, "repeats seqs 1–3", -1, None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_damage_through_the_cli(tmp_path, name):
    case = CASES[name]
    path = tmp_path / "d.caplog"
    spans = make_log(path)
    case.damage(path, spans)
    damaged = path.read_bytes()
    (tmp_path / "w.caplog").write_bytes(damaged)  # the writer's copy: it may cut a torn tail
    with ThreadPoolExecutor(4) as pool:
        show = pool.submit(cap, "log", "show", "d.caplog", cwd=tmp_path)
        replay = pool.submit(cap, "replay", "d.caplog", cwd=tmp_path)
        fixed = pool.submit(cap, "log", "repair", "d.caplog", "--out", "fixed.caplog",
                            cwd=tmp_path)
        run = pool.submit(cap, "run", "--task", "hi", "--headless", "--log", "w.caplog",
                          cwd=tmp_path)
        show, replay, fixed, run = show.result(), replay.result(), fixed.result(), run.result()
    assert path.read_bytes() == damaged, "a reader changed the log"

    assert show.returncode == case.show_exit, show.stderr
    assert shown_numbers(show.stdout) == case.shown
    assert case.says in show.stderr, show.stderr
    assert replay.returncode == case.show_exit, replay.stderr
    assert "replayed" in replay.stdout
    if case.show_exit == 2:
        last = show.stderr.strip().splitlines()[-1]
        assert last.startswith("cap: error: d.caplog is damaged") and "cap log repair" in last

    if case.refused_at is not None:
        offset = spans[case.refused_at][0] if case.refused_at >= 0 else spans[-1][1]
        assert run.returncode == 2, run.stderr
        (line,) = [ln for ln in run.stderr.splitlines() if ln.startswith("cap: error:")]
        assert f"damaged at byte {offset}" in line and "cap log repair w.caplog" in line
        assert (tmp_path / "w.caplog").read_bytes() == damaged, "a refused writer changed it"
    else:
        assert run.returncode == 0, run.stderr

    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "recovered" in fixed.stdout
    if case.lost:
        assert f"{case.lost} lost" in fixed.stdout
    fixed_log = FileEventLog(tmp_path / "fixed.caplog", readonly=True)
    events = fixed_log.read()
    fixed_log.close()
    assert [e.seq for e in events] == list(range(1, len(events) + 1)) and not fixed_log.damage
    texts = {getattr(e.event, "text", None) for e in events}
    assert {f"event number {i}" for i in case.shown} <= texts
    appended = cap("run", "--task", "hi", "--headless", "--log", "fixed.caplog", cwd=tmp_path)
    assert appended.returncode == 0, appended.stderr


def test_an_unknown_kind_is_shown_raw_as_json(tmp_path):
    path = tmp_path / "d.caplog"
    unknown_kind(path, make_log(path))
    shown = cap("log", "show", "d.caplog", "--json", cwd=tmp_path)
    assert shown.returncode == 0
    raw = json.loads(shown.stdout.splitlines()[3])
    assert raw == {"seq": 4, "at": 1.5, "stream": "s", "cause": None, "kind": "cap.hologram",
                   "frames": [1, 2]}
    text = cap("log", "show", "d.caplog", cwd=tmp_path).stdout.splitlines()[3]
    assert "cap.hologram" in text and '{"kind":"cap.hologram","frames":[1,2]}' in text


def test_repair_exit_codes(tmp_path):
    path = tmp_path / "d.caplog"
    make_log(path)
    (tmp_path / "junk.caplog").write_bytes(path.read_bytes()[:8] + b"\x07" * 500)
    nothing = cap("log", "repair", "junk.caplog", "--out", "n.caplog", cwd=tmp_path)
    assert nothing.returncode == 1 and "nothing in junk.caplog could be recovered" in \
        nothing.stderr
    assert not (tmp_path / "n.caplog").exists()
    exists = cap("log", "repair", "d.caplog", "--out", "d.caplog", cwd=tmp_path)
    assert exists.returncode == 2 and "new file" in exists.stderr
    missing = cap("log", "repair", "nope.caplog", "--out", "x.caplog", cwd=tmp_path)
    assert missing.returncode == 2 and "no such log file" in missing.stderr
    (tmp_path / "text.caplog").write_text("not a log at all\n")
    other = cap("log", "repair", "text.caplog", "--out", "y.caplog", cwd=tmp_path)
    assert other.returncode == 2 and "not a trio-cap event log" in other.stderr


def test_a_damaged_magic_header_is_refused_with_a_hint_and_repaired(tmp_path):
    path = tmp_path / "d.caplog"
    make_log(path)
    flip(path, 2)  # "CAPLOG" -> "CALLOG"
    shown = cap("log", "show", "d.caplog", cwd=tmp_path)
    assert shown.returncode == 2 and "bad magic header" in shown.stderr
    assert "cap log repair d.caplog --out NEW" in shown.stderr
    run = cap("run", "--task", "hi", "--headless", "--log", "d.caplog", cwd=tmp_path)
    assert run.returncode == 2 and "bad magic header" in run.stderr
    fixed = cap("log", "repair", "d.caplog", "--out", "f.caplog", cwd=tmp_path)
    assert fixed.returncode == 0 and "damaged magic header" in fixed.stdout
    assert "recovered 18 events" in fixed.stdout


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path):
    import os

    os.mkfifo(tmp_path / "p.caplog")
    for args in (["log", "show", "p.caplog"], ["replay", "p.caplog"],
                 ["log", "repair", "p.caplog", "--out", "o.caplog"]):
        result = cap(*args, cwd=tmp_path)
        assert result.returncode == 2 and "not a regular file" in result.stderr, result.stderr
