"""The live view's keyboard, without a terminal: what each key means to the desk, and how
typed bytes become keys."""

from __future__ import annotations

from trio_cap.actors.cli.fleet_desk import Answer, Decide, Desk, Interrupt, Question
from trio_cap.actors.cli.fleet_keys import BACKSPACE, ENTER, ESCAPE, split_keys


def _typed(desk: Desk, text: str) -> list:
    out = []
    for key in split_keys(text):
        out += desk.key(key)
    return out


def _desk() -> Desk:
    desk = Desk(("writer", "reviewer"))
    desk.asked(Question("writer", "f.writer", "permission", "perm_1", "Write a.txt"))
    desk.asked(Question("reviewer", "f.reviewer", "ask", "ask_1", "Colour?", ("red", "blue")))
    desk.asked(Question("writer", "f.writer", "permission", "perm_1", "Write a.txt"))  # again
    return desk


def test_questions_are_answered_in_the_order_they_were_asked():
    desk = _desk()
    assert len(desk.questions) == 2
    assert _typed(desk, "x2") == []  # neither is a permission's key
    assert _typed(desk, "a") == [Decide("f.writer", "perm_1", "allow_always")]
    assert _typed(desk, "2") == [Answer("f.reviewer", "ask_1", "blue")]
    assert desk.front is None and _typed(desk, "y") == []


def test_a_typed_answer_must_be_one_of_the_choices_and_esc_declines():
    desk = _desk()
    desk.settled("f.writer", "perm_1")  # decided elsewhere meanwhile
    assert _typed(desk, "rgreen\n") == []
    assert desk.note == "answer one of: red, blue" and desk.typing == "answer"
    assert _typed(desk, "red\n") == [Answer("f.reviewer", "ask_1", "red")]
    desk.asked(Question("writer", "f.writer", "ask", "ask_2", "Why?"))
    assert _typed(desk, "rbecause\x1b") == [Answer("f.writer", "ask_2", None)]
    desk.asked(Question("writer", "f.writer", "ask", "ask_3", "Why?"))
    assert _typed(desk, "rno reason" + "\x7f" * 10 + "because\n") == [
        Answer("f.writer", "ask_3", "because")]


def test_a_question_withdrawn_while_its_answer_is_typed_stops_the_typing():
    desk = Desk(("writer",))
    desk.asked(Question("writer", "f.writer", "ask", "ask_1", "Why?"))
    _typed(desk, "rhalf an ans")
    desk.settled("f.writer")  # the session ended
    assert (desk.typing, desk.line, desk.front) == ("", "", None)


def test_an_interrupt_names_a_member_by_number_or_id_then_takes_the_correction():
    desk = _desk()
    assert _typed(desk, "i2\nfaster\n") == [Interrupt("reviewer", "faster")]
    assert _typed(desk, "iwriter\nin French\n") == [Interrupt("writer", "in French")]
    assert _typed(desk, "ized\n") == [] and desk.note == "no member 'zed'"
    assert _typed(desk, "i1\n\x1b") == [] and desk.typing == ""
    assert _typed(desk, "i1\n\n") == [] and desk.typing == ""  # an empty correction
    assert len(desk.questions) == 2  # none of that answered anything


def test_bytes_become_keys_and_escape_sequences_are_dropped():
    assert split_keys("ab\r\n\x7f\b\x1b") == ["a", "b", ENTER, ENTER, BACKSPACE, BACKSPACE,
                                               ESCAPE]
    assert split_keys("\x1b[A\x1b[1;5Cx\x1bOPy\x04é") == ["x", "y", "é"]
