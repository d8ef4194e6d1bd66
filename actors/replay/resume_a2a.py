"""Where a resumed A2A session picks its remote agent up: the dead connection's driver, replayed.

The remote agent outlived the ``cap run`` that died: its context goes on, and
the task it was working on may still run.  What the dead driver knew of it
(context, task, state, what it had taken) is a function of the log, so it is
rebuilt by replaying the session (:class:`~.check.SessionReplay`, as
:func:`~.resume.rebuild` does for the session machine) and handed to the new
connection as its ``session_resume_id`` (:mod:`..bindings.a2a.machine_resume`).
"""

from __future__ import annotations

from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.actors.bindings.a2a.machine import A2aDriver
from trio_cap.actors.bindings.a2a.machine_resume import resume_id
from trio_cap.actors.replay.check import Divergence, SessionReplay
from trio_cap.actors.replay.resume import ResumePoint


def a2a_resume(point: ResumePoint) -> tuple[str, str] | None:
    """The ``session_resume_id`` and the ``run.resumed`` reason for ``point``'s A2A session,
    or None when its driver never learned a context (nothing to continue)."""
    replay = SessionReplay(point.recorded)
    try:
        replay.run()
    except Divergence:
        return None
    driver = getattr(replay.binding, "machine", None)
    if not isinstance(driver, A2aDriver) or not driver.context_id:
        return None
    state, task = driver.state, driver.task_id
    kind = f.state_class(state or "submitted")
    if task is None or kind == "terminal":
        return (resume_id(driver.context_id, None, None, set(), {}),
                f"the remote agent keeps its context {driver.context_id}: the next input "
                "goes on in it")
    given = resume_id(driver.context_id, task, state, driver.seen, driver.artifacts)
    if kind == "active":
        return given, (f"re-attaches to the remote task {task} (still {state or 'submitted'} "
                       "when the run died) instead of sending its input again")
    return given, (f"the remote task {task} was {state}: the next input is its follow-up "
                   f"in context {driver.context_id}")
