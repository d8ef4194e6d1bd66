"""The scanner is sans-io: the same bytes give the same findings however they are chunked."""

from __future__ import annotations

import pytest

from tests.events.logfiles import crc_valid_record, flip, make_log, record_at, replace_record
from trio_cap.events.log.records import HEADER_SIZE, MAGIC
from trio_cap.events.log.scan import END, NEED_DATA, Damage, Record, Scanner, SeqGap


def findings(data: bytes, chunk: int) -> list:
    scanner = Scanner()
    body = data[len(MAGIC) :]
    fed = 0
    out = []
    while True:
        found = scanner.next_event()
        if found is NEED_DATA:
            piece = body[fed : fed + chunk]
            fed += len(piece)
            scanner.feed(piece)
            continue
        if found is END:
            return out
        out.append(found)


def damaged_files(tmp_path) -> dict[str, bytes]:
    files = {}
    path = tmp_path / "x.caplog"
    spans = make_log(path)
    clean = path.read_bytes()
    files["clean"] = clean
    flip(path, spans[2][0] + HEADER_SIZE + 3)
    files["body flip + torn"] = path.read_bytes()[:-7]
    path.write_bytes(clean)
    flip(path, spans[0][0] + 2)  # length of the first record
    files["length flip + garbage"] = path.read_bytes() + b"\x95" * 50
    path.write_bytes(clean)
    _, _, first, count, payload = record_at(clean, spans[4][0])
    replace_record(path, spans[4], crc_valid_record(first, count + 1, payload))
    files["count mismatch + repeat"] = path.read_bytes() + clean[spans[0][0] : spans[0][1]]
    files["torn header"] = clean[: spans[5][0] + 5]
    return files


@pytest.mark.parametrize("chunk", [1, 7, 23, 4096])
def test_findings_do_not_depend_on_chunking(tmp_path, chunk):
    for name, data in damaged_files(tmp_path).items():
        assert findings(data, chunk) == findings(data, len(data)), name


def test_what_each_damage_is_found_as(tmp_path):
    files = damaged_files(tmp_path)
    kinds = {name: [type(f).__name__ for f in findings(data, 1 << 20)]
             for name, data in files.items()}
    assert kinds["clean"] == ["Record"] * 6
    assert kinds["body flip + torn"] == ["Record"] * 2 + ["Damage", "SeqGap"] + \
        ["Record"] * 2 + ["Damage"]
    assert kinds["length flip + garbage"] == ["Damage"] + ["Record"] * 6 + ["Damage"]
    assert kinds["count mismatch + repeat"] == ["Record"] * 4 + ["Damage", "SeqGap", "Record",
                                                                 "Damage"]
    assert kinds["torn header"] == ["Record"] * 5 + ["Damage"]
    torn = [f for name, data in files.items() for f in findings(data, 1 << 20)
            if isinstance(f, Damage) and f.torn]
    assert [t.end - t.start for t in torn] == [221, 5]  # the two cut appends, nothing else
    gap = next(f for f in findings(files["body flip + torn"], 99) if isinstance(f, SeqGap))
    assert (gap.from_seq, gap.to_seq) == (7, 9)
    records = [f for f in findings(files["clean"], 5) if isinstance(f, Record)]
    assert [r.first_seq for r in records] == [1, 4, 7, 10, 13, 16]


def test_feeding_after_end_of_file_is_a_bug():
    scanner = Scanner()
    scanner.feed(b"")
    with pytest.raises(RuntimeError):
        scanner.feed(b"x")
