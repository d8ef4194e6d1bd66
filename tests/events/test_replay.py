"""replay() folds a window at a time and equals one fold over everything."""

import msgspec

from tests.events.logfiles import flip, make_log
from trio_cap.events.log import FileEventLog
from trio_cap.events.log.records import HEADER_SIZE
from trio_cap.events.projections import fold, initial_state
from trio_cap.events.replay import replay


def test_windows_fold_to_the_same_state_as_one_fold(tmp_path):
    path = tmp_path / "x.caplog"
    make_log(path, batches=20, per_batch=7)
    log = FileEventLog(path, readonly=True)
    whole = fold(initial_state(), log.read())
    windows = []
    state = replay(log, batch=9, seen=windows.append)
    assert msgspec.to_builtins(state) == msgspec.to_builtins(whole)
    assert [len(w) for w in windows] == [9] * 15 + [5]
    assert replay(log, until=50, batch=4).last_seq == 50
    skipped = replay(log, skip=("transcript",))
    assert skipped.transcript == initial_state().transcript and skipped.last_seq == 140
    assert whole.transcript != initial_state().transcript


def test_a_damaged_log_replays_past_the_damage(tmp_path):
    path = tmp_path / "x.caplog"
    spans = make_log(path)
    flip(path, spans[1][0] + HEADER_SIZE + 4)
    seen = []
    state = replay(FileEventLog(path, readonly=True), seen=seen.extend)
    assert state.last_seq == 18
    assert [e.kind for e in seen[3:6]] == ["log.lost"] * 3
