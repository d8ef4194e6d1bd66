"""Acknowledged means kept: every class of damage, as a writer, a reader and repair see it.

A writer may cut only a provably torn final append; everything else is
refused with the byte offset and the last good seq, and the file is left
byte for byte as it was.  A read-only open never cuts, steps over damage to
every later valid record and reports each span.  ``repair`` copies every
valid record and fills lost seqs with ``log.lost`` placeholders.
"""

from __future__ import annotations

import random

import pytest
import trio

from tests.events.logfiles import (
    all_texts,
    chunk,
    crc_valid_record,
    envelope_payload,
    flip,
    make_log,
    record_at,
    replace_record,
    set_length,
    texts,
)
from trio_cap.events.kinds import LogLost, LogUndecodable
from trio_cap.events.log import FileEventLog, LogCorrupted
from trio_cap.events.log.records import HEADER_SIZE, MAX_RECORD
from trio_cap.events.log.repair import repair
from trio_cap.events.log.scan import Damage, SeqGap


def refused(path, offset: int, after_seq: int) -> LogCorrupted:
    before = path.read_bytes()
    with pytest.raises(LogCorrupted) as info:
        FileEventLog(path)
    assert path.read_bytes() == before, "a refused open changed the file"
    assert info.value.offset == offset and info.value.seq == after_seq
    assert f"byte {offset}" in str(info.value) and f"after seq {after_seq}" in str(info.value)
    assert "cap log repair" in str(info.value)
    return info.value


_READERS: list[FileEventLog] = []


@pytest.fixture(autouse=True)
def _close_readers():
    """Readers a test keeps for its asserts are closed after it: no descriptor outlives it."""
    yield
    while _READERS:
        _READERS.pop().close()


def read_only(path):
    log = FileEventLog(path, readonly=True)
    _READERS.append(log)
    envs = log.read()
    assert [e.seq for e in envs] == list(range(1, len(envs) + 1)), "readers show no seq gaps"
    return log, envs


def repaired(tmp_path, path):
    out = tmp_path / "repaired.caplog"
    report = repair(path, out)
    log = FileEventLog(out)  # a writer opens it cleanly: nothing left to refuse
    envs = log.read()
    assert [e.seq for e in envs] == list(range(1, len(envs) + 1))
    trio.run(log.aclose)
    return report, envs


def lost_seqs(envs) -> list[int]:
    return [e.seq for e in envs if isinstance(e.event, LogLost)]


@pytest.mark.parametrize("which", [0, 2, 5])
@pytest.mark.parametrize("mask", [0x01, 0x80, 0x100, 0x10000, 0x1000000])
def test_a_damaged_length_field_is_refused_and_the_record_is_still_read(tmp_path, which, mask):
    path = tmp_path / "x.caplog"
    spans = make_log(path)
    offset = spans[which][0]
    length = record_at(path.read_bytes(), offset)[0]
    set_length(path, offset, length ^ mask)
    refused(path, offset, which * 3)
    log, envs = read_only(path)
    assert texts(envs) == all_texts()  # the intact body is found and read
    assert len(log.damage) == 1 and "length field is damaged" in log.damage[0].detail
    report, envs = repaired(tmp_path, path)
    assert texts(envs) == all_texts() and report.lost == []


def test_a_body_flip_mid_log_then_a_torn_tail_is_refused(tmp_path):
    path = tmp_path / "x.caplog"
    spans = make_log(path)
    flip(path, spans[2][0] + HEADER_SIZE + 6)
    path.write_bytes(path.read_bytes()[:-5])  # and the last append is torn
    refused(path, spans[2][0], 6)
    log, envs = read_only(path)
    assert texts(envs) == all_texts(5, skip=range(6, 9))
    assert lost_seqs(envs) == [7, 8, 9]
    assert [type(d) for d in log.damage] == [Damage, SeqGap, Damage]
    assert log.damage[-1].torn and log.recovered.at_offset == spans[5][0]
    report, envs = repaired(tmp_path, path)
    assert texts(envs) == all_texts(5, skip=range(6, 9)) and report.lost == [(7, 9)]
    assert [(d.start, d.end) for d in report.skipped] == [spans[2], (spans[5][0], spans[5][1] - 5)]


