"""Any damage at all (flips, garbage, holes, cuts, in any number): no valid record is lost.

For every untouched record of the original log — one whose bytes no mutation
touched — a reader reads its events at their seqs, a writer that opens the
file keeps them (or refuses and changes nothing), and repair copies them.
Readers never raise and always return gap-free seqs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.events.logfiles import make_log
from trio_cap.events.kinds import LogLost, LogRecovered, TextChunk
from trio_cap.events.log import FileEventLog, LogCorrupted
from trio_cap.events.log.repair import repair

BATCHES, PER = 8, 3
_clean: dict[str, tuple[bytes, list[tuple[int, int]]]] = {}


def clean_log() -> tuple[bytes, list[tuple[int, int]]]:
    if "log" not in _clean:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "c.caplog"
            spans = make_log(path, BATCHES, PER)
            _clean["log"] = (path.read_bytes(), spans)
    return _clean["log"]


mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(8, 10_000), st.integers(1, 255)),
    st.tuples(st.just("insert"), st.integers(8, 10_000), st.binary(min_size=1, max_size=80)),
    st.tuples(st.just("delete"), st.integers(8, 10_000), st.integers(1, 200)),
    st.tuples(st.just("cut"), st.integers(8, 10_000), st.just(0)),
)


def apply(data: bytes, spans, mutations) -> tuple[bytes, list[int]]:
    """The damaged bytes and the indexes of records no mutation touched."""
    buf = bytearray(data)
    origin = list(range(len(buf)))  # origin[i]: original offset of byte i (-1: inserted)
    flipped: set[int] = set()
    for kind, at, arg in mutations:
        at = 8 + (at - 8) % max(len(buf) - 8, 1)
        if at >= len(buf):
            continue  # nothing after the magic left to damage
        if kind == "flip":
            buf[at] ^= arg
            flipped.add(origin[at])
        elif kind == "insert":
            buf[at:at] = arg
            origin[at:at] = [-1] * len(arg)
        elif kind == "delete":
            del buf[at : at + arg]
            del origin[at : at + arg]
        else:
            del buf[at:]
            del origin[at:]
    where = {o: i for i, o in enumerate(origin) if o >= 0}
    kept = []
    for k, (start, end) in enumerate(spans):
        i = where.get(start)
        if i is not None and origin[i : i + end - start] == list(range(start, end)) and \
                not flipped.intersection(range(start, end)):
            kept.append(k)
    return bytes(buf), kept


def expected(kept: list[int]) -> dict[int, str]:
    return {k * PER + j + 1: f"event number {k * PER + j}" for k in kept for j in range(PER)}


def check_has(envs, want: dict[int, str]) -> None:
    got = {e.seq: e.event.text for e in envs if isinstance(e.event, TextChunk)}
    missing = {seq: text for seq, text in want.items() if got.get(seq) != text}
    assert not missing, missing


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations=st.lists(mutation, min_size=1, max_size=4))
def test_no_untouched_record_is_ever_lost(mutations):
    data, spans = clean_log()
    damaged, kept = apply(data, spans, mutations)
    want = expected(kept)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "d.caplog"
        path.write_bytes(damaged)

        reader = FileEventLog(path, readonly=True)
        envs = reader.read()
        reader.close()
        assert [e.seq for e in envs] == list(range(1, len(envs) + 1))
        check_has(envs, want)

        report = repair(path, Path(tmp) / "r.caplog")
        if want:
            fixed = FileEventLog(Path(tmp) / "r.caplog")  # opens for writing
            copied = fixed.read()
            trio.run(fixed.aclose)
            check_has(copied, want)
            assert all(isinstance(e.event, TextChunk | LogLost) for e in copied)
        assert report.recovered or not want

        try:
            writer = FileEventLog(path)
        except LogCorrupted:
            assert path.read_bytes() == damaged
            return
        after = writer.read()
        trio.run(writer.aclose)
        check_has(after, want)
        if writer.recovered is not None:  # a cut happened: only of a torn final append
            assert path.read_bytes().startswith(damaged[: writer.recovered.at_offset])
            assert isinstance(after[-1].event, LogRecovered)
