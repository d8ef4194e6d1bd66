"""trio-cap's agent as a terminal UI: keys and the brain's events in, frames and repaints out.

``cap agent --cap-speak pty`` runs the same :class:`~actors.agent.core.AgentCore`
as every other binding; this machine stands where a human would.  Keys
become CAP frames for the core (a prompt, a cancel, a permission answer, an
ask answer) and the core's CAP events become transcript lines, drawn like a
real agent TUI: the echoed prompt after the U+276F glyph, plain reply text, tool calls
as ``● Tool(args)`` … ``⎿ Tool completed``, a ``## Plan · 0/2 done`` section, a
``✻ Thinking`` section, ``✗ Error:`` lines, a ``(y/n)`` permission question
and a ``? question (a/b)`` ask.  Its ``[parse]`` rules in the cap-agent
manifest are written against exactly these lines.

Rules:

T1  A prompt is sent on Enter (``\\r``) with a non-empty input, or on Enter
    after a paste; an empty Enter does nothing (a driver's extra Enter is
    harmless).  ``drop_enters`` N ignores the first N Enters that would send
    a prompt — the text stays in the input box — so a driver's submit
    verification can be tested.
T2  While a turn runs, typed text collects in the input box and Enter queues it
    (the core runs queued prompts in order).  Esc or Ctrl-C cancels the
    running turn; Ctrl-C with no turn clears the input; Ctrl-D on an empty
    input ends the session.
T3  A permission request is a ``(y/n)`` question: the first ``y`` or ``n`` typed
    answers it (allow_once / deny) and the rest of that keystroke is dropped.
    An ask shows its options inline, ``? question (a/b)``, and waits for a typed
    line; a number picks that option.
T4  Only complete lines enter the transcript; the reply line being streamed
    is shown as it grows, and is finished by a newline, a tool call, a
    question or the turn's end.

Pure: no I/O and no clock — the shell passes ``now`` with every tick.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs

from trio_cap.actors.bindings.base import TurnEnded
from trio_cap.actors.bindings.pty import agent_view as view
from trio_cap.actors.bindings.pty.agent_keys import Key, KeyDecoder
from trio_cap.events.kinds import (
    AskUser,
    AskUserAnswer,
    Cancel,
    CapError,
    CapSessionReady,
    ContentBlock,
    Event,
    PermissionRequest,
    PermissionResponse,
    Plan,
    TextChunk,
    Thought,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UserInputInject,
)

PLAN_MARKS = {"pending": "☐", "in_progress": "◐", "completed": "☒", "cancelled": "☒",
              "blocked": "⊘"}


@attrs.frozen
class Deliver:
    """Hand this frame to the core."""

    frame: Event


@attrs.frozen
class Paint:
    """Write these bytes to the terminal."""

    data: bytes


@attrs.frozen
class Quit:
    """The user ended the session (Ctrl-D): stop the core, restore the terminal."""


Effect = Deliver | Paint | Quit


@attrs.define
class _Question:
    kind: str  # "permission" | "ask"
    key: str
    options: tuple[str, ...] = ()


class TuiAgent:
    def __init__(self, *, cols: int, rows: int, header: str, drop_enters: int = 0) -> None:
        self.cols, self.rows = cols, rows
        self.header = header
        self.drop_enters = drop_enters
        self.dropped = 0
        self.transcript: list[str] = []
        self.partial = ""
        self.input = ""
        self.working = False
        self.queued = 0
        self.started_at = 0.0
        self.now = 0.0
        self.frame = 0
        self.question: _Question | None = None
        self.ready = False
        self.nudge = False
        """A dropped Enter was seen: the hint says so until the next key (so a driver sees
        output after its Enter and must notice the prompt still sitting in the box)."""
        self._keys = KeyDecoder()
        self._shown: list[str] | None = None
        self._tools: dict[str, str] = {}

    # ---- inputs ---------------------------------------------------------------------
    def start(self, now: float) -> list[Effect]:
        """The first paint, before the core says it is ready (the driver must wait)."""
        self.now = now
        return [Paint(view.ENTER_SCREEN), *self._paint(full=True)]

    def keys(self, data: bytes, now: float) -> list[Effect]:
        self.now = now
        return self._keys_in(self._keys.feed(data))

    def quiet(self, now: float) -> list[Effect]:
        """Input stopped: a lone Esc waiting for more bytes is the Esc key."""
        self.now = now
        return self._keys_in(self._keys.flush())

    def tick(self, now: float) -> list[Effect]:
        """The spinner's clock: repaints the status row while a turn runs."""
        self.now = now
        if not self.working or self.question is not None:
            return []
        self.frame += 1
        return self._paint()

    def resize(self, cols: int, rows: int) -> list[Effect]:
        self.cols, self.rows = cols, rows
        return self._paint(full=True)

    def core(self, items: Sequence[Event | TurnEnded], now: float) -> list[Effect]:
        self.now = now
        for item in items:
            self._show(item)
        return self._paint()

    def leave(self) -> list[Effect]:
        return [Paint(view.LEAVE_SCREEN)]

    # ---- keys ---------------------------------------------------------------------
    def _keys_in(self, keys: list[Key]) -> list[Effect]:
        out: list[Effect] = []
        for key in keys:
            out += self._key(key)
        return out + self._paint() if keys else out

    def _key(self, key: Key) -> list[Effect]:
        self.nudge = False
        q = self.question
        if q is not None and q.kind == "permission":
            return self._yes_no(q, key)
        match key.name:
            case "text":
                self.input += key.text
            case "paste":
                self.input += key.text.replace("\r\n", "\n").replace("\r", "\n")
            case "newline":
                self.input += "\n"
            case "backspace":
                self.input = self.input[:-1]
            case "enter":
                return self._enter()
            case "interrupt":
                if self.working:
                    return [Deliver(Cancel(scope="current_turn", reason="user"))]
                self.input = ""
            case "escape":
                if self.working:
                    return [Deliver(Cancel(scope="current_turn", reason="user"))]
            case "eof":
                if not self.input:
                    return [Quit()]
        return []

    def _enter(self) -> list[Effect]:
        text = self.input
        if not text.strip() or not self.ready:
            return []
        if self.dropped < self.drop_enters:
            self.dropped += 1  # T1: the text stays where it was typed, the hint blinks
            self.nudge = True
            return []
        self.input = ""
        q = self.question
        if q is not None:  # an ask: this line is its answer
            self.question = None
            value = _pick(text.strip(), q.options)
            return [Deliver(AskUserAnswer(ask_id=q.key, value=value))]
        self._finish_partial()
        first, *more = text.split("\n")
        self._add(f"{view.PROMPT_GLYPH} {first}")
        self.transcript += [f"  {line}" for line in more]
        if self.working:
            self.queued += 1
        else:
            self.working, self.started_at, self.frame = True, self.now, 0
        return [Deliver(UserInputInject(content=(ContentBlock(text=text),)))]

    def _yes_no(self, q: _Question, key: Key) -> list[Effect]:
        if key.name in ("interrupt", "escape"):
            self.question = None
            return [Deliver(PermissionResponse(req_id=q.key, decision="deny")),
                    Deliver(Cancel(scope="current_turn", reason="user"))]
        if key.name not in ("text", "paste"):
            return []
        answer = next((c for c in key.text.lower() if c in "yn"), None)
        if answer is None:
            return []
        self.question = None
        self._add("  ⎿ Allowed" if answer == "y" else "  ⎿ Denied")
        decision = "allow_once" if answer == "y" else "deny"
        return [Deliver(PermissionResponse(req_id=q.key, decision=decision))]

    # ---- the core's events -------------------------------------------------------------
    def _show(self, item: Event | TurnEnded) -> None:
        match item:
            case CapSessionReady():
                self.ready = True
            case TextChunk():
                if item.channel == "thought":
                    self._section("✻ Thinking", item.text)
                    return
                self.partial += item.text
                *done, self.partial = self.partial.split("\n")
                for line in done:
                    self._add(line)
            case Thought():
                self._section("✻ Thinking", item.text)
            case Plan():
                self._finish_partial()
                done = sum(e.status in ("completed", "cancelled") for e in item.entries)
                self._add(f"## Plan · {done}/{len(item.entries)} done")
                for entry in item.entries:
                    self._add(f"  {PLAN_MARKS.get(entry.status, '☐')} {entry.content}")
                self._add("")
            case ToolCallStart():
                self._finish_partial()
                self._tools[item.call_id] = item.name
                self._add(f"● {item.name}({_args(item.input)})")
            case ToolCallEnd():
                self._finish_partial()
                name = self._tools.pop(item.call_id, "Tool")
                self._add(f"  ⎿ {name} {'failed' if item.is_error else 'completed'}")
            case PermissionRequest():
                self._finish_partial()
                self.question = _Question("permission", item.req_id)
                self._add(f"? Allow {item.tool}({_args(item.intent)})? (y/n)")
            case AskUser():
                self._finish_partial()
                options = _options(item.form)
                self.question = _Question("ask", item.ask_id, options)
                shown = f" ({'/'.join(options)})" if options else ""
                self._add(f"? {item.prompt}{shown}")
            case CapError():
                self._finish_partial()
                self._add(f"✗ Error: {item.message} ({item.code})")
            case Usage():
                pass
            case TurnEnded():
                self._finish_partial()
                if item.stop_reason == "cancelled":
                    self._add("  ⎿ Interrupted")
                self._add(f"✻ Worked for {max(0.0, self.now - self.started_at):.1f}s")
                self.question = None
                if self.queued:
                    self.queued -= 1
                    self.started_at, self.frame = self.now, 0
                else:
                    self.working = False

    def _section(self, title: str, text: str) -> None:
        self._finish_partial()
        self._add(title)
        for line in text.splitlines() or [""]:
            self._add(f"  {line}")
        self._add("")

    def _add(self, line: str) -> None:
        self.transcript.append(line)
        if len(self.transcript) > 4 * self.rows:
            del self.transcript[: len(self.transcript) - 2 * self.rows]  # off screen for good

    def _finish_partial(self) -> None:
        if self.partial:
            self._add(self.partial)
            self.partial = ""

    # ---- drawing ---------------------------------------------------------------------
    def _status(self) -> str:
        if self.question is not None:  # a TUI waiting on its user stops spinning
            return ("  waiting for permission" if self.question.kind == "permission"
                    else "  waiting for your answer")
        if not self.working:
            return ""
        spin = view.SPINNER[self.frame % len(view.SPINNER)]
        seconds = int(max(0.0, self.now - self.started_at))
        queued = f" · {self.queued} queued" if self.queued else ""
        return f"{spin} Working… ({seconds}s · esc to interrupt{queued})"

    def _hint(self) -> str:
        if self.nudge:
            return view.HINT_NUDGE
        if self.question is not None:
            return view.HINT_ASKING if self.question.kind == "permission" else view.HINT_ANSWER
        return view.HINT_WORKING if self.working else view.HINT_IDLE

    def _input_shown(self) -> str:
        first, *more = self.input.split("\n")
        return f"{first} [+{len(more)} lines]" if more else first

    def _paint(self, full: bool = False) -> list[Effect]:
        shown = self.transcript + ([self.partial] if self.partial else [])
        # before the core is ready the box is drawn but no hint says it can be used
        hint = self._hint() if self.ready else "starting…"
        screen = view.layout(cols=self.cols, rows=self.rows, header=self.header,
                             transcript=shown, status=self._status(),
                             input_text=self._input_shown(), hint=hint)
        if not full and screen == self._shown:
            return []
        cursor = view.input_cursor(self.cols, self.rows, self._input_shown())
        data = view.repaint(None if full else self._shown, screen, cursor)
        self._shown = screen
        return [Paint(data)]


def _args(intent: dict[str, Any]) -> str:
    for key in ("path", "command", "file_path", "url"):
        value = intent.get(key)
        if isinstance(value, str):
            return value.replace("\n", " ")
    return json.dumps(intent, ensure_ascii=False, separators=(",", ":"))[:80] if intent else ""


def _options(form: dict[str, Any] | None) -> tuple[str, ...]:
    if not form:
        return ()
    return tuple(str(o.get("const")) for o in form.get("oneOf", ()) if isinstance(o, dict))


def _pick(text: str, options: tuple[str, ...]) -> str:
    if text.isdigit() and 1 <= int(text) <= len(options):
        return options[int(text) - 1]
    for option in options:
        if option.lower() == text.lower():
            return option
    return text
