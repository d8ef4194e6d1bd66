"""How --check takes a log's sessions: one list per session stream, in seq order."""

from trio_cap.actors.replay.compare import group_sessions
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import SessionOwned, TextChunk


def _env(seq: int, stream: str, event=None) -> Envelope:
    return Envelope(seq, 0.0, stream, None, event or TextChunk(message_id="m", text=str(seq)))


def test_streams_interleaved_across_windows_keep_their_order():
    streams = ["a", "a", "", "b", "a", "b", "b", "", "a"]
    envs = [_env(i + 1, s) for i, s in enumerate(streams)]
    got = group_sessions([envs[:4], envs[4:7], envs[7:]])
    assert list(got) == ["a", "b"]
    assert [e.seq for e in got["a"]] == [1, 2, 5, 9]
    assert [e.seq for e in got["b"]] == [4, 6, 7]


def test_the_nodes_ownership_record_and_other_sessions_are_left_out():
    envs = [_env(1, "a", SessionOwned(node="n1")), _env(2, "a"), _env(3, "b"),
            _env(4, "a", SessionOwned(node="n2")), _env(5, "a")]
    assert {k: [e.seq for e in v] for k, v in group_sessions([envs]).items()} == {
        "a": [2, 5], "b": [3]}
    assert [e.seq for e in group_sessions([envs], only="a")["a"]] == [2, 5]
    assert list(group_sessions([envs], only="b")) == ["b"]


def test_reading_and_checking_leave_the_collector_as_they_found_it():
    import gc

    from trio_cap.actors.replay.check import check_sessions

    envs = [_env(1, "a"), _env(2, "b")]
    gc.unfreeze()  # whatever an earlier test in this process froze (cap's tune_gc does)
    assert gc.isenabled()
    streams = group_sessions([envs])
    check_sessions(streams)  # no session.created: nothing replayed, the heap frozen a while
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.disable()
    try:
        group_sessions([envs])
        assert not gc.isenabled()
    finally:
        gc.enable()
    gc.freeze()  # as cap does at start: stays frozen
    try:
        check_sessions(streams)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
