"""``cap run``'s progress printer: the session's events as they are logged, and the human's
answers when it asks.

It reads the log (a subscription), never the session's internals, so what the
terminal shows is what the log holds.
"""

from __future__ import annotations

import sys

import msgspec
import trio

from trio_cap.actors.cli.render import describe
from trio_cap.actors.orchestrator import Orchestrator, Session
from trio_cap.actors.session.actor import CommandRefused, SessionEnded
from trio_cap.events.envelope import Envelope, to_json_obj
from trio_cap.events.kinds import (
    AskUserAnswer,
    CapSessionReady,
    FrameIn,
    FrameOut,
    PermissionResponse,
    SessionCancelled,
    SessionCompleted,
    SessionConfig,
    SessionFailed,
    SessionIdle,
    SessionInputRequired,
    TextChunk,
    UserInputInject,
)

_QUIET = (SessionConfig, UserInputInject, PermissionResponse, AskUserAnswer, CapSessionReady,
          SessionIdle, FrameIn, FrameOut)
_TERMINAL = (SessionCompleted, SessionCancelled, SessionFailed)


class Follower:
    """Prints the session's events as they are logged and asks the human when needed."""

    def __init__(self, orch: Orchestrator, session: Session, human: bool, as_json: bool) -> None:
        self.orch = orch
        self.session = session
        self.human = human
        self.as_json = as_json
        self.in_text = False

    async def run(self) -> None:
        async for batch in self.orch.log.subscribe(1, self.session.id):
            for env in batch:
                self._print(env)
                if isinstance(env.event, SessionInputRequired) and self.human:
                    try:
                        await self._ask_human(env.event)
                    except (SessionEnded, CommandRefused):
                        pass  # the session moved on (ended, or the request was withdrawn)
                if isinstance(env.event, _TERMINAL):
                    return

    def _print(self, env: Envelope) -> None:
        out = sys.stdout
        ev = env.event
        if self.as_json:
            out.write(msgspec.json.encode(to_json_obj(env)).decode() + "\n")
            out.flush()
            return
        if isinstance(ev, TextChunk) and ev.channel == "assistant":
            out.write(ev.text)
            self.in_text = True
            out.flush()
            return
        if isinstance(ev, _QUIET):
            return
        if self.in_text:
            out.write("\n")
            self.in_text = False
        out.write(f"· {describe(ev)}\n")
        out.flush()

    async def _ask_human(self, ev: SessionInputRequired) -> None:
        pending = self.orch.state.pending
        await self.orch.caught_up()
        if ev.reason == "permission":
            request = pending.permissions.get(self.session.id, {}).get(ev.ref)
            if request is None:
                return
            risk = " [HIGH risk by trio-cap's rating]" if ev.risk == "high" else ""
            reply = await _prompt(f"Allow {request.tool} {describe_intent(request.intent)}?{risk} "
                                  "[y]es once / [a]lways / [n]o: ")
            choice = {"y": "allow_once", "yes": "allow_once", "a": "allow_always",
                      "always": "allow_always"}.get(reply.strip().lower(), "deny")
            await self.session.decide(ev.ref, choice)  # type: ignore[arg-type]
        else:
            ask = pending.asks.get(self.session.id, {}).get(ev.ref)
            if ask is None:
                return
            options = [c.get("const") for c in (ask.form or {}).get("oneOf", [])]
            hint = f" [{'|'.join(map(str, options))}]" if options else ""
            while True:
                reply = (await _prompt(f"{ask.prompt}{hint}: ")).strip()
                if not options or reply in options or not reply:
                    break
                print(f"  please answer one of: {', '.join(map(str, options))}")
            await self.session.answer(ev.ref, reply or None)


def describe_intent(intent: dict) -> str:
    for key in ("command", "path", "file_path", "url"):
        if key in intent:
            return str(intent[key])
    return msgspec.json.encode(intent).decode()[:100]


async def _prompt(text: str) -> str:
    try:
        return await trio.to_thread.run_sync(input, text, abandon_on_cancel=True)
    except EOFError:
        return ""
