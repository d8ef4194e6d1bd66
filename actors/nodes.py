"""Orchestrator nodes sharing one log: ownership, leases and takeover.

Every session belongs to the node that started it (``session.owned``, written
before the session's first event).  A node proves it is alive with
``node.heartbeat`` events, each extending its lease to ``lease_until``; a
node that stops cleanly says so (``node.stopped``).  When a node's lease has
lapsed without ``node.stopped`` — it was killed, or lost its machine — any
other node may take over its sessions that have not ended.

A takeover writes one ``node.takeover`` naming the lost node's live sessions;
the taker then resumes each under the resume rules (:mod:`.replay.resume`,
the same as ``cap run --resume``: rebuilt from the log, the agent resumed or
restarted with the transcript).  A session that cannot be resumed — started
outside ``cap run``, waiting on a human at a terminal, a log that does not
replay — is listed in ``not_resumed`` and ended with ``session.failed``
``node_lost`` saying why: refusing beats guessing.  Two
nodes taking over at once cannot both do it: on PostgreSQL the takeover runs
under a database-wide advisory lock and re-reads the log once it holds it.  And
a lost node that was only paused cannot write after its takeover: the taker
fences it in the database first (``cap_fenced``), every append carries its
node's id, and ``cap_append`` refuses a fenced node's appends — the node's
next append (a heartbeat at the latest) fails with the reason and its run
ends.

Everything is decided from the log alone (:func:`fold_nodes` is pure), so a
replay tells who owned what and who took over when.  Lease times come from one
clock: on PostgreSQL the database server's (so nodes on machines whose clocks
disagree still agree on who lapsed), else the given or system clock.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager, nullcontext

import attrs
import trio

from trio_cap.events.clock import Clock, SystemClock
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    TERMINAL_EVENTS,
    NodeHeartbeat,
    NodeStopped,
    NodeTakeover,
    SessionFailed,
    SessionOwned,
)
from trio_cap.events.log.base import EventLog

DEFAULT_LEASE = 15.0
"""Seconds a heartbeat keeps a node's sessions; renewed every third of it."""

NODE_STREAM = "node:"
"""Stream prefix of a node's own events (``node:<id>``)."""


async def lease_now(log: EventLog, clock: Clock | None) -> float:
    """Now, for leases: ``clock`` if given, else the log's server clock, else the system's."""
    if clock is not None:
        return clock.now()
    server_time = getattr(log, "server_time", None)
    if server_time is not None:
        return await trio.to_thread.run_sync(server_time)
    return SystemClock().now()


def default_node_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@attrs.define
class NodesView:
    """Who owns which session, and each node's lease, as the log says so far."""

    leases: dict[str, float] = attrs.field(factory=dict)
    stopped: set[str] = attrs.field(factory=set)
    taken: set[str] = attrs.field(factory=set)
    owner: dict[str, str] = attrs.field(factory=dict)
    ended: set[str] = attrs.field(factory=set)
    last_seq: int = 0

    def live_sessions(self, node: str) -> list[str]:
        return [sid for sid, owner in self.owner.items() if owner == node and sid not in self.ended]

    def lapsed(self, now: float, *, exclude: str | None = None) -> list[tuple[str, float]]:
        """Nodes whose lease ended before ``now``, never stopped and not yet taken over."""
        return [(node, until) for node, until in self.leases.items()
                if until < now and node not in self.stopped and node not in self.taken
                and node != exclude]


def fold_nodes(view: NodesView, envelopes: Iterable[Envelope]) -> NodesView:
    for env in envelopes:
        event = env.event
        if isinstance(event, NodeHeartbeat):
            view.leases[event.node] = max(view.leases.get(event.node, 0.0), event.lease_until)
        elif isinstance(event, SessionOwned):
            view.owner[env.stream] = event.node
            view.stopped.discard(event.node)
        elif isinstance(event, TERMINAL_EVENTS):
            view.ended.add(env.stream)
        elif isinstance(event, NodeStopped):
            view.stopped.add(event.node)
        elif isinstance(event, NodeTakeover):
            view.taken.add(event.lost)
            for sid in event.sessions:
                view.owner[sid] = event.node
        view.last_seq = env.seq
    return view


def read_nodes(log: EventLog, view: NodesView | None = None, window: int = 4096) -> NodesView:
    """The view from the log (a reader without an event loop: :func:`read_nodes_async`
    is the one for async code)."""
    view = view or NodesView()
    seq = view.last_seq + 1
    while seq <= log.last_seq:
        fold_nodes(view, log.read(seq, until=min(log.last_seq, seq + window - 1)))
        seq += window
    return view


