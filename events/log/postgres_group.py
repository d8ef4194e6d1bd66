"""Group commit: appends that queue up behind the one in flight go to the database together.

One connection carries every append of a log object, one at a time (a commit
is a round trip and an fsync).  With many sessions appending at once, each
waiting its turn, the queue — not the database — sets their latency.  So the
append that gets the connection takes every batch queued behind it too and
sends them as one call and one commit (``cap_append_many``): N queued appends
cost one fsync, and none waits for N-1 others to commit one by one.

Each batch keeps its own token, so a lost connection is still resolved batch by
batch (committed, or sent again).  An appender cancelled before its batch was
taken leaves nothing behind; once taken, it waits for the outcome (as a single
append always has), so whatever the log acknowledged, the caller was told.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs
import trio

from trio_cap.events.kinds import Event
from trio_cap.events.log.postgres_writer import Batch

GROUP_EVENTS = 10_000
"""Events at most in one group (beyond the appender's own batch): a bounded transaction."""


@attrs.define(eq=False)
class Queued:
    batch: Batch
    events: list[Event]
    taken: bool = False
    last: int | None = None
    error: BaseException | None = None
    done: trio.Event = attrs.field(factory=trio.Event)


class GroupCommit:
    def __init__(self, commit: Callable[[list[Queued]], Awaitable[None]]) -> None:
        """``commit`` stores a group and sets each item's ``last`` or ``error``."""
        self._commit = commit
        self._queue: list[Queued] = []
        self._lock = trio.Lock()

    async def submit(self, item: Queued) -> int:
        """The batch's last seq once committed (with whatever group it went in)."""
        self._queue.append(item)
        try:
            async with self._lock:
                if not item.taken:
                    group = self._take(item)
                    with trio.CancelScope(shield=True):
                        try:
                            await self._commit(group)
                        finally:
                            for queued in group:
                                queued.done.set()
        except trio.Cancelled:
            if not item.taken:
                self._queue.remove(item)
                raise
            with trio.CancelScope(shield=True):
                await item.done.wait()  # sent: the outcome is known before we go
        if item.error is not None:
            raise item.error
        assert item.last is not None
        return item.last

    def _take(self, own: Queued) -> list[Queued]:
        """The queue's front up to and including ``own``, then more while the group is small."""
        group: list[Queued] = []
        events = 0
        seen_own = False
        while self._queue:
            nxt = self._queue[0]
            if seen_own and events + nxt.batch.n > GROUP_EVENTS:
                break
            self._queue.pop(0)
            nxt.taken = True
            group.append(nxt)
            events += nxt.batch.n
            seen_own = seen_own or nxt is own
        return group