@pytest.mark.parametrize("garbage", [b"\x00" * 40, b"hello world\n" * 9, bytes(range(256))])
def test_appended_garbage_is_never_taken_for_a_torn_tail(tmp_path, garbage):
    path = tmp_path / "x.caplog"
    spans = make_log(path)
    path.write_bytes(path.read_bytes() + garbage)
    refused(path, spans[-1][1], 18)
    flip(path, spans[1][0] + HEADER_SIZE + 9)
    refused(path, spans[1][0], 3)
    log, envs = read_only(path)
    assert texts(envs) == all_texts(skip=range(3, 6))
    assert not log.damage[-1].torn and log.recovered is None
    report, envs = repaired(tmp_path, path)
    assert texts(envs) == all_texts(skip=range(3, 6))
    assert report.skipped[-1].start == spans[-1][1]


def test_a_header_whose_count_disagrees_with_its_payload_is_corrupt(tmp_path):
    path = tmp_path / "x.caplog"
    spans = make_log(path)
    _, _, first, count, payload = record_at(path.read_bytes(), spans[3][0])
    replace_record(path, spans[3], crc_valid_record(first, count + 1, payload))  # CRC is valid
    refused(path, spans[3][0], 9)
    log, envs = read_only(path)
    assert "does not hold the 4 events" in log.damage[0].detail
    assert texts(envs) == all_texts(skip=range(9, 12)) and lost_seqs(envs) == [10, 11, 12]
    report, envs = repaired(tmp_path, path)
    assert texts(envs) == all_texts(skip=range(9, 12)) and report.lost == [(10, 12)]


def test_a_header_whose_first_seq_disagrees_with_its_payload_is_corrupt(tmp_path):
    path = tmp_path / "x.caplog"
    spans = make_log(path)
    _, _, first, count, payload = record_at(path.read_bytes(), spans[5][0])
    replace_record(path, spans[5], crc_valid_record(first + 1, count, payload))
    refused(path, spans[5][0], 15)
    log, envs = read_only(path)
    assert "payload starts at seq 16" in log.damage[0].detail and not log.damage[0].torn
    assert texts(envs) == all_texts(skip=range(15, 18))


def test_payload_seqs_that_disagree_after_the_first_are_reported_not_accepted(tmp_path):
    path = tmp_path / "x.caplog"
    spans = make_log(path)
    raw = [[4, 1.0, "s", None, {"kind": "cap.text_chunk", "message_id": "m", "text": "a"}],
           [9, 1.0, "s", None, {"kind": "cap.text_chunk", "message_id": "m", "text": "b"}],
           [6, 1.0, "s", None, {"kind": "cap.text_chunk", "message_id": "m", "text": "c"}]]
    replace_record(path, spans[1], crc_valid_record(4, 3, envelope_payload(raw)))
    _, envs = read_only(path)
    assert lost_seqs(envs) == [4, 5, 6]
    assert "the payload holds 3 (seqs 4, 9, 6)" in envs[3].event.reason
    report, envs = repaired(tmp_path, path)
    assert report.lost == [(4, 6)] and report.unreadable
    assert texts(envs) == all_texts(skip=range(3, 6))


def test_a_crc_valid_payload_that_does_not_decode_becomes_placeholders(tmp_path):
    path = tmp_path / "x.caplog"
    spans = make_log(path)
    payload = b"\x93\x95\x04" + b"\xc1" * 30  # array of 3, envelope, seq 4, then no msgpack
    replace_record(path, spans[1], crc_valid_record(4, 3, payload))
    _, envs = read_only(path)
    assert lost_seqs(envs) == [4, 5, 6] and "does not decode" in envs[3].event.reason
    assert texts(envs) == all_texts(skip=range(3, 6))
    report, envs = repaired(tmp_path, path)
    assert report.lost == [(4, 6)] and texts(envs) == all_texts(skip=range(3, 6))


def test_an_unknown_kind_is_read_raw_and_copied_verbatim_by_repair(tmp_path):
    path = tmp_path / "x.caplog"
    spans = make_log(path)
    future = {"kind": "cap.hologram", "frames": [1, 2], "note": "from a newer trio-cap"}
    raw = [[4, 1.5, "s", None, future],
           [5, 1.5, "s", 4, {"kind": "cap.text_chunk", "message_id": "m", "text": "five"}],
           [6, 1.5, "s", None, {"kind": "cap.text_chunk", "message_id": 7}]]  # bad field
    replace_record(path, spans[1], crc_valid_record(4, 3, envelope_payload(raw)))
    writer = FileEventLog(path)  # valid framing: a writer opens and appends after it
    assert trio.run(writer.append, [chunk(99)]) == 19
    trio.run(writer.aclose)
    _, envs = read_only(path)
    assert isinstance(envs[3].event, LogUndecodable)
    assert envs[3].event.original_kind == "cap.hologram" and envs[3].event.payload == future
    assert envs[4].event.text == "five" and envs[4].cause == 4
    assert envs[5].event.original_kind == "cap.text_chunk" and envs[5].event.error
    report, copied = repaired(tmp_path, path)
    assert report.lost == [] and len(report.unreadable) == 1
    assert [e.event for e in copied] == [e.event for e in envs]


