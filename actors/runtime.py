"""The actor runtime: addressed actors with bounded inboxes, supervised in a nursery.

An actor is an address (``cap://…``), a bounded Trio memory channel as its
inbox, and a behaviour.  Bounded inboxes give backpressure end to end: a
flooding agent blocks on a full inbox instead of growing memory.  Messages are
handled in batches (everything already queued is taken at once) because a
channel hop costs far more than the work per message.

Supervision follows a policy per actor: restart it (a new behaviour instance,
the same inbox, up to ``max_restarts`` within ``window`` seconds) or escalate
(the error cancels the system and reaches whoever opened it).  Shutdown is
graceful first: inboxes close, actors drain and finish their cleanup within
the grace period, then anything left is cancelled.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import attrs
import trio

from trio_cap.actors.ids import IdSource, RandomIds
from trio_cap.events.clock import Clock, SystemClock

logger = logging.getLogger("trio_cap.actors")

DEFAULT_INBOX = 256
DEFAULT_GRACE = 5.0


class ActorFailed(Exception):
    """An actor kept failing beyond its restart budget, or its policy escalates."""


class ActorNotFound(Exception):
    pass


@attrs.frozen
class Restart:
    max_restarts: int = 3
    window: float = 60.0


@attrs.frozen
class Escalate:
    pass


SupervisionPolicy = Restart | Escalate


@attrs.define(eq=False)
class ActorRef:
    """A handle to send to an actor; cheap to copy, safe after the actor stops."""

    address: str
    _send: trio.MemorySendChannel[Any]
    done: trio.Event = attrs.field(factory=trio.Event)
    """Set once the actor has finished for good (after its last restart, if any).

    A message sent just before that may sit unread in a buffer that is then
    dropped, so anyone waiting for an answer races it against ``done``
    (:func:`first_of`) instead of waiting on the answer alone."""

    async def send(self, message: Any) -> None:
        """Deliver, waiting while the inbox is full (backpressure)."""
        try:
            await self._send.send(message)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise ActorNotFound(f"{self.address} is stopped") from None

    def send_nowait(self, message: Any) -> None:
        try:
            self._send.send_nowait(message)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise ActorNotFound(f"{self.address} is stopped") from None

    def clone_sender(self) -> trio.MemorySendChannel[Any]:
        """A send channel of the inbox for a producer task that closes it when done."""
        return self._send.clone()


@attrs.define(eq=False)
class ActorContext:
    address: str
    inbox: trio.MemoryReceiveChannel[Any]
    ref: ActorRef
    system: ActorSystem
    nursery: trio.Nursery
    """The actor's own nursery: its helper tasks die with it."""
    _entry: _Entry

    async def batches(self, limit: int = 1024) -> AsyncIterator[list[Any]]:
        """Everything queued, a batch at a time.

        Ends when the inbox closes, or once a requested stop has drained what
        was queued — producers holding clones of the inbox (a connection's
        reader) cannot keep a stopping actor alive.
        """
        inbox = self.inbox
        entry = self._entry
        while True:
            if entry.stopping:
                rest = _drain(inbox, limit)
                if rest:
                    yield rest
                return
            with trio.CancelScope() as scope:
                entry.receive_scope = scope
                try:
                    first = await inbox.receive()
                except (trio.EndOfChannel, trio.ClosedResourceError):
                    return
                finally:
                    entry.receive_scope = None
            if scope.cancelled_caught:
                continue
            yield [first, *_drain(inbox, limit - 1)]

    @contextmanager
    def cancelled_on_stop(self) -> Iterator[trio.CancelScope]:
        """A scope that a stop request cancels: for a long wait outside the inbox (connecting
        to an agent) that must not hold a shutdown for the whole grace period."""
        entry = self._entry
        with trio.CancelScope() as scope:
            if entry.stopping:
                scope.cancel()
            entry.stop_scopes.add(scope)
            try:
                yield scope
            finally:
                entry.stop_scopes.discard(scope)

    def keep_on_stop(self, scope: trio.CancelScope) -> None:
        """From now on a stop request leaves ``scope`` alone (the actor drains instead)."""
        self._entry.stop_scopes.discard(scope)

    def shielded(self) -> trio.CancelScope:
        """A scope for cleanup that must run during cancellation, bounded by the grace period."""
        return trio.move_on_after(self.system.grace, shield=True)


class Actor:
    """A behaviour.  Override ``handle`` for one message at a time, or ``run`` to own the loop."""

    async def run(self, ctx: ActorContext) -> None:
        async for batch in ctx.batches():
            for message in batch:
                await self.handle(message, ctx)

    async def handle(self, message: Any, ctx: ActorContext) -> None:
        raise NotImplementedError


