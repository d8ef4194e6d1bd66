"""A member's rate limit pauses it until T and the fleet resumes it then; the wait grows on
repeats and the fleet gives up after the file's number — the machine alone, the runner on
Trio's mock clock, and ``cap fleet run`` as a process."""

from __future__ import annotations

import attrs
import msgspec
import trio

from tests.fleet.helpers import cap, events
from trio_cap.actors.fleet import load_fleet, run_fleet
from trio_cap.actors.fleet.machine import Deliver, Emit, Finished, FleetMachine, Wake
from trio_cap.actors.fleet.model import Fleet, Member, RateLimit
from trio_cap.actors.fleet.ratelimit import next_delay, retry_after
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.events.kinds import CapError, SessionTurnEnded, TextChunk
from trio_cap.events.log import FileEventLog
from trio_cap.events.replay import replay

EPOCH = 1_700_000_000.0


def _machine(retries: int = 3) -> FleetMachine:
    fleet = Fleet(name="f", task="go", sessions=(Member("a"),),
                  rate_limit=RateLimit(retries=retries, backoff_s=10.0, max_backoff_s=100.0))
    return FleetMachine(fleet, {"a": "f.a"})


def _limited(m: FleetMachine, seq: int, at: float, details=None) -> list:
    out = m.observe("f.a", seq, CapError(code="rate_limit", message="429", retryable=True,
                                         details=details), at)
    return out + m.observe("f.a", seq + 1, SessionTurnEnded(turn=1, stop_reason="error"),
                           at + 1)


def _emitted(out, name):
    return [o.event for o in out if isinstance(o, Emit) and type(o.event).__name__ == name]


def test_a_rate_limit_pauses_until_t_then_the_same_message_goes_again():
    m = _machine()
    (first,) = [o for o in m.start() if isinstance(o, Deliver)]
    out = _limited(m, 10, 1000.0, {"retry_after": 30})
    (paused,) = _emitted(out, "FleetPaused")
    assert (paused.until, paused.delay_s, paused.attempt, paused.retry_after) == (
        1031.0, 30.0, 1, 30.0)
    assert Wake("a", 30.0) in out
    assert not [o for o in out if isinstance(o, Deliver | Finished)]  # waiting, not done
    assert _emitted(out, "FleetMessageConsumed")[0].stop_reason == "error"
    out = m.resume("a")
    assert _emitted(out, "FleetResumed")[0].attempt == 1
    (again,) = [o for o in out if isinstance(o, Deliver)]
    assert (again.message_id, again.text) == (first.message_id, first.text)
    # a repeat with no retry-after waits at least twice as long as the last time
    out = _limited(m, 20, 2000.0)
    assert Wake("a", 60.0) in out
    m.resume("a")
    out = m.observe("f.a", 30, TextChunk(message_id="x", text="done"), 3000.0)
    out += m.observe("f.a", 31, SessionTurnEnded(turn=3), 3000.0)
    assert out[-1] == Finished(True)


def test_it_gives_up_after_the_files_number_of_pauses_in_a_row():
    m = _machine(retries=1)
    m.start()
    assert [o for o in _limited(m, 10, 0.0) if isinstance(o, Wake)] == [Wake("a", 10.0)]
    m.resume("a")
    out = _limited(m, 20, 50.0)
    (gave_up,) = _emitted(out, "FleetGaveUp")
    assert gave_up.attempts == 2
    assert gave_up.reason == "a: rate-limited 2 times in a row (rate_limit.retries = 1): gave up"
    assert not [o for o in out if isinstance(o, Wake)]
    assert out[-1] == Finished(False, gave_up.reason)
    assert m.resume("a") == []  # a late wake does nothing


def test_the_wait_is_what_the_agent_said_in_its_own_shape():
    assert retry_after({"retry_after": "7"}, None) == 7.0
    assert retry_after({"retry_after_ms": 1500}, None) == 1.5
    assert retry_after({"status": "rejected", "resetsAt": EPOCH + 90}, EPOCH) == 90.0
    assert retry_after({"resetsAt": (EPOCH + 5) * 1000}, EPOCH) == 5.0  # milliseconds
    assert retry_after({"retryDelay": "2.5s"}, None) == 2.5
    assert retry_after({"resetsAt": EPOCH - 10}, EPOCH) == 0.0  # already past
    assert retry_after({"status": "rejected"}, EPOCH) is None
    policy = RateLimit(backoff_s=10.0, max_backoff_s=100.0)
    assert [next_delay(policy, 1, None, None), next_delay(policy, 2, None, 10.0),
            next_delay(policy, 5, None, 80.0), next_delay(policy, 1, 300.0, None)] == [
        10.0, 20.0, 100.0, 300.0]  # doubled, capped, but never less than the agent said


class _TrioTime:
    """The log's clock on Trio's (mock) clock, so ``until`` and ``at`` compare."""

    def now(self) -> float:
        return EPOCH + trio.current_time()


FLEET = '''\
name = "rl"
task = "Say hello."

[rate_limit]
retries = 3
backoff_s = 10
max_backoff_s = 600

[[session]]
id = "en"
binding = "inproc"
script = "en.toml"
'''

SCRIPT = '''\
[[turn]]
steps = [ { fail = "rate_limit", message = "429 Too Many Requests", retry_after = 30 } ]
[[turn]]
steps = [ { fail = "rate_limit", message = "429 Too Many Requests" } ]
[[turn]]
steps = [ { say = "hello" } ]
'''


