"""The embedding API inside someone else's Trio program, and replay of what it logged."""

import msgspec
import trio
import trio.testing

from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.events.clock import StepClock
from trio_cap.events.log import FileEventLog
from trio_cap.events.projections import forget_finished
from trio_cap.events.projections.sessions import TERMINAL_STATUSES
from trio_cap.events.replay import replay


async def test_runs_in_a_callers_nursery_and_cancelling_the_caller_ends_every_session_cleanly(
    tmp_path, autojump_clock
):
    path = tmp_path / "run.caplog"
    started = []
    with trio.CancelScope() as app_scope:
        async with trio.open_nursery() as app_nursery:

            async def app_service(task_status=trio.TASK_STATUS_IGNORED):
                async with open_orchestrator(path, ids=SequentialIds()) as orch:
                    for i in range(3):
                        s = await orch.start_session(cwd=tmp_path)
                        await s.inject(f"wait {100 + i}")  # three long turns in flight
                        started.append(s.id)
                    await orch.wait_until(lambda st: all(
                        st.sessions.sessions[sid].status == "working" for sid in started))
                    task_status.started(orch)
                    await trio.sleep_forever()

            orch = await app_nursery.start(app_service)
            assert orch.system.nursery is not app_nursery  # its own nursery, inside ours
            app_scope.cancel()  # the caller shuts down

    log = FileEventLog(path, readonly=True)
    assert log.recovered is None  # closed cleanly: nothing torn
    state = replay(log)
    assert sorted(state.sessions.sessions) == sorted(started)
    for view in state.sessions.sessions.values():
        assert view.status == "cancelled"
    assert trio.current_time() < 100  # nobody waited for the long turns


async def test_live_projections_equal_the_ones_replayed_from_the_file(tmp_path):
    path = tmp_path / "multi.caplog"
    async with open_orchestrator(path, clock=StepClock(), ids=SequentialIds()) as orch:
        a = await orch.start_session(cwd=tmp_path, permissions="allow")
        b = await orch.start_session(cwd=tmp_path, human=True)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.run_turn, "plan: x; y\nwrite a.txt: A\nrun: cat a.txt")
            nursery.start_soon(b.inject, "ask: colour? [red|blue]\nthink: hmm")
        await b.wait_status("input_required")
        await a.run_turn("fail: rate_limit")
        await a.close()
        await orch.wait_until(lambda s: s.last_seq == orch.log.last_seq)
        live = msgspec.to_builtins(orch.state)
        a_detail = msgspec.to_builtins(orch.session_state(a.id))
        mid_seq = orch.log.last_seq // 2
        live_mid = msgspec.to_builtins(replay(orch.log, mid_seq))
    # b was still waiting on its ask when the orchestrator closed; a had failed
    replayed = replay(FileEventLog(path, readonly=True))
    statuses = {sid: v.status for sid, v in replayed.sessions.sessions.items()}
    assert statuses == {a.id: "failed", b.id: "cancelled"}
    assert all(s in TERMINAL_STATUSES for s in statuses.values())
    # everything the live view held before shutdown is what the file replays to at that seq
    # (the live view keeps only the summary of a session that has ended: a's detail is in
    # the log, and the orchestrator folds it from there on demand)
    at_close = replay(FileEventLog(path, readonly=True), live["last_seq"])
    full = msgspec.to_builtins(at_close)
    assert msgspec.to_builtins(forget_finished(at_close)) == live
    assert a.id not in live["transcript"]["messages"] and b.id in live["transcript"]["messages"]
    for part, table in (("transcript", "messages"), ("audit", "by_stream")):
        # a's detail, folded from its own stream alone, is what the whole log holds of it
        assert a_detail[part][table][a.id] == full[part][table][a.id]
    assert msgspec.to_builtins(replay(FileEventLog(path, readonly=True), mid_seq)) == live_mid
    assert live["pending"]["asks"][b.id]  # the pending ask was visible live