@attrs.define(eq=False)
class _Entry:
    ref: ActorRef
    inbox: trio.MemoryReceiveChannel[Any]
    restarts: int = 0
    stopping: bool = False
    receive_scope: trio.CancelScope | None = None
    stop_scopes: set[trio.CancelScope] = attrs.field(factory=set)

    @property
    def done(self) -> trio.Event:
        return self.ref.done

    def request_stop(self) -> None:
        self.stopping = True
        self.ref._send.close()
        if self.receive_scope is not None:
            self.receive_scope.cancel()
        for scope in self.stop_scopes:
            scope.cancel()


def _drain(inbox: trio.MemoryReceiveChannel[Any], limit: int) -> list[Any]:
    batch: list[Any] = []
    while len(batch) < limit:
        try:
            batch.append(inbox.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            break
    return batch


class ActorSystem:
    """Spawns, addresses and supervises actors inside one nursery."""

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        clock: Clock | None = None,
        ids: IdSource | None = None,
        grace: float = DEFAULT_GRACE,
    ) -> None:
        self.nursery = nursery
        self.clock: Clock = clock or SystemClock()
        self.ids: IdSource = ids or RandomIds()
        self.grace = grace
        self._actors: dict[str, _Entry] = {}

    def spawn(
        self,
        factory: Callable[[], Actor],
        *,
        address: str | None = None,
        inbox_size: int = DEFAULT_INBOX,
        policy: SupervisionPolicy = Escalate(),
        nursery: trio.Nursery | None = None,
    ) -> ActorRef:
        """Start ``factory()`` as an actor; ``factory`` is called again on each restart."""
        address = address or f"cap://{self.ids.new('actor')}"
        if address in self._actors:
            raise ValueError(f"an actor already lives at {address}")
        send, receive = trio.open_memory_channel[Any](inbox_size)
        entry = _Entry(ActorRef(address, send), receive)
        self._actors[address] = entry
        (nursery or self.nursery).start_soon(self._supervise, factory, entry, policy)
        return entry.ref

    def lookup(self, address: str) -> ActorRef:
        try:
            return self._actors[address].ref
        except KeyError:
            raise ActorNotFound(address) from None

    @property
    def addresses(self) -> list[str]:
        return list(self._actors)

    def restarts(self, address: str) -> int:
        return self._actors[address].restarts

    async def stop(self, address: str) -> None:
        """Close the actor's inbox and wait until it has finished."""
        entry = self._actors.get(address)
        if entry is None:
            return
        entry.request_stop()
        await entry.done.wait()

    async def stop_all(self) -> None:
        """Graceful shutdown: close every inbox, wait up to the grace period."""
        entries = list(self._actors.values())
        for entry in entries:
            entry.request_stop()
        with trio.move_on_after(self.grace):
            for entry in entries:
                await entry.done.wait()

    async def _supervise(self, factory: Callable[[], Actor], entry: _Entry, policy) -> None:
        history: deque[float] = deque()
        try:
            while True:
                actor = factory()
                try:
                    async with trio.open_nursery() as nursery:
                        ctx = ActorContext(
                            entry.ref.address, entry.inbox, entry.ref, self, nursery, entry
                        )
                        await actor.run(ctx)
                    return
                except Exception as group:
                    exc = _root(group)
                    if isinstance(policy, Escalate):
                        raise ActorFailed(f"{entry.ref.address} failed: {exc!r}") from group
                    now = trio.current_time()
                    history.append(now)
                    while history and now - history[0] > policy.window:
                        history.popleft()
                    if len(history) > policy.max_restarts:
                        raise ActorFailed(
                            f"{entry.ref.address} failed {len(history)} times within "
                            f"{policy.window}s: {exc!r}"
                        ) from group
                    entry.restarts += 1
                    logger.warning("restarting %s after %r", entry.ref.address, exc)
        finally:
            entry.inbox.close()
            entry.done.set()
            self._actors.pop(entry.ref.address, None)


async def first_of(*events: trio.Event) -> None:
    """Return as soon as any of ``events`` is set.

    The building block for every wait on an answer that may never come: race
    it against the event that says the answerer is gone.
    """
    if any(e.is_set() for e in events):
        return
    async with trio.open_nursery() as nursery:
        for event in events:
            nursery.start_soon(_set_then_cancel, event, nursery.cancel_scope)


async def _set_then_cancel(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


def _root(exc: BaseException) -> BaseException:
    """The single error inside nested one-member exception groups, for readable messages."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@asynccontextmanager
async def open_actor_system(
    *,
    clock: Clock | None = None,
    ids: IdSource | None = None,
    grace: float = DEFAULT_GRACE,
) -> AsyncIterator[ActorSystem]:
    """An actor system with its own nursery; on exit, actors get a graceful stop."""
    async with trio.open_nursery() as nursery:
        system = ActorSystem(nursery, clock=clock, ids=ids, grace=grace)
        try:
            yield system
        finally:
            with trio.CancelScope(shield=True):
                await system.stop_all()
            nursery.cancel_scope.cancel()


