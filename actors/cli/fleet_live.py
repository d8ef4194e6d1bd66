"""``cap fleet run``'s live terminal view: one row per member, the budget bar, the
conflicts as they happen, the latest events, and the members' questions answered from
the keyboard.

The fleet runs with a person present (``run_fleet(human=True)``) when stdin is a
terminal: what a member's policy leaves to a person (``ask``, high risk, an ask the
auto-answerer passes on) waits for a key instead of being refused.  The view follows the
log (a subscription) and draws the orchestrator's projections (:mod:`.fleet_view`); the
person's keys go through the :class:`~.fleet_desk.Desk`, whose actions are the same
commands the embedding API sends — ``Session.decide`` / ``answer`` and
``FleetHandle.interrupt`` — so each decision is an event in the log.
"""

from __future__ import annotations

import collections
import functools
import sys

import trio
from rich.console import Console
from rich.live import Live

from trio_cap.actors.cli.fleet_desk import Action, Answer, Decide, Desk, Interrupt
from trio_cap.actors.cli.fleet_keys import cbreak, read_keys
from trio_cap.actors.cli.fleet_render import describe_fleet
from trio_cap.actors.cli.fleet_view import question, render
from trio_cap.actors.cli.render import describe
from trio_cap.actors.fleet import InterruptRefused, run_fleet
from trio_cap.actors.fleet.model import Fleet
from trio_cap.actors.fleet.runner import FleetHandle, FleetOutcome
from trio_cap.actors.orchestrator import Orchestrator
from trio_cap.actors.session.actor import CommandRefused, SessionEnded
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    AgentRaw,
    AskAnswered,
    AskUserAnswer,
    Cancel,
    CapSessionReady,
    FrameIn,
    FrameOut,
    PermissionDecided,
    PermissionPathsResolved,
    PermissionResponse,
    Plan,
    PtyRawBytes,
    SessionCancelled,
    SessionCompleted,
    SessionConfig,
    SessionFailed,
    SessionIdle,
    SessionInputRequired,
    SessionReady,
    TextChunk,
    Thought,
    ToolCallDelta,
    Usage,
    UserInputInject,
)

TAIL = 8
"""Latest event lines under the table."""
CATCH_UP = 5.0
"""Seconds the last picture waits for the projections to reach the log's end (it is
already written; this only bounds a stalled fold)."""
FRAME = 1 / 20
"""Seconds between two redraws at most: a burst of events is drawn once."""
QUIET = (FrameIn, FrameOut, AgentRaw, PtyRawBytes, TextChunk, Thought, ToolCallDelta, Usage,
         Plan, SessionConfig, UserInputInject, PermissionResponse, AskUserAnswer, Cancel,
         CapSessionReady, SessionReady, PermissionPathsResolved, SessionInputRequired)
"""Member events too frequent, too raw or said already for the tail (the table shows their
effect; a question shows in the prompt)."""
_SETTLED = (SessionIdle, SessionCompleted, SessionCancelled, SessionFailed)


def wanted(console: Console) -> bool:
    """Whether the live view can draw here: a terminal that moves the cursor."""
    return console.is_terminal and not console.is_dumb_terminal


