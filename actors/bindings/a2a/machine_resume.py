"""The driver picking an A2A session up after its orchestrator died (``cap run --resume``).

A mixin of :class:`~.machine.A2aDriver`.  The remote agent outlived the dead
run: its context goes on, and a task it was still working on may still be
running.  ``cap run --resume`` replays the dead connection's driver from the
log and hands what it knew to the new one as the session config's
``session_resume_id``, a JSON object under the key ``a2a``
(:func:`resume_id`): the context id, the task id and its last state, the
message ids already taken from that task and how many parts of each of its
artifacts.  With it (rule D23/H6 of the driver):

* a task that was active (``submitted`` / ``working``) is *re-attached*: the
  turn the session sends again (its re-run input) subscribes to the task
  (``tasks/resubscribe`` / ``SubscribeToTask``) instead of sending the input a
  second time; the task's snapshot then gives only what was not taken, and a
  task that ended meanwhile is read with ``GetTask`` (D16);
* a task waiting for input takes the next input as its follow-up (H2);
* otherwise the next input starts a new task in the recorded context.

Sans-io and deterministic in the config, so ``cap replay --check`` rebuilds the
same driver from the logged ``cap.session.config``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.actors.bindings.a2a.machine_io import ArtifactState
from trio_cap.events.kinds import SessionConfig

KEY = "a2a"
"""The key of a ``session_resume_id`` JSON object that carries an A2A resume point."""

_KEPT = ("count", "name", "text_bytes", "call_id", "closed", "cap", "quiet")
"""What of an artifact's state is carried over (its parts are not: a data or file artifact's
``cap.artifact`` after a resume holds only the parts taken since)."""


def resume_id(context_id: str, task_id: str | None, state: str | None, seen: set[str],
              artifacts: dict[str, ArtifactState]) -> str:
    """The ``session_resume_id`` of an A2A session whose driver knew this."""
    point: dict[str, Any] = {"context_id": context_id}
    if task_id is not None:
        point.update(task_id=task_id, state=state, seen=sorted(seen), artifacts={
            k: {name: getattr(v, name) for name in _KEPT} for k, v in artifacts.items()})
    return msgspec.json.encode({KEY: point}).decode()


def parse(value: str | None) -> dict[str, Any] | None:
    """The A2A resume point in a ``session_resume_id``, or None (another agent's id)."""
    if not value or not value.startswith("{"):
        return None
    try:
        given = msgspec.json.decode(value)
    except msgspec.DecodeError:
        return None
    point = given.get(KEY) if isinstance(given, dict) else None
    return point if isinstance(point, dict) and isinstance(point.get("context_id"), str) \
        else None


class ResumeRules:
    context_id: str | None
    task_id: str | None
    state: str | None
    seen: set[str]
    artifacts: dict[str, ArtifactState]
    reattach: bool
    """The next input re-attaches to the recorded active task instead of being sent."""

    def _resume_from(self, config: SessionConfig) -> None:
        point = parse(config.session_resume_id)
        if point is None:
            return
        self.context_id = point["context_id"]
        task, state = point.get("task_id"), point.get("state")
        if not isinstance(task, str):
            return
        self.task_id = task
        self.state = state if isinstance(state, str) else None
        self.seen = {s for s in point.get("seen") or () if isinstance(s, str)}
        for art_id, kept in (point.get("artifacts") or {}).items():
            if isinstance(kept, dict):
                self.artifacts[art_id] = ArtifactState(
                    **{k: v for k, v in kept.items() if k in _KEPT})
        self.reattach = f.state_class(self.state or "submitted") == "active"