def test_a_torn_header_is_cut_by_a_writer_and_reported_by_a_reader(tmp_path):
    path = tmp_path / "x.caplog"
    spans = make_log(path)
    for cut in range(1, HEADER_SIZE + 3):
        path.write_bytes(path.read_bytes()[: spans[-1][1]] + b"\x00" * 0)
        data = path.read_bytes()
        torn_header = data[spans[-1][0] : spans[-1][0] + cut]
        path.write_bytes(data[: spans[-1][0]] + torn_header)
        log, envs = read_only(path)
        assert texts(envs) == all_texts(5) and log.recovered.dropped_bytes == cut
        writer = FileEventLog(path)
        assert writer.recovered.dropped_bytes == cut and writer.last_seq == 16
        trio.run(writer.aclose)
        make_log(path.with_suffix(".tmp"))
        path.write_bytes(path.with_suffix(".tmp").read_bytes())
        path.with_suffix(".tmp").unlink()


def test_a_tail_longer_than_one_maximal_append_is_never_torn(tmp_path):
    path = tmp_path / "x.caplog"
    spans = make_log(path)
    data = path.read_bytes()
    header = bytearray(data[spans[-1][0] : spans[-1][0] + HEADER_SIZE + 13])
    header[0:4] = (MAX_RECORD).to_bytes(4, "little")  # claims the largest record there is
    with path.open("ab") as f:
        f.write(bytes(header))
        f.write(b"\x00" * (MAX_RECORD + 16))  # and there is more than that
    refused(path, spans[-1][1], 18)


def test_records_out_of_seq_order_are_skipped_never_read_twice(tmp_path):
    path = tmp_path / "x.caplog"
    spans = make_log(path)
    data = path.read_bytes()
    path.write_bytes(data + data[spans[0][0] : spans[0][1]])  # seqs 1-3 again, CRC-valid
    refused(path, spans[-1][1], 18)
    log, envs = read_only(path)
    assert texts(envs) == all_texts() and "repeats seqs 1–3" in log.damage[0].detail
    report, envs = repaired(tmp_path, path)
    assert texts(envs) == all_texts() and report.skipped[0].detail.endswith("1–3")


def test_a_seq_gap_with_no_damaged_bytes_is_refused_and_filled_by_repair(tmp_path):
    path = tmp_path / "x.caplog"
    spans = make_log(path)
    data = path.read_bytes()
    path.write_bytes(data[: spans[2][0]] + data[spans[3][0] :])  # seqs 7-9 never written
    refused(path, spans[2][0], 6)
    log, envs = read_only(path)
    assert lost_seqs(envs) == [7, 8, 9] and isinstance(log.damage[0], SeqGap)
    report, envs = repaired(tmp_path, path)
    assert report.lost == [(7, 9)] and texts(envs) == all_texts(skip=range(6, 9))


@pytest.mark.parametrize(("field", "at"), [("first seq", 9), ("count", 16)])
@pytest.mark.parametrize("which", [0, 3, 5])
def test_a_damaged_count_or_first_seq_field_is_refused_and_the_record_is_still_read(
        tmp_path, field, at, which):
    path = tmp_path / "x.caplog"
    spans = make_log(path)
    flip(path, spans[which][0] + at, 0x04)  # the CRC covers the field: the record fails it
    refused(path, spans[which][0], which * 3)
    log, envs = read_only(path)
    assert texts(envs) == all_texts() and lost_seqs(envs) == []
    assert f"record's {field} field is damaged" in log.damage[0].detail
    report, envs = repaired(tmp_path, path)
    assert texts(envs) == all_texts() and report.lost == []


