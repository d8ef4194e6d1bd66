"""Asks across a resume (``reconcile``): an ask answered in a turn the crash cut is answered
the same way when the re-run turn asks it again; one still waiting is asked again."""

from __future__ import annotations

from trio_cap.actors.replay.resume import reconcile
from trio_cap.actors.session.machine import CARRIED, Emit, Send, SessionMachine
from trio_cap.actors.session.policy import PermissionPolicy
from trio_cap.events.kinds import (
    AskAnswered,
    AskUser,
    AskUserAnswer,
    CapSessionReady,
    InputInjected,
    RunResumed,
    SessionConfig,
    SessionCreated,
    SessionInputRequired,
    SessionTurnEnded,
)

QUESTION = AskUser(ask_id="a1", prompt="Which colour?", form={"enum": ["blue", "red"]})


def machine() -> SessionMachine:
    created = SessionCreated(session_id="s", cwd="/w", agent="a", binding="inproc")
    m = SessionMachine(created, SessionConfig(cwd="/w"), PermissionPolicy("ask", False, True))
    m.create()
    m.start()
    m.on_agent([CapSessionReady()], 2)
    return m


def events(outputs) -> list:
    return [e for o in outputs if isinstance(o, Emit) for e in o.events]


def crash_and_resume(m: SessionMachine, texts: dict[int, str]) -> None:
    """What ``cap run --resume`` does to the machine the log rebuilt, then a new agent."""
    reconcile(m, RunResumed(session_id="s", how="restarted", after_seq=99), texts, m.config)
    m.start()
    m.on_agent([CapSessionReady()], 100)


def ask(m: SessionMachine, ask_id: str, seq: int, prompt: str = QUESTION.prompt) -> list:
    return m.on_agent([AskUser(ask_id=ask_id, prompt=prompt, form=QUESTION.form)], seq)


def test_an_ask_answered_in_the_cut_turn_is_answered_from_the_log_when_asked_again():
    m = machine()
    m.on_command(InputInjected(text="paint it"), 3)
    ask(m, "a1", 4)
    m.on_command(AskAnswered(ask_id="a1", value="blue", by="human"), 5)
    crash_and_resume(m, {3: "paint it"})
    out = ask(m, "b7", 101)
    assert events(out) == [AskAnswered(ask_id="b7", value="blue", by=CARRIED,
                                       meta={"cap.answered_as": "a1"})]
    assert [o.frame for o in out if isinstance(o, Send)] == [AskUserAnswer(ask_id="b7",
                                                                           value="blue")]
    # once: the same question a second time in the re-run goes to the person
    again = events(ask(m, "b8", 102))
    assert [type(e) for e in again] == [SessionInputRequired]


def test_a_different_question_or_one_still_waiting_goes_to_the_person_again():
    m = machine()
    m.on_command(InputInjected(text="paint it"), 3)
    ask(m, "a1", 4)
    m.on_command(AskAnswered(ask_id="a1", value="blue", by="human"), 5)
    ask(m, "a2", 6, prompt="Which brush?")  # waiting when the run died
    crash_and_resume(m, {3: "paint it"})
    assert [type(e) for e in events(ask(m, "b1", 101, prompt="Which brush?"))] == [
        SessionInputRequired]
    assert m.pending_asks.keys() == {"b1"}


def test_a_turn_that_ended_before_the_crash_carries_nothing():
    m = machine()
    m.on_command(InputInjected(text="one"), 3)
    ask(m, "a1", 4)
    m.on_command(AskAnswered(ask_id="a1", value="blue", by="human"), 5)
    m.on_turn_ended("end_turn")
    m.on_command(InputInjected(text="two"), 7)
    crash_and_resume(m, {3: "one", 7: "two"})
    assert [type(e) for e in events(ask(m, "b1", 101))] == [SessionInputRequired]


def test_a_second_crash_still_carries_the_first_answer_and_a_finished_rerun_drops_it():
    m = machine()
    m.on_command(InputInjected(text="paint it"), 3)
    ask(m, "a1", 4)
    m.on_command(AskAnswered(ask_id="a1", value="red", by="human"), 5)
    crash_and_resume(m, {3: "paint it"})
    ask(m, "b1", 101)
    crash_and_resume(m, {3: "paint it"})
    (answer,) = events(ask(m, "c1", 201))
    assert answer.value == "red" and answer.meta == {"cap.answered_as": "a1"}
    assert events(m.on_turn_ended("end_turn"))[0] == SessionTurnEnded(turn=1,
                                                                      stop_reason="end_turn")
    assert m.carried == {} and m.answered == []
