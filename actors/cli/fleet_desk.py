"""The person at ``cap fleet run``'s keyboard: the members' questions waiting for them,
and what each key they type means.  No I/O: the live view feeds it the questions the log
shows and the keys typed, and carries out the actions it answers — each one a command to
a member's session (``permission.decided`` / ``ask.answered`` by ``human``) or a
``FleetHandle.interrupt`` (``fleet.interrupt``), so every decision is an event in the log,
on the same path as the embedding API's.

Keys (shown in the view):

* a permission request at the front: ``y`` allow once, ``a`` allow always, ``n`` deny;
* an ask at the front: a digit picks one of its choices, ``r`` types an answer (Enter
  sends it; empty, or Esc, declines), ``d`` declines;
* ``i`` interrupts a member: its number or id, Enter, then the correction, Enter
  (Esc gives up at either step).

Questions are answered in the order they were asked; the others wait below the first.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from trio_cap.actors.cli.fleet_keys import BACKSPACE, ENTER, ESCAPE


@attrs.frozen
class Question:
    """A member's session waits on a person: a permission request or an ask."""

    member: str
    session_id: str
    kind: Literal["permission", "ask"]
    ref: str
    """The request's ``req_id`` or the ask's ``ask_id``."""
    text: str
    """What is asked, in words (the tool and its target, or the ask's prompt)."""
    choices: tuple[Any, ...] = ()
    """An ask's ``oneOf`` values, when its form lists them."""
    high_risk: bool = False


@attrs.frozen
class Decide:
    session_id: str
    req_id: str
    decision: Literal["allow_once", "allow_always", "deny"]


@attrs.frozen
class Answer:
    session_id: str
    ask_id: str
    value: Any
    """None declines."""


@attrs.frozen
class Interrupt:
    member: str
    correction: str


Action = Decide | Answer | Interrupt

PERMISSION_KEYS = {"y": "allow_once", "a": "allow_always", "n": "deny"}


@attrs.define
class Desk:
    members: tuple[str, ...]
    questions: list[Question] = attrs.Factory(list)
    typing: Literal["", "answer", "member", "correction"] = ""
    """What the line being typed is for ('' when no line is being typed)."""
    line: str = ""
    target: str = ""
    """The member a correction is for."""
    note: str = ""
    """The last thing the desk has to tell the person (a refusal, a bad answer)."""

    # ---- questions -----------------------------------------------------------------------
    @property
    def front(self) -> Question | None:
        return self.questions[0] if self.questions else None

    def asked(self, question: Question) -> None:
        if all((q.session_id, q.ref) != (question.session_id, question.ref)
               for q in self.questions):
            self.questions.append(question)

    def settled(self, session_id: str, ref: str | None = None) -> None:
        """A question was answered (by anyone) or its session moved on (``ref`` None: every
        question of that session)."""
        front = self.front
        self.questions = [q for q in self.questions if q.session_id != session_id
                          or (ref is not None and q.ref != ref)]
        if self.typing == "answer" and self.front is not front:
            self._stop()

    # ---- keys ------------------------------------------------------------------------------
    def key(self, key: str) -> list[Action]:
        if self.typing:
            return self._type(key)
        self.note = ""
        if key == "i":
            self.typing = "member"
            return []
        question = self.front
        if question is None:
            return []
        if question.kind == "permission":
            decision = PERMISSION_KEYS.get(key.lower())
            if decision is None:
                return []
            self.questions.pop(0)
            return [Decide(question.session_id, question.ref, decision)]  # type: ignore[arg-type]
        if key == "r":
            self.typing = "answer"
            return []
        if key == "d":
            return self._answer(question, None)
        if key.isdigit() and 1 <= int(key) <= len(question.choices):
            return self._answer(question, question.choices[int(key) - 1])
        return []

    def _type(self, key: str) -> list[Action]:
        if key == ESCAPE:
            if self.typing == "answer" and self.front is not None:
                question = self.front
                self._stop()
                return self._answer(question, None)
            self._stop()
            return []
        if key == BACKSPACE:
            self.line = self.line[:-1]
            return []
        if key != ENTER:
            if len(key) == 1:
                self.line += key
            return []
        text = self.line.strip()
        if self.typing == "member":
            self._stop()
            member = self._member(text)
            if member is None:
                self.note = f"no member {text!r}" if text else ""
                return []
            self.typing, self.target = "correction", member
            return []
        if self.typing == "correction":
            member = self.target
            self._stop()
            return [Interrupt(member, text)] if text else []
        question = self.front
        if question is None:  # answered meanwhile (the line was cleared then)
            self._stop()
            return []
        value = self._choice(question, text)
        if value is _BAD:
            self.line = ""
            self.note = "answer one of: " + ", ".join(map(str, question.choices))
            return []
        self._stop()
        return self._answer(question, value)

    def _answer(self, question: Question, value: Any) -> list[Action]:
        self.questions.remove(question)
        return [Answer(question.session_id, question.ref, value)]

    def _stop(self) -> None:
        self.typing, self.line, self.target = "", "", ""

    def _member(self, text: str) -> str | None:
        if text.isdigit() and 1 <= int(text) <= len(self.members):
            return self.members[int(text) - 1]
        return text if text in self.members else None

    @staticmethod
    def _choice(question: Question, text: str) -> Any:
        if not text:
            return None
        if not question.choices:
            return text
        if text.isdigit() and 1 <= int(text) <= len(question.choices):
            return question.choices[int(text) - 1]
        for choice in question.choices:
            if str(choice) == text:
                return choice
        return _BAD


_BAD = object()