def keyboard() -> bool:
    """Whether a person can answer: stdin is a terminal too."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


async def run_live(orch: Orchestrator, fleet: Fleet, rid: str, console: Console,
                   keys: bool) -> FleetOutcome:
    """Run ``fleet`` under the live view; ``keys``: read the keyboard (stdin in cbreak
    mode until the run is over, however it ends) and let its person answer."""
    view = _LiveView(orch, fleet, console, keys)
    if not keys:
        return await view.run(rid)
    with cbreak(sys.stdin.fileno()):
        return await view.run(rid)


class _LiveView:
    def __init__(self, orch: Orchestrator, fleet: Fleet, console: Console, keys: bool) -> None:
        self.orch = orch
        self.fleet = fleet
        self.console = console
        self.desk = Desk(fleet.ids) if keys else None
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL)
        self.members: dict[str, str] = {}
        """session stream → member id"""
        self.handle: FleetHandle | None = None
        self.dirty = trio.Event()
        self.seen = 0
        """The last seq the tail and the desk have seen."""

    async def run(self, rid: str) -> FleetOutcome:
        self.seen = self.orch.log.last_seq
        first = self.seen + 1
        with Live(self._render(), console=self.console, auto_refresh=False) as live:
            try:
                async with trio.open_nursery() as nursery:
                    self.handle = await nursery.start(functools.partial(
                        run_fleet, self.orch, self.fleet, human=self.desk is not None,
                        run_id=rid))
                    nursery.start_soon(self._follow, first)
                    nursery.start_soon(self._paint, live)
                    if self.desk is not None:
                        nursery.start_soon(read_keys, sys.stdin.fileno(), functools.partial(
                            self._key, nursery))
                    outcome = await self.handle.wait()
                    nursery.cancel_scope.cancel()
            finally:
                await self._last_picture(live)
        return outcome

    async def _last_picture(self, live: Live) -> None:
        """What the run logged to its end (on Ctrl-C too: its sessions closed, the fleet
        failed) stays on the screen, without the keys that no longer do anything."""
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + CATCH_UP
            for env in self.orch.log.read(self.seen + 1):
                self._note(env)
            await self.orch.caught_up()
        live.update(self._render(final=True), refresh=True)

    def _render(self, final: bool = False):
        return render(self.orch.state, self.fleet.name, self.fleet.ids,
                      None if final else self.desk, list(self.tail), self.fleet.budget_usd,
                      self.console.height)

    async def _paint(self, live: Live) -> None:
        while True:
            await self.dirty.wait()
            self.dirty = trio.Event()
            await self.orch.caught_up()
            live.update(self._render(), refresh=True)
            await trio.sleep(FRAME)

    def _changed(self) -> None:
        self.dirty.set()

    # ---- the log ----------------------------------------------------------------------------
    async def _follow(self, from_seq: int) -> None:
        async for batch in self.orch.log.subscribe(from_seq):
            asked = [env for env in batch if type(env.event) is SessionInputRequired]
            for env in batch:
                self._note(env)
            if asked and self.desk is not None:
                state = await self.orch.caught_up()
                for env in asked:
                    member = self.members.get(env.stream)
                    if member is not None:
                        found = question(state, member, env.stream, env.event)
                        if found is not None:
                            self.desk.asked(found)
            self._changed()

    def _note(self, env: Envelope) -> None:
        self.seen = env.seq
        ev = env.event
        said = describe_fleet(ev)
        if said is not None:
            self.tail.append(said)
            if env.kind == "fleet.member":
                self.members[ev.session_id] = ev.member  # type: ignore[attr-defined]
            return
        member = self.members.get(env.stream)
        if member is None:
            return
        if not isinstance(ev, QUIET):
            self.tail.append(f"{member}: {describe(ev)}")
        if self.desk is None:
            return
        if isinstance(ev, PermissionDecided):
            self.desk.settled(env.stream, ev.req_id)
        elif isinstance(ev, AskAnswered):
            self.desk.settled(env.stream, ev.ask_id)
        elif isinstance(ev, _SETTLED):
            self.desk.settled(env.stream)

    # ---- the keyboard -------------------------------------------------------------------------
    async def _key(self, nursery: trio.Nursery, key: str) -> None:
        assert self.desk is not None
        for action in self.desk.key(key):
            nursery.start_soon(self._act, action)
        self._changed()

    async def _act(self, action: Action) -> None:
        assert self.desk is not None
        try:
            if isinstance(action, Decide):
                await self.orch.session(action.session_id).decide(
                    action.req_id, action.decision, reason="from cap fleet run's keyboard")
            elif isinstance(action, Answer):
                await self.orch.session(action.session_id).answer(action.ask_id, action.value)
            elif isinstance(action, Interrupt):
                assert self.handle is not None
                self.handle.interrupt(action.member, action.correction)
        except InterruptRefused as exc:
            self.desk.note = str(exc)
        except (SessionEnded, CommandRefused) as exc:
            self.desk.note = f"not taken: {exc}"  # the session moved on meanwhile
        self._changed()