def test_a_damaged_body_at_the_first_record_keeps_the_rest(tmp_path):
    path = tmp_path / "x.caplog"
    spans = make_log(path)
    flip(path, spans[0][0] + HEADER_SIZE + 12)
    refused(path, spans[0][0], 0)
    _, envs = read_only(path)
    assert texts(envs) == all_texts(skip=range(3)) and lost_seqs(envs) == [1, 2, 3]
    report, envs = repaired(tmp_path, path)
    assert report.lost == [(1, 3)] and len(envs) == 18


def test_repair_refuses_an_existing_output_and_leaves_none_when_nothing_is_recovered(tmp_path):
    from trio_cap.events.log.repair import RepairError

    path = tmp_path / "x.caplog"
    make_log(path)
    out = tmp_path / "out.caplog"
    out.write_bytes(b"keep me")
    with pytest.raises(RepairError, match="already exists"):
        repair(path, out)
    assert out.read_bytes() == b"keep me"
    empty = tmp_path / "e.caplog"
    empty.write_bytes(path.read_bytes()[:8] + b"\xff" * 300)
    report = repair(empty, tmp_path / "none.caplog")
    assert not report.recovered and not (tmp_path / "none.caplog").exists()


def test_any_single_flipped_byte_is_refused_or_harmless_and_never_cut(tmp_path):
    """The class, not the example: every byte of a log, each with a random bit flipped."""
    path = tmp_path / "x.caplog"
    make_log(path, batches=4)
    clean = path.read_bytes()
    rng = random.Random(7)
    for offset in range(8, len(clean)):
        damaged = bytearray(clean)
        damaged[offset] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(damaged))
        try:
            log = FileEventLog(path)
        except LogCorrupted:
            assert path.read_bytes() == bytes(damaged)
        else:  # only a flip the CRC does not cover (the length field) can reach here
            pytest.fail(f"flip at byte {offset} was accepted: {log.recovered}")
        reader = FileEventLog(path, readonly=True)
        try:
            got = texts(reader.read())
            assert len(got) >= 9 and set(got) <= set(all_texts(4))
            assert reader.damage
        finally:
            reader.close()


def test_a_torn_file_header_is_reported_by_a_reader_and_rewritten_by_a_writer(tmp_path):
    path = tmp_path / "x.caplog"
    path.write_bytes(b"CAPL")
    reader = FileEventLog(path, readonly=True)
    assert reader.recovered.dropped_bytes == 4 and reader.damage[0].torn and reader.read() == []
    reader.close()
    assert path.read_bytes() == b"CAPL"
    writer = FileEventLog(path)
    assert writer.recovered.dropped_bytes == 4
    trio.run(writer.aclose)


def test_a_seq_gap_at_a_record_boundary_names_no_damaged_bytes(tmp_path):
    path = tmp_path / "x.caplog"
    spans = make_log(path)
    flip(path, spans[0][0] + HEADER_SIZE + 2)  # damage far before the gap
    data = path.read_bytes()
    path.write_bytes(data[: spans[3][0]] + data[spans[4][0] :])  # and seqs 10-12 missing
    _, envs = read_only(path)
    reasons = {e.event.reason for e in envs if isinstance(e.event, LogLost)}
    assert len(reasons) == 2
    assert any("no record" in r and f"byte {spans[3][0]}" in r for r in reasons)


def test_hostile_payloads_with_a_valid_crc_never_raise(tmp_path):
    import msgspec

    ext = msgspec.msgpack.Ext(5, b"abc")
    cases = {
        "extension value": envelope_payload([[4, 1.0, "s", None, {"kind": "cap.x", "e": ext}],
                                             [5, 1.0, "s", None, {1: 2, "kind": "cap.y"}],
                                             [6, 1.0, "s", None, "not a map"]]),
        "nested 100,000 deep": b"\x93\x95\x04\xcb" + b"\x00" * 8 + b"\xa1s\xc0"
        + b"\x91" * 100_000 + b"\xc0",
    }
    for name, payload in cases.items():
        path = tmp_path / f"{len(name)}.caplog"
        spans = make_log(path)
        replace_record(path, spans[1], crc_valid_record(4, 3, payload))
        _, envs = read_only(path)
        assert texts(envs) == all_texts(skip=range(3, 6)), name
        kinds = [e.kind for e in envs[3:6]]
        if name == "extension value":
            assert kinds == ["log.undecodable"] * 3
            assert envs[3].event.payload["e"] == {"msgpack_ext": 5, "hex": "616263"}
            assert envs[4].event.payload == {"1": 2, "kind": "cap.y"}
        else:
            assert kinds == ["log.lost"] * 3
