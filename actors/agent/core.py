"""The agent side of a session: trio-cap's scripted brain speaking CAP events.

This is the same code in every binding: ``inproc`` hands it frames directly;
the stream-json, ACP and PTY agent modes will wrap it with their encoders.  It
consumes orchestrator → agent frames (config first, then inputs, cancels,
answers) and emits CAP core events plus a turn-end marker.  Output is buffered
and flushed at every await, so a turn's events travel as a few large batches
rather than one message per event.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

import trio

from trio_cap.actors.agent import tools
from trio_cap.actors.agent.brain import ScriptedBrain
from trio_cap.actors.agent.steps import (
    Ask,
    Burst,
    Edit,
    Error,
    Fail,
    PlanItem,
    PlanStep,
    Raw,
    Report,
    Run,
    Say,
    Step,
    Think,
    Tool,
    Wait,
    Write,
)
from trio_cap.actors.bindings.base import RAW_LINE, UPDATED_INPUT, TurnEnded
from trio_cap.actors.risk import infer_risk
from trio_cap.events.kinds import (
    AgentRaw,
    AskUser,
    AskUserAnswer,
    Cancel,
    CapError,
    CapSessionReady,
    Event,
    PermissionRequest,
    PermissionResponse,
    Plan,
    PlanEntry,
    SessionConfig,
    StopReason,
    TextChunk,
    Thought,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UserInputInject,
)

Emitted = Event | TurnEnded
Emit = Callable[[Sequence[Emitted]], Awaitable[None]]



class CoreEnded(Exception):
    """The core cannot go on (a bridged agent died or could not start).

    Not a crash: the message is what the client is told, the running turn fails
    and the agent side ends the session (exit code 1)."""


class TurnHooks(Protocol):
    """Work a binding wants done around every turn (e.g. the workspace diff artifact)."""

    async def before_turn(self, cwd: str, turn: int) -> None: ...

    async def after_turn(self, cwd: str, turn: int) -> Sequence[Event]:
        """Events to add to the turn, before its ``cap.usage``."""
        ...


class ToolHost(Protocol):
    """Where the brain's file and shell tools run: in this process (:class:`tools.LocalTools`)
    or through the client driving the agent (ACP's ``fs/*`` and ``terminal/*``)."""

    async def write_file(self, cwd: str, path: str, content: str) -> str: ...

    async def edit_file(self, cwd: str, path: str, old: str, new: str) -> str: ...

    async def run_command(self, cwd: str, command: str,
                          seconds: float) -> tuple[int | None, str]: ...


class _TurnFailed(Exception):
    pass


async def _take_slot(slots: trio.CapacityLimiter, borrower: object) -> None:
    """Through the scheduler only when no slot is free: an uncontended take reorders no
    task, so a deterministic run stays byte-identical."""
    try:
        slots.acquire_on_behalf_of_nowait(borrower)
    except trio.WouldBlock:
        await slots.acquire_on_behalf_of(borrower)


class _MaxTurns(Exception):
    """The turn used its ``max_turns`` round trips (one per tool result)."""


class AgentCore:
    def __init__(self, brain: ScriptedBrain, emit: Emit, *, session_id: str = "cap-agent",
                 turn_hooks: TurnHooks | None = None, tool_host: ToolHost | None = None,
                 turn_slots: trio.CapacityLimiter | None = None) -> None:
        self.brain = brain
        self.turn_slots = turn_slots
        """Shared by every core in one process (``inproc``): a turn computes only while it
        holds a slot and gives it back while it waits (a reply, a ``wait`` step), so a
        thousand sessions' turns take turns instead of all sharing every scheduler round
        (which is what makes one event's way to a subscriber long)."""
        self._emit = emit
        self.session_id = session_id
        self.turn_hooks = turn_hooks
        self.tool_host: ToolHost = tool_host or tools.LocalTools()
        self.config: SessionConfig | None = None
        self._out: list[Emitted] = []
        self._turn_no = 0
        self._turn_scope: trio.CancelScope | None = None
        self._waiting: dict[str, tuple[trio.Event, list[Any]]] = {}
        self._counters: dict[str, int] = {}
        self._words_out = 0
        self._reported: list[Report] = []
        self._tool_calls = 0
        self._queued = 0  # prompts received, not yet started
        self._cancel_next = False

    # ---- plumbing ---------------------------------------------------------
    def _id(self, prefix: str) -> str:
        n = self._counters.get(prefix, 0) + 1
        self._counters[prefix] = n
        return f"{prefix}_{n}"

    async def _flush(self) -> None:
        if self._out:
            batch, self._out = self._out, []
            await self._emit(batch)

    @property
    def cwd(self) -> str:
        assert self.config is not None
        return self.config.cwd

    # ---- frames in ----------------------------------------------------------
    async def run(self, frames: trio.MemoryReceiveChannel[Event]) -> None:
        """Serve one session until the orchestrator closes the frame channel or cancels it."""
        first = await first_config(frames, self._emit)
        if first is None:
            return
        self.config = first
        await self._emit([CapSessionReady(session_id=self.session_id)])
        turn_send, turn_receive = trio.open_memory_channel[str](math.inf)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._turn_worker, turn_receive)
            async with turn_send:
                async for frame in frames:
                    if isinstance(frame, UserInputInject):
                        self._queued += 1
                        turn_send.send_nowait(frame.text)
                    elif isinstance(frame, Cancel):
                        if frame.scope == "session":
                            nursery.cancel_scope.cancel()
                            return
                        if self._turn_scope is not None:
                            self._turn_scope.cancel()
                        elif self._queued:
                            # the prompt arrived but its turn has not started: cancel it at once
                            self._cancel_next = True
                    elif isinstance(frame, PermissionResponse | AskUserAnswer):
                        self._deliver(frame, nursery)
                    elif isinstance(frame, SessionConfig):
                        late = CapError(code="invalid_state", message="cap.session.config "
                                        "arrived after the session started; ignored")
                        nursery.start_soon(self._emit, [late])

    def _deliver(self, frame: PermissionResponse | AskUserAnswer, nursery: trio.Nursery) -> None:
        key = frame.req_id if isinstance(frame, PermissionResponse) else frame.ask_id
        waiter = self._waiting.pop(key, None)
        if waiter is None:
            code = (
                "cap_unknown_permission" if isinstance(frame, PermissionResponse) else "unknown_ask"
            )
            # emitted from its own task: the frame reader must never block on output
            error = CapError(code=code, message=f"nothing waits on {key!r}")
            nursery.start_soon(self._emit, [error])
            return
        event, box = waiter
        box.append(frame)
        event.set()

    async def _await_reply(self, key: str) -> Any:
        event, box = trio.Event(), []
        self._waiting[key] = (event, box)
        await self._flush()
        try:
            async with self._slot_released():
                await event.wait()
        finally:
            self._waiting.pop(key, None)
        return box[0]

    @asynccontextmanager
    async def _slot_released(self) -> AsyncIterator[None]:
        """Give the turn's slot back while it waits; take one again before it goes on."""
        slots = self.turn_slots
        if slots is None or self not in slots.statistics().borrowers:
            yield
            return
        slots.release_on_behalf_of(self)
        try:
            yield
        finally:
            await _take_slot(slots, self)  # cancelled here: the turn holds none

    # ---- turns ----------------------------------------------------------------
    async def _turn_worker(self, turns: trio.MemoryReceiveChannel[str]) -> None:
        async for prompt in turns:
            if self.turn_slots is None:
                await self._run_turn(prompt)
                continue
            await _take_slot(self.turn_slots, self)
            try:
                await self._run_turn(prompt)
            finally:
                if self in self.turn_slots.statistics().borrowers:
                    self.turn_slots.release_on_behalf_of(self)

    async def _run_turn(self, prompt: str) -> None:
        self._turn_no += 1
        self._words_out = 0
        self._reported = []
        self._tool_calls = 0
        started = trio.current_time()
        stop: StopReason = "end_turn"
        if self.turn_hooks is not None:
            await self.turn_hooks.before_turn(self.cwd, self._turn_no)
        self._queued -= 1  # only now: a cancel during the hook must still reach this turn
        cancelled_early, self._cancel_next = self._cancel_next, False
        with trio.CancelScope() as scope:
            self._turn_scope = scope
            try:
                if self._turn_no == 1 and self.config and self.config.system_prompt:
                    # a scripted brain cannot obey instructions; it shows it received them
                    self._out.append(Thought(message_id=f"thought_{self._turn_no}",
                                             text=f"System prompt: {self.config.system_prompt}"))
                for step in [] if cancelled_early else self.brain.steps_for(prompt):
                    await self._step(step)
            except _TurnFailed:
                stop = "error"
            except _MaxTurns:
                stop = "tool_use"  # as Claude Code reports a max-turns stop
        self._turn_scope = None
        if scope.cancelled_caught or cancelled_early:
            stop = "cancelled"
        usage = self._usage(prompt, stop, started)
        if self.turn_hooks is not None:
            self._out.extend(await self.turn_hooks.after_turn(self.cwd, self._turn_no))
        self._out.append(usage)
        self._out.append(TurnEnded(stop))
        await self._flush()

    def _usage(self, prompt: str, stop: StopReason, started: float) -> Usage:
        script = self.brain.script
        tokens_in = max(1, len(prompt.split()))
        tokens_out = self._words_out
        extra = {k: 0 for k in ("cache_read_tokens", "cache_creation_tokens", "thinking_tokens")}
        cost = (tokens_in * script.input_per_mtok + tokens_out * script.output_per_mtok) / 1e6
        for report in self._reported:
            u = report.usage
            tokens_in += u.input_tokens
            tokens_out += u.output_tokens
            extra["cache_read_tokens"] += u.cache_read_tokens
            extra["cache_creation_tokens"] += u.cache_creation_tokens
            extra["thinking_tokens"] += u.thinking_tokens
            cost += u.cost_usd
        model = (self.config.model if self.config else None) or script.model
        return Usage(
            model_id=model,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            cost_usd_estimate=round(cost, 10),
            duration_ms=int((trio.current_time() - started) * 1000),
            stop_reason=stop,
            **extra,
        )

    def _say(self, text: str, channel: str = "assistant",
             meta: dict[str, Any] | None = None) -> None:
        message_id = f"msg_{self._turn_no}"
        if self._words_out:
            text = "\n" + text  # later replies of a turn start on their own line
        words = text.split(" ")
        self._words_out += len(text.split())
        n = self.brain.script.chunk_words
        for i in range(0, len(words), n):
            piece = " ".join(words[i : i + n])
            if i + n < len(words):
                piece += " "
            self._out.append(TextChunk(message_id=message_id, text=piece, channel=channel,  # type: ignore[arg-type]
                                       meta=meta))

    async def _step(self, step: Step) -> None:
        match step:
            case Say():
                self._say(step.say, meta=step.meta)
            case Think():
                self._out.append(Thought(message_id=f"thought_{self._turn_no}", text=step.think))
            case PlanStep():
                self._out.append(Plan(entries=tuple(_entries(step.plan))))
            case Write():
                await self._tool("Write", {"path": step.write, "content": step.content}, "write",
                                 lambda i: self.tool_host.write_file(self.cwd, i["path"],
                                                                     i["content"]))
            case Edit():
                await self._tool("Edit", {"path": step.edit, "old": step.old, "new": step.new},
                                 "write", lambda i: self.tool_host.edit_file(
                                     self.cwd, i["path"], i["old"], i["new"]))
            case Run():
                await self._run(step)
            case Tool():
                await self._tool(step.tool, step.input, step.scope, lambda _i: step.output,
                                 risk=step.risk, ask=step.needs_permission)
            case Ask():
                await self._ask(step)
            case Report():
                self._reported.append(step)
            case Wait():
                await self._flush()
                async with self._slot_released():
                    await trio.sleep(step.wait)
            case Error():
                self._out.append(CapError(code=step.error, message=step.message or step.error,
                                          retryable=step.retryable))
            case Fail():
                after = None if step.retry_after is None else {"retry_after": step.retry_after}
                self._out.append(CapError(code=step.fail, message=step.message or step.fail,
                                          retryable=step.retryable or after is not None,
                                          details=after))
                raise _TurnFailed
            case Burst():
                await self._burst(step)
            case Raw():
                self._out.append(AgentRaw(binding="cap-agent", reason=RAW_LINE, text=step.raw))

    async def _burst(self, step: Burst) -> None:
        message_id = f"msg_{self._turn_no}"
        chunk = TextChunk(message_id=message_id, text=step.text)
        left = step.burst
        await self._flush()
        while left > 0:
            n = min(step.batch, left)
            await self._emit([chunk] * n)
            left -= n
        self._words_out += step.burst

    async def _permitted(self, tool: str, intent: dict[str, Any], scope: str,
                         risk: str | None) -> tuple[bool, dict[str, Any] | None]:
        """Whether the call may run, and the input it must run with when the reply rewrote it."""
        assert self.config is not None
        if self.config.permission_mode == "none":
            return True, None
        req_id = self._id("perm")
        level = risk or infer_risk(tool, intent, scope, self.cwd)
        self._out.append(PermissionRequest(req_id=req_id, tool=tool, intent=intent,
                                           scope=scope, risk_level=level))  # type: ignore[arg-type]
        reply: PermissionResponse = await self._await_reply(req_id)
        updated = (reply.meta or {}).get(UPDATED_INPUT)
        return reply.decision != "deny", updated if isinstance(updated, dict) else None

    def _round_trip(self) -> None:
        """A tool result costs a model round trip; ``max_turns`` bounds them per turn."""
        self._tool_calls += 1
        limit = self.config.max_turns if self.config else None
        if limit is not None and self._tool_calls >= limit:
            raise _MaxTurns

    async def _tool(self, name: str, intent: dict[str, Any], scope: str,
                    action: Callable[[dict[str, Any]], Any],
                    *, risk: str | None = None, ask: bool = True) -> str | None:
        call_id = self._id("call")
        self._out.append(ToolCallStart(call_id=call_id, name=name, input=intent))
        started = trio.current_time()
        if ask:
            allowed, updated = await self._permitted(name, intent, scope, risk)
            if not allowed:
                what = intent.get("path") or intent.get("command") or name
                self._out.append(ToolCallEnd(call_id=call_id, output="permission denied",
                                             is_error=True))
                self._round_trip()
                self._say(f"Permission to use {name} on {what} was denied, so I did not do it.")
                return None
            if updated is not None:
                intent = updated
        await self._flush()  # a tool host that asks the client sees the call started first
        try:
            try:
                result = action(intent)
                if isinstance(result, Awaitable):
                    async with self._slot_released():  # a command or a client's reply: waits
                        result = await result
            except (KeyError, TypeError, AttributeError) as exc:  # a rewritten input gone wrong
                raise tools.ToolError(f"invalid input for {name}: {exc!r}") from None
        except tools.ToolError as exc:
            self._out.append(ToolCallEnd(call_id=call_id, output=str(exc), is_error=True,
                                         duration_ms=_ms(started)))
            self._round_trip()
            self._say(f"{name} failed: {exc}")
            return None
        self._out.append(ToolCallEnd(call_id=call_id, output=str(result),
                                     duration_ms=_ms(started)))
        self._round_trip()
        if name in ("Write", "Edit"):
            self._say(f"{result[0].upper()}{result[1:]}.")
        return str(result)

    async def _run(self, step: Run) -> None:
        box: list[tuple[str, int | None, str]] = []

        async def action(intent: dict[str, Any]) -> str:
            command = intent.get("command")
            if not isinstance(command, str):
                raise tools.ToolError("invalid input for Bash: command must be text")
            code, output = await self.tool_host.run_command(self.cwd, command, step.timeout)
            box.append((command, code, output))
            return output

        await self._flush()
        result = await self._tool("Bash", {"command": step.run}, "execute", action)
        if result is None or not box:
            return
        command, code, output = box[0]
        status = "timed out" if code is None else f"exited {code}"
        body = output.rstrip("\n") or "(no output)"
        self._say(f"`{command}` {status}:\n{body}")

    async def _ask(self, step: Ask) -> None:
        ask_id = self._id("ask")
        form: dict[str, Any] | None = None
        if step.options:
            form = {"type": "string", "oneOf": [{"const": o, "title": o} for o in step.options]}
        self._out.append(AskUser(ask_id=ask_id, prompt=step.ask, form=form))
        reply: AskUserAnswer = await self._await_reply(ask_id)
        if reply.value is None:
            fallback = step.options[0] if step.options else "nothing"
            self._say(f"No answer to \"{step.ask}\"; going with {fallback}.")
        else:
            self._say(f"You answered {reply.value}.")


def _entries(items: list[PlanItem | str]) -> list[PlanEntry]:
    out = []
    for i, item in enumerate(items, 1):
        if isinstance(item, str):
            item = PlanItem(content=item)
        out.append(PlanEntry(id=f"p{i}", content=item.content, status=item.status,
                             priority=item.priority))
    return out


def _ms(started: float) -> int:
    return int((trio.current_time() - started) * 1000)


async def first_config(frames: trio.MemoryReceiveChannel[Event],
                       emit: Callable[[list[Event]], Awaitable[None]]) -> SessionConfig | None:
    """A core's first frame, which CAP says is the session's config: None when the frames
    ended first, or (after saying so with ``cap_session_config_missing``) when it was not."""
    try:
        first = await frames.receive()
    except (trio.EndOfChannel, trio.ClosedResourceError):
        return None
    if isinstance(first, SessionConfig):
        return first
    kind = first.__struct_config__.tag
    await emit([CapError(code="cap_session_config_missing",
                         message=f"the first frame must be cap.session.config, got {kind}")])
    return None
