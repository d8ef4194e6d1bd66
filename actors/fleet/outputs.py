"""What the fleet machine answers: the shell (:mod:`runner`) does each of these in order.

Apart from :mod:`machine` so the rules stay readable in one file.
"""

from __future__ import annotations

import attrs

from trio_cap.events.kinds import Event


@attrs.frozen
class Emit:
    """Append ``event`` to the fleet's stream, caused by ``cause``."""

    event: Event
    cause: int | None = None


@attrs.frozen
class Deliver:
    """Inject ``text`` into ``member``'s session, then report :meth:`FleetMachine.delivered`
    (or :meth:`FleetMachine.undeliverable`)."""

    message_id: str
    member: str
    text: str


@attrs.frozen
class Collect:
    """Take ``member``'s worktree diff now (its turn ended and its result waits to be
    handed on with it), then report :meth:`FleetMachine.collected`."""

    member: str


@attrs.frozen
class CancelTurn:
    member: str


@attrs.frozen
class Wake:
    """Call :meth:`FleetMachine.resume` for ``member`` after ``delay`` seconds."""

    member: str
    delay: float


@attrs.frozen
class Finished:
    completed: bool
    reason: str = ""


Output = Emit | Deliver | Collect | CancelTurn | Wake | Finished
