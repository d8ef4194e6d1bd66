"""The turn/idle timeout rules, with plain numbers for time (actors/session/timers.py)."""

import pytest

from trio_cap.actors.session.timers import Timeouts, TurnTimer


def timer(turn=None, idle=None, grace=5.0) -> TurnTimer:
    return TurnTimer(Timeouts(turn=turn, idle=idle, grace=grace))


def test_nothing_expires_without_a_turn_or_without_limits():
    t = timer(turn=10, idle=3)
    assert t.deadline() is None and t.expire(1e9) is None
    off = timer(turn=0, idle=None)
    off.observe(0, turn=1, waiting=False, activity=False)
    assert off.deadline() is None and off.expire(1e9) is None
    assert not Timeouts(turn=0, idle=0).enabled and Timeouts(idle=1).enabled


def test_idle_restarts_on_every_agent_event_and_fires_once_then_hard_after_the_grace():
    t = timer(idle=3, grace=2)
    t.observe(0, turn=1, waiting=False, activity=False)
    assert t.deadline() == 3
    t.observe(2, turn=1, waiting=False, activity=True)
    assert t.deadline() == 5 and t.expire(4.9) is None
    soft = t.expire(5)
    assert soft is not None and (soft.code, soft.hard) == ("idle_timeout", False)
    assert "3 s" in soft.message and "turn 1" in soft.message
    assert t.expire(6) is None  # fires once
    t.observe(6, turn=1, waiting=False, activity=True)  # agent talks, turn still not over
    assert t.deadline() == 7
    hard = t.expire(7)
    assert hard is not None and hard.hard and hard.code == "idle_timeout"
    assert "within 2 s" in hard.message
    assert t.deadline() is None and t.expire(100) is None


def test_idle_is_paused_while_waiting_on_a_human_but_the_turn_limit_is_not():
    t = timer(turn=100, idle=3)
    t.observe(0, turn=1, waiting=False, activity=False)
    t.observe(1, turn=1, waiting=True, activity=True)
    assert t.deadline() == 100  # only the turn limit runs while a human decides
    assert t.expire(50) is None
    t.observe(60, turn=1, waiting=False, activity=False)  # resumed: idle restarts
    assert t.deadline() == 63
    fired = t.expire(63)
    assert fired is not None and fired.code == "idle_timeout"


def test_the_turn_limit_counts_total_time_even_with_a_chatty_agent():
    t = timer(turn=10, idle=3)
    t.observe(0, turn=1, waiting=False, activity=False)
    for now in range(1, 10):
        t.observe(now, turn=1, waiting=False, activity=True)
        assert t.expire(now) is None
    fired = t.expire(10)
    assert fired is not None and fired.code == "turn_timeout" and "10 s" in fired.message


@pytest.mark.parametrize("between", [None, 2])
def test_a_new_turn_starts_its_clocks_afresh(between):
    t = timer(turn=10, idle=3)
    t.observe(0, turn=1, waiting=False, activity=False)
    assert t.expire(3) is not None
    if between is None:
        t.observe(4, turn=None, waiting=False, activity=False)
        assert t.deadline() is None
    else:
        t.observe(4, turn=between, waiting=False, activity=True)  # queued input: next turn
    t.observe(4, turn=2, waiting=False, activity=False)
    assert t.deadline() == 7
    again = t.expire(7)
    assert again is not None and not again.hard and "turn 2" in again.message


def test_fractional_limits_are_shown_as_given():
    t = timer(idle=0.25)
    t.observe(0, turn=1, waiting=False, activity=False)
    fired = t.expire(1)
    assert fired is not None and "0.25 s" in fired.message