async def test_the_runner_resumes_at_t_on_the_mock_clock(tmp_path, autojump_clock):
    (tmp_path / "fleet.toml").write_text(FLEET)
    (tmp_path / "en.toml").write_text(SCRIPT)
    fleet = attrs.evolve(load_fleet(tmp_path / "fleet.toml"), worktrees="dirs")
    path = tmp_path / "run.caplog"
    start = trio.current_time()
    # fsync "never": the batch policy fsyncs in a worker thread when enough *real* time
    # passed, and while a thread runs the autojump clock leaps to the next deadline (here
    # fail_after's): under load that read as a run taking an hour.  Durability is not
    # what this test is about.
    async with open_orchestrator(path, ids=SequentialIds(), clock=_TrioTime(),
                                 fsync="never") as orch:
        with trio.fail_after(3600):
            outcome = await run_fleet(orch, fleet, run_id="r1")
            await orch.caught_up()
        live = orch.state.fleets
    assert outcome.completed, outcome.reason
    assert trio.current_time() - start >= 90  # 30 s as the agent said, then 60
    log = FileEventLog(path, readonly=True)
    paused, resumed = events(log, "fleet.paused"), events(log, "fleet.resumed")
    assert [(p.event.delay_s, p.event.attempt, p.event.retry_after) for p in paused] == [
        (30.0, 1, 30.0), (60.0, 2, None)]
    for p, r in zip(paused, resumed, strict=True):
        assert p.event.until == p.at + p.event.delay_s
        assert p.event.until <= r.at < p.event.until + 1  # resumed at T, not before
    inputs = [e.event.text for e in events(log, "input.injected", "rl.en")]
    assert inputs == ["Say hello."] * 3  # the same message, delivered again
    assert live.fleets["rl"].members["en"].paused_until is None
    assert msgspec.to_builtins(replay(log).fleets) == msgspec.to_builtins(live)
    assert [r.detail for r in live.fleets["rl"].audit if r.kind.startswith("fleet.res")] == [
        "resumed (attempt 1)", "resumed (attempt 2)"]
    # while paused, the projection (and cap fleet status) says until when
    view = replay(log, until=paused[0].seq).fleets.fleets["rl"]
    assert view.members["en"].paused_until == paused[0].event.until
    copy = FileEventLog(tmp_path / "paused.caplog")
    for env in log.read(1):
        if env.seq <= paused[0].seq:
            await copy.append([env.event], stream=env.stream, cause=env.cause)
    await copy.aclose()
    log.close()
    status = await trio.run_process(
        [*_cap(), "fleet", "status", "paused.caplog"], cwd=tmp_path, capture_stdout=True,
        capture_stderr=True, check=False)
    import time

    until = time.strftime("%H:%M:%S", time.localtime(paused[0].event.until))
    assert status.returncode == 0, status.stderr
    assert f"en               rate-limited until {until};" in status.stdout.decode()


def _cap() -> list[str]:
    from tests.fleet.helpers import CAP

    return CAP


def test_cap_fleet_run_gives_up_in_one_line(tmp_path):
    (tmp_path / "fleet.toml").write_text(
        'name = "rl"\ntask = "fail: rate_limit retry_after=0.05"\nworktrees = "dirs"\n'
        '[rate_limit]\nretries = 1\nbackoff_s = 0.05\n[[session]]\nid = "en"\n'
        'binding = "inproc"\n')
    run = cap("fleet", "run", "fleet.toml", "--headless", "--log", "run.caplog", cwd=tmp_path)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    (line,) = run.stderr.splitlines()
    assert line.startswith("cap fleet: rl failed: en: rate-limited 2 times in a row "
                           "(rate_limit.retries = 1): gave up")
    assert "en: rate-limited (attempt 1): paused 0.05 s, the agent said 0.05 s, until " \
        in run.stdout
    assert "en: resumed after its rate limit (attempt 1)" in run.stdout
    assert "en: gave up: en: rate-limited 2 times" in run.stdout


def test_rate_limit_problems_are_listed_with_the_file(tmp_path):
    (tmp_path / "fleet.toml").write_text(
        'name = "x"\ntask = "t"\nworktrees = "dirs"\n[rate_limit]\nretries = -1\n'
        'backoff_s = 100\nmax_backoff_s = 10\nwait = 1\n[[session]]\nid = "a"\n')
    run = cap("fleet", "validate", "fleet.toml", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        "cap: error: fleet.toml: rate_limit.wait: unknown key (rate_limit takes backoff_s, "
        "max_backoff_s, retries)",
        "fleet.toml: rate_limit.retries: expected a whole number >= 0, got -1",
        "fleet.toml: rate_limit.backoff_s: 100 s is more than max_backoff_s (10 s)"]


def test_a_race_lost_while_paused_does_not_keep_the_fleet_waiting():
    from trio_cap.actors.fleet.model import Race

    fleet = Fleet(name="f", task="go", sessions=(Member("a"), Member("b")),
                  routes=(Race(("a", "b")),))
    m = FleetMachine(fleet, {"a": "f.a", "b": "f.b"})
    m.start()
    out = m.observe("f.a", 10, CapError(code="rate_limit", message="429"), 0.0)
    out += m.observe("f.a", 11, SessionTurnEnded(turn=1, stop_reason="error"), 0.0)
    assert [o for o in out if isinstance(o, Wake)]
    out = m.observe("f.b", 20, SessionTurnEnded(turn=1), 5.0)  # b wins meanwhile
    assert out[-1] == Finished(True)  # a's task was withdrawn: nothing to wait for
    assert m.resume("a") == []