async def read_nodes_async(log: EventLog, view: NodesView | None = None,
                           window: int = 4096) -> NodesView:
    """The view from the log, a window at a time through :meth:`EventLog.read_async` (a
    database's rows in a worker thread): a takeover never holds the loop for the whole log."""
    view = view or NodesView()
    seq = view.last_seq + 1
    while seq <= log.last_seq:
        fold_nodes(view, await log.read_async(seq, until=min(log.last_seq, seq + window - 1)))
        seq += window
    return view


@attrs.frozen
class Takeover:
    lost: str
    lapsed_at: float
    sessions: tuple[str, ...]
    seq: int
    failed: dict[str, str] = attrs.field(factory=dict)
    """The sessions ended ``node_lost`` instead of resumed, each with why."""

    @property
    def resumed(self) -> tuple[str, ...]:
        return tuple(sid for sid in self.sessions if sid not in self.failed)


Resumable = Callable[[str], Awaitable["str | None"]]
"""Whether the taker can resume a session: None when it can, else why not."""

NOT_RESUMING = "the taking node does not resume sessions (cap node without a resumer)"


async def take_over(log: EventLog, node: str, *, clock: Clock | None = None,
                    resumable: Resumable | None = None) -> list[Takeover]:
    """Take over every lapsed node's live sessions (see the module rules); returns what was done.

    ``resumable`` judges each session (it reads the log; the takeover lock is
    held); the caller then resumes the sessions the records list as resumed.
    Without it every session is ended ``node_lost``.
    """
    exclusive = getattr(log, "exclusive", None)
    done: list[Takeover] = []
    async with (exclusive("takeover") if exclusive else nullcontext()):
        view = await read_nodes_async(log)
        now = await lease_now(log, clock)
        fence = getattr(log, "fence", None)
        for lost, until in view.lapsed(now, exclude=node):
            sessions = tuple(view.live_sessions(lost))
            if fence is not None:
                await fence(lost, node)  # from here on the database refuses its appends
            failed: dict[str, str] = {}
            for sid in sessions:
                why = await resumable(sid) if resumable is not None else NOT_RESUMING
                if why is not None:
                    failed[sid] = why
            seq = await log.append([NodeTakeover(
                node=node, lost=lost, lapsed_at=until, sessions=sessions,
                resumed=resumable is not None, not_resumed=tuple(failed))],
                stream=NODE_STREAM + node)
            for sid, why in failed.items():
                await log.append([SessionFailed(
                    code="node_lost",
                    message=f"node lost: {lost} stopped heartbeating (lease lapsed at "
                            f"{until:.3f}); taken over by {node}, which cannot resume this "
                            f"session: {why}")], stream=sid, cause=seq)
            done.append(Takeover(lost, until, sessions, seq, failed))
    return done


class Node:
    """This process as a node of a shared log: owns the sessions it starts, heartbeats."""

    def __init__(self, log: EventLog, node_id: str | None = None, *, lease: float = DEFAULT_LEASE,
                 clock: Clock | None = None) -> None:
        if not lease > 0:
            raise ValueError(f"a lease must be a positive number of seconds, not {lease}")
        self.log = log
        self.id = node_id or default_node_id()
        self.lease = lease
        self.clock = clock
        self.stream = NODE_STREAM + self.id

    async def heartbeat(self) -> int:
        now = await lease_now(self.log, self.clock)
        return await self.log.append([NodeHeartbeat(
            node=self.id, lease_until=now + self.lease,
            host=socket.gethostname(), pid=os.getpid())], stream=self.stream)

    async def own(self, session_id: str) -> int:
        return await self.log.append([SessionOwned(node=self.id)], stream=session_id)

    async def _beat(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        await self.heartbeat()
        task_status.started()
        while True:
            await trio.sleep(self.lease / 3)
            await self.heartbeat()

    async def stopped(self) -> None:
        await self.log.append([NodeStopped(node=self.id)], stream=self.stream)


@asynccontextmanager
async def open_node(log: EventLog, node_id: str | None = None, *, lease: float = DEFAULT_LEASE,
                    clock: Clock | None = None) -> AsyncIterator[Node]:
    """Heartbeat while the block runs; ``node.stopped`` when it ends (not when killed)."""
    node = Node(log, node_id, lease=lease, clock=clock)
    if hasattr(log, "node"):
        log.node = node.id  # type: ignore[attr-defined] - appends carry it: fencing
    async with trio.open_nursery() as nursery:
        await nursery.start(node._beat)
        try:
            yield node
        finally:
            nursery.cancel_scope.cancel()
            with trio.CancelScope(shield=True):
                if not log.closed:
                    await node.stopped()
