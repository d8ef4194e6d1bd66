"""Chooses the steps of each turn: scripted turns, then rules, then the command language."""

from __future__ import annotations

from trio_cap.actors.agent.commands import parse_prompt
from trio_cap.actors.agent.script import Script
from trio_cap.actors.agent.steps import Step


class ScriptedBrain:
    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        self._next_turn = 0

    def steps_for(self, prompt: str) -> list[Step]:
        turns = self.script.turns
        if self._next_turn < len(turns):
            turn = turns[self._next_turn]
            self._next_turn += 1
            return list(turn.steps)
        for rule in self.script.rules:
            if rule.pattern.search(prompt):
                return list(rule.steps)
        return parse_prompt(prompt)
