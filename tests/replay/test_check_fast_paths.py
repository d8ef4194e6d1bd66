"""The shortcuts ``cap replay --check`` takes through the session machine keep its rules.

``SessionMachine.admit`` stores a batch whole, without the raw budget's per-event look,
when none of its kinds is one the budget may count: the two lists must not drift apart.
"""

from __future__ import annotations

import ast
import inspect

from trio_cap.actors.session import machine as session_machine
from trio_cap.actors.session import raw_budget
from trio_cap.actors.session.machine import SessionMachine
from trio_cap.actors.session.policy import PermissionPolicy
from trio_cap.events import kinds
from trio_cap.events.kinds import AgentRaw, SessionConfig, SessionCreated, TextChunk


def _sized_kinds() -> set[type]:
    """The kinds ``_raw_size`` compares an event's kind with (``kind is X``)."""
    tree = ast.parse(inspect.getsource(raw_budget._raw_size))
    names = {node.comparators[0].id for node in ast.walk(tree)
             if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.Is)
             and isinstance(node.left, ast.Name) and node.left.id == "kind"
             and isinstance(node.comparators[0], ast.Name)}
    return {getattr(kinds, name) for name in names}


def test_every_kind_the_raw_budget_sizes_is_one_admit_looks_at() -> None:
    sized = _sized_kinds()
    assert AgentRaw in sized
    assert sized <= session_machine._MAYBE_RAW


def _machine(budget: int) -> SessionMachine:
    created = SessionCreated(session_id="s", cwd="/w", agent="a", binding="inproc")
    return SessionMachine(created, SessionConfig(cwd="/w"), PermissionPolicy(name="deny"),
                          raw_budget=budget)


def test_admit_stores_a_batch_without_raw_output_whole_and_counts_raw_output() -> None:
    machine = _machine(budget=10)
    plain = [TextChunk(message_id="m", text="hello"), TextChunk(message_id="m", text="!")]
    admitted = machine.admit(plain)
    assert admitted == plain and admitted is not plain
    raw = [AgentRaw(binding="pty", reason="unparsed", text="x" * 8),
           TextChunk(message_id="m", text="a"),
           AgentRaw(binding="pty", reason="unparsed", text="y" * 8)]
    admitted = machine.admit(raw)
    assert admitted[:2] == raw[:2]  # the first raw line fits the budget, the second does not
    assert [type(ev).__name__ for ev in admitted] == ["AgentRaw", "TextChunk", "SessionWarning"]
    assert machine.raw.dropped_events == 1
