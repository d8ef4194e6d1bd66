"""The PTY settle machine, sans-io: terminal bytes and ``now`` in, CAP events out.

A TUI never says "I am done"; the driver infers it from what the screen shows
and from when it stops changing.  Bytes go through a VT emulator
(:class:`~.machine_screen.TuiVtScreen`) and every rule below reads the
*rendered* screen.  Time only enters as ``now`` (``tick``, or ``receive_data``'s
``now``), ids through ``new_id``: recorded bytes with their times replay to the
same events.

Terms: the screen is **quiet** when nothing was read or written for the idle
window (200 ms unless the manifest says ``pty.x-idle-ms``); a **settle** is the
first moment of a quiet period, and each rule below is judged once per settle.
The screen is **idle** when its last non-empty line matches a ``parse.idle``
pattern (or, with ``learn_prompt``, equals the line shown at ready).

States::

    STARTING ──settle ∧ ready_when──► READY ──prompt──► BUSY ──settle ∧ idle──► READY
        │                               ▲                 │ (ask / dialog: wait for the answer)
        └── process exits ──────────────┴─────────────────┴──► CLOSED (cap.error pty_died)

Rules:

====  ==============================================  =========================================
rule  when                                            output
====  ==============================================  =========================================
P1    STARTING, settle, a blocked dialog shows        ``cap.error`` ``pty_blocked`` once per
                                                      dialog; never ready while it shows
P2    STARTING, settle, ``ready_when`` matches the    ``cap.session.ready``; then the first held
      screen (any line)                               prompt is typed
P3    a prompt before ready, mid-turn (unless         held, typed later in order: nothing is
      ``queued_input``), or while a dialog shows      typed before ready or into a dialog
P4    a prompt typed                                  its text, then Enter after ``enter_gap``;
                                                      multi-line or > 1 KiB text as one
                                                      bracketed paste when the manifest allows
                                                      it and the program enabled mode 2004
P5    BUSY, settle, no output since Enter, or the     Enter again (at most ``submit_retries``
      input line still shows the prompt's text (on    times; then ``cap.error`` ``pty_blocked``
      a repainted screen not idle: or the row over
      the cursor)
                                                      and the turn fails: at once if the text
                                                      is still there, else at its idle settle)
P6    BUSY, settle, a dialog shows                    ``cap.ask_user`` (choices from the lines
                                                      under it); the answer is typed back
P7    a complete line (or the settled last line)      ``cap.ask_user``, a yes/no or a choice
      matches ``ask_yes_no`` / ``ask_options``        form; the answer is typed back
P8    an ask answered with nothing (headless)         nothing typed; ``cap.error``
                                                      ``pty_blocked``, the turn ends ``error``
                                                      and prompts wait until the question is gone
P9    BUSY, settle, idle, no ask pending, output      the rest of the turn's lines, then
      came after Enter                                ``TurnEnded`` (``cancelled`` after a
                                                      graceful cancel) per prompt in flight
P10   a line is complete: it scrolled off (at once,   parsed (P11) and emitted as text;
      in the read that scrolled it), or the cursor    the echoed prompt, idle lines, chrome
      and the last two reads' writes are below it,    (``parse.x-chrome`` + built-ins) and
      or the screen settled                           leading/trailing blank lines are dropped
P11   complete line matches ``tool_call_start`` /     ``cap.tool_call.start`` (``tool``,
      ``tool_call_end`` / ``plan_section`` (+ its     ``args``) / ``.end`` (``status``) /
      item lines) / ``thought_section`` (+ lines to   ``cap.plan`` / ``cap.thought``; an error
      a blank) / ``error_lines``                      line is also text
P12   the alternate screen is on                      a settled screen's lines not on it when
                                                      the prompt was typed (and lines scrolled
                                                      off a full-height region) are the output
P13   cancel current_turn                             ``graceful``: Ctrl-C; ``hard``:
                                                      ``KillAgent``; ``none``: ``cap.error``
                                                      ``cap_cancel_unsupported``
P14   the child exited and we did not end it          the screen's last lines, then
                                                      ``cap.error`` ``pty_died`` (exit code or
                                                      signal) before the shell's ``AgentGone``
P15   ``raw_bytes`` opted in                          ``cap.pty.raw_bytes`` per read, in order
====  ==============================================  =========================================

Outputs are the kit's values (:mod:`..base`); no input makes the machine raise.
P10–P12 (a turn's rows into events) are in :mod:`.machine_output`.
"""

from __future__ import annotations

import base64
import enum
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from trio_cap.actors.bindings.base import KillAgent, Output, ToAgent, TurnEnded
from trio_cap.actors.bindings.pty.machine_input import encode_prompt
from trio_cap.actors.bindings.pty.machine_output import TurnOutput
from trio_cap.actors.bindings.pty.machine_rules import (
    CANCEL_GAP,
    PtySettings,
    matches,
    option_choices,
    yes_no_text,
)
from trio_cap.actors.bindings.pty.machine_screen import TuiVtScreen
from trio_cap.actors.bindings.pty.machine_turn import (
    BOX_SIDES,
    Ask,
    Turn,
    compact,
)
from trio_cap.events.kinds import (
    AskUser,
    AskUserAnswer,
    Cancel,
    CapError,
    CapSessionReady,
    Event,
    PtyRawBytes,
    StopReason,
    UserInputInject,
)

BINDING = "pty"
CTRL_C = b"\x03"
ENTER = b"\r"


class PtyState(enum.Enum):
    STARTING = "starting"
    READY = "ready"
    BUSY = "busy"
    CLOSED = "closed"


class PtyMachine(TurnOutput):
    """One program on a pseudo-terminal, as a state machine (rules in the module docstring)."""

    def __init__(self, settings: PtySettings, *, new_id: Callable[[str], str],
                 now: float = 0.0, session_id: str | None = None) -> None:
        self.s = settings
        self.session_id = session_id
        self.screen = TuiVtScreen(settings.cols, settings.rows, settings.scrollback)
        self.screen.before_switch = self._before_switch
        self.state = PtyState.STARTING
        self.now = now
        self.started_at = now
        self._new_id = new_id
        self._quiet_since = now
        self._activity = 0
        self._settled_activity = -1
        self._writes: list[tuple[float, bytes]] = []
        self._held: deque[str] = deque()
        self._turn: Turn | None = None
        self._queued: deque[Turn] = deque()
        self._ask: Ask | None = None
        self._blocked_reported: set[str] = set()
        self._hold_until_clear = False
        self._pending: list[Output] = []
        self.prompt_line: str | None = None
        self.blocked_dialog: str | None = None
        """The dialog a settled screen showed before ready (for the shell's error)."""
        self.killing = False
        self.bytes_in = 0

    # ---- state ------------------------------------------------------------------
    @property
    def turn_running(self) -> bool:
        return self._turn is not None

    @property
    def ready(self) -> bool:
        return self.state in (PtyState.READY, PtyState.BUSY)

    def deadline(self) -> float | None:
        """When ``tick`` must next be called (None: only new bytes can change anything)."""
        if self.state is PtyState.CLOSED:
            return None
        times = [due for due, _ in self._writes]
        if self._settled_activity != self._activity:
            times.append(self._quiet_since + self.s.idle_window)
        if (waiting := self._busy_deadline()) is not None:
            times.append(waiting)
        return min(times) if times else None

    def _busy_deadline(self) -> float | None:
        """Until when an idle-looking screen is not yet the turn's end: the manifest names
        busy lines and none has shown since Enter (an agent quiet before it starts)."""
        turn = self._turn
        if (not self.s.busy or turn is None or turn.saw_busy or turn.cancelled
                or turn.enter_at is None):
            return None
        return turn.enter_at + self.s.busy_wait

    def describe(self) -> str:
        """The screen's last non-empty line (for a readable "never became ready")."""
        rows = [r for r in self.screen.rows() if r.strip()]
        return rows[-1].strip() if rows else ""

    # ---- input: bytes and time ----------------------------------------------------
    def receive_data(self, data: bytes, now: float | None = None) -> list[Output]:
        out = self.tick(now) if now is not None else []
        if not data or (self.state is PtyState.CLOSED and not self.s.raw_bytes):
            return out
        self.bytes_in += len(data)
        if self.s.raw_bytes:
            out.append(PtyRawBytes(bytes_b64=base64.b64encode(data).decode("ascii")))
        try:
            self.screen.feed(data)
        except Exception as exc:  # a screen bug must not end the session
            out.append(CapError(code="parse_failed",
                                message=f"the terminal emulator failed on the agent's output: "
                                        f"{type(exc).__name__}: {exc}"))
        if self.screen.replies:  # a terminal answers queries at once, as it reads them
            out.append(ToAgent(self.screen.take_replies()))
        out += self._take_pending()
        self._activity += 1
        self._quiet_since = self.now
        turn = self._turn
        if turn is not None and turn.submitted:
            if turn.enter_at is not None and self.now >= turn.enter_at:
                turn.output_after_enter = True
                if self.s.busy and not turn.saw_busy and self._busy(self.screen.rows()):
                    turn.saw_busy = True
                    if turn.cancel_pending:
                        out += self._cancel_keys(turn)
            out += self._stream(turn)
        return out

    def receive_eof(self) -> list[Output]:
        return []

    def tick(self, now: float | None) -> list[Output]:
        if now is not None and now > self.now:
            self.now = now
        out: list[Output] = []
        if self.state is PtyState.CLOSED:
            return out
        if self._writes:
            due = [w for w in self._writes if w[0] <= self.now]
            if due:
                self._writes = [w for w in self._writes if w[0] > self.now]
                for _, data in due:
                    out += self._write(data)
        quiet = self.now >= self._quiet_since + self.s.idle_window  # as deadline() computes it
        if self._settled_activity != self._activity and quiet and not self._writes:
            self._settled_activity = self._activity
            out += self._settle()
        elif ((due := self._busy_deadline()) is not None and self.now >= due
              and quiet and not self._writes):
            waited = self._turn
            assert waited is not None
            waited.saw_busy = True  # waited long enough
            if waited.cancel_pending:
                out += self._cancel_keys(waited)
            out += self._settle()
        return out

    def _write(self, data: bytes) -> list[Output]:
        """Bytes to the program, now; the screen's quiet period restarts."""
        turn = self._turn
        if data == ENTER and turn is not None and turn.submitted:
            turn.enter_at = self.now
            turn.output_after_enter = False
        self._activity += 1
        self._quiet_since = self.now
        return [ToAgent(data)]

    def _take_pending(self) -> list[Output]:
        out, self._pending = self._pending, []
        return out

    # ---- input: frames from the orchestrator -----------------------------------------
    def send(self, frame: Event) -> list[Output]:
        if self.state is PtyState.CLOSED:
            return []
        if isinstance(frame, UserInputInject):
            text = "".join(b.text for b in frame.content if b.type == "text")
            return self._inject(text)
        if isinstance(frame, AskUserAnswer):
            return self._answer(frame)
        if isinstance(frame, Cancel):
            return self.cancel(frame.scope)
        return []  # cap.session.config went into the argv; PTY has no permission frames

    def _inject(self, text: str) -> list[Output]:
        turn = Turn(text=text, message_id=self._new_id("msg"))
        if self._turn is None and self.state is PtyState.READY and not self._hold_until_clear:
            self._turn = turn
            self.state = PtyState.BUSY
            if not self._dialog_rows():
                return self._submit(turn)
            return []  # a dialog shows: the next settle asks about it (P6), then submits
        if self._turn is not None and self.s.queued_input and self._turn.submitted \
                and not self._hold_until_clear:
            self._turn.in_flight += 1  # the program reads it when it is ready (queued)
            return self._type(text)
        self._queued.append(turn)
        return []

    def _type(self, text: str) -> list[Output]:
        payload = encode_prompt(text, paste=self.s.bracketed_paste and self.screen.paste_mode)
        out = self._write(payload) if payload else []
        self._writes.append((self.now + self.s.enter_gap, ENTER))
        return out

    def _submit(self, turn: Turn) -> list[Output]:
        turn.submitted = True
        screen = self.screen
        screen.take_touched()
        turn.gen = screen.generation
        turn.start_row = turn.emitted = screen.cursor_row
        turn.echo = deque(c for c in map(compact, turn.text.splitlines()) if c)
        if screen.alternate or self.s.redraw:
            turn.seen = {r.strip() for r in screen.rows() if r.strip()}
        return self._type(turn.text)

    def _next_turn(self) -> list[Output]:
        if self._turn is not None or not self._queued or self.state is not PtyState.READY:
            return []
        if self._hold_until_clear:
            return []
        turn = self._queued.popleft()
        self._turn = turn
        self.state = PtyState.BUSY
        if self._dialog_rows():
            return []
        return self._submit(turn)

    def cancel(self, scope: str) -> list[Output]:
        if scope == "session":
            return []  # the shell ends the process
        turn = self._turn
        if turn is None:
            return []
        mode = self.s.cancel
        if mode == "none":
            return [CapError(code="cap_cancel_unsupported",
                             message="this agent's manifest says its turns cannot be "
                                     "cancelled (capabilities.mid_turn_cancel = \"none\")")]
        if mode == "hard":
            self.killing = True
            return [KillAgent("hard cancel (mid_turn_cancel = \"hard\"): SIGTERM, then "
                              "SIGKILL after the grace period")]
        if not turn.submitted:  # never typed: the turn ends here, nothing reached the program
            turn.cancelled = True
            return self._end_turn(turn, "cancelled")
        if self._busy_deadline() is not None:
            # typed, but the program has not shown it took the prompt: a Ctrl-C now would
            # reach its input box (Claude Code puts the prompt back there), so the keys wait
            # for its busy line (or the busy wait's end)
            turn.cancel_pending = True
            return []
        return self._cancel_keys(turn)

    def _cancel_keys(self, turn: Turn) -> list[Output]:
        turn.cancelled = True
        turn.cancel_pending = False
        self._ask = None
        first, *more = self.s.cancel_keys or (CTRL_C,)
        for i, keys in enumerate(more, 1):  # e.g. opencode's Esc, then Esc again
            self._writes.append((self.now + i * CANCEL_GAP, keys))
        return self._write(first)

    def _answer(self, frame: AskUserAnswer) -> list[Output]:
        ask = self._ask
        if ask is None or ask.ask_id != frame.ask_id:
            return []
        self._ask = None
        value = frame.value
        typed: str | None
        if ask.kind == "yes_no":
            typed = yes_no_text(value, self.s.yes, self.s.no)
        else:
            typed = None
            for label, key in ask.choices:
                if value in (label, key):
                    typed = key
                    break
            if typed is None and ask.kind == "dialog" and not ask.choices:
                typed = yes_no_text(value, self.s.yes, self.s.no)
        if typed is None:
            return self._unanswered(ask)
        out = self._write(typed.encode()) if typed else []
        self._writes.append((self.now + self.s.enter_gap, ENTER))
        return out

    def _unanswered(self, ask: Ask) -> list[Output]:
        self._hold_until_clear = True
        error = CapError(code="pty_blocked",
                         message=f"the agent asks {ask.prompt!r} and no answer came: nothing "
                                 "was typed; prompts wait until the question is gone")
        turn = self._turn
        if turn is None:
            return [error]
        turn.failed = True
        return [error, *self._end_turn(turn, "error")]

    # ---- settling ----------------------------------------------------------------
    def _dialog_rows(self) -> list[int]:
        """Rows of the visible screen that match a blocked-dialog pattern."""
        if not self.s.blocked:
            return []
        return [y for y, row in enumerate(self.screen.rows())
                if row.strip() and matches(self.s.blocked, row)]

    def _settle(self) -> list[Output]:
        rows = self.screen.rows()
        nonempty = [y for y, r in enumerate(rows) if r.strip()]
        last_y = nonempty[-1] if nonempty else None
        last = rows[last_y].strip() if last_y is not None else ""
        if self.state is PtyState.STARTING:
            return self._settle_starting(rows, last)
        if self._hold_until_clear and not self._asking_now(rows, last_y):
            self._hold_until_clear = False
        turn = self._turn
        if turn is None:
            return self._next_turn()
        if not turn.submitted:
            dialog = self._dialog_rows()
            if dialog:
                return self._dialog_ask(rows, dialog, turn)
            return self._submit(turn)
        if self._ask is not None:
            return []  # waiting for the answer
        pending: list[Output] = []
        if turn.cancelled:
            turn.verified = True  # never press Enter again after a cancel
        if not turn.verified:
            shown = self._input_shown(turn, rows)
            if not shown and self.s.redraw and not (last_y is not None and self._idle(last)):
                # not idle either: the box may keep the text a row above its cursor (Codex
                # inline, an Enter it dropped while it closed the last turn)
                shown = self._input_shown(turn, rows, above=1)
            if not turn.output_after_enter or shown:
                if turn.retries < self.s.submit_retries:
                    turn.retries += 1
                    return self._write(ENTER)
                turn.verified = True
                turn.failed = True  # the prompt never visibly reached the program
                why = "is still in the agent's input line" if shown else "drew no output"
                error = CapError(code="pty_blocked", message=f"the prompt {why} after "
                                 f"{turn.retries + 1} Enters")
                if shown:  # it never will: the turn ends, failed, instead of hanging
                    return [error, *self._end_turn(turn, "error")]
                pending = [error]
            turn.verified = True
        dialog = self._dialog_rows()
        if dialog and not turn.cancelled:
            return pending + self._dialog_ask(rows, dialog, turn)
        out: list[Output] = pending
        if last_y is not None and not turn.cancelled:
            out += self._ask_on_line(last, (self.screen.generation, self.screen.scrolled + last_y),
                                     rows[last_y + 1:])
            if self._ask is not None:
                return self._commit(turn, self.screen.scrolled + last_y) + out
        if self.s.ask_options is not None and not turn.cancelled:
            # may find the question (a repainted screen shows it only on a settled commit)
            repainted = self.screen.alternate or self.s.redraw
            out = self._commit(turn, self.screen.cursor_row, settled=repainted) + out
            if turn.options is not None:
                return out + self._ask_options(turn, rows)
        if (last_y is not None and self._idle(last) and not self._busy(rows)
                and self._busy_deadline() is None):
            out = self._commit(turn, self.screen.scrolled + last_y, settled=True) + out
            return out + self._end_turn(turn, "cancelled" if turn.cancelled else "end_turn")
        upto = self.screen.cursor_row
        if self.screen.alternate or self.s.redraw:
            upto = self._stable_upto(rows, upto)
        return self._commit(turn, upto, settled=True) + out

    def _stable_upto(self, rows: Sequence[str], upto: int) -> int:
        """A settle mid-turn on a repainted screen: the last text row may still be growing
        (a reply paused mid-line), so it is left for a later settle; the rows above it are
        done.  Otherwise its first half would be text, and then the whole line again."""
        scrolled = self.screen.scrolled
        for y in range(min(upto - scrolled, len(rows)) - 1, -1, -1):
            text = rows[y]
            if text.strip() and not matches(self.s.chrome, text) and not self._idle(text.strip()):
                asks = (p for p in (self.s.ask_yes_no, self.s.ask_options) if p is not None)
                if any(p.search(text) is not None for p in asks):
                    return upto  # a question waits for its answer: it is complete
                return scrolled + y
        return upto

    def _settle_starting(self, rows: list[str], last: str) -> list[Output]:
        dialog = [r.strip() for r in rows if r.strip() and matches(self.s.blocked, r)]
        self.blocked_dialog = " / ".join(dialog) if dialog else None
        if dialog:
            text = " / ".join(dialog)
            if text in self._blocked_reported:
                return []
            self._blocked_reported.add(text)
            return [CapError(code="pty_blocked",
                             message=f"the agent shows a dialog before it is ready: {text!r}; "
                                     "trio-cap types nothing into it (answer it once in a "
                                     "terminal, or start the agent so it does not ask)")]
        screen_text = "\n".join(rows)
        if self._busy(rows):
            return []  # e.g. "Initializing... Prompts will be queued." under a drawn prompt
        ready = (self.s.ready_when.search(screen_text) is not None if self.s.ready_when
                 else bool(screen_text.strip()))
        if not ready:
            return []
        self.state = PtyState.READY
        if self.s.learn_prompt and last:
            self.prompt_line = last
        return [CapSessionReady(session_id=self.session_id), *self._next_turn()]

    def _busy(self, rows: Sequence[str]) -> bool:
        """A visible line says the program is still working (``parse.x-busy``)."""
        return bool(self.s.busy) and any(r.strip() and matches(self.s.busy, r) for r in rows)

    def _idle(self, last: str) -> bool:
        if matches(self.s.idle, last):
            return True
        return self.prompt_line is not None and last == self.prompt_line

    def _asking_now(self, rows: list[str], last_y: int | None) -> bool:
        if self._dialog_rows():
            return True
        if last_y is None:
            return False
        last = rows[last_y]
        return any(p is not None and p.search(last) is not None
                   for p in (self.s.ask_yes_no, self.s.ask_options))

    def _input_shown(self, turn: Turn, rows: list[str], above: int = 0) -> bool:
        """The prompt's last line still sits in the line the cursor is on, or ``above``
        rows over it (P5)."""
        tail = next((ln for ln in reversed(turn.text.splitlines()) if ln.strip()), "")
        tail = compact(tail)
        if not tail:
            return False
        y = self.screen.cursor.y - above
        # an input box's right side ("| > text   |") is not part of what was typed
        return 0 <= y < len(rows) and compact(rows[y]).rstrip(BOX_SIDES).endswith(tail)

    def _dialog_ask(self, rows: list[str], dialog: list[int], turn: Turn) -> list[Output]:
        key = (self.screen.generation, -1 - dialog[0])
        if key in turn.asked:
            return []
        turn.asked.add(key)
        prompt = " ".join(rows[y].strip() for y in dialog)
        below = [r for r in rows[dialog[-1] + 1:] if r.strip()]
        choices = option_choices(prompt, below)
        return [self._new_ask("dialog", prompt, choices)]

    def _ask_on_line(self, line: str, key: tuple[int, int], below: Sequence[str]) -> list[Output]:
        turn = self._turn
        if turn is None or key in turn.asked or self._ask is not None:
            return []
        if self.s.ask_yes_no is not None and self.s.ask_yes_no.search(line) is not None:
            turn.asked.add(key)
            return [self._new_ask("yes_no", line.strip(), [])]
        if self.s.ask_options is not None and self.s.ask_options.search(line) is not None:
            turn.asked.add(key)
            choices = option_choices(line, [b for b in below if b.strip()])
            return [self._new_ask("options", line.strip(), choices)]
        return []

    def _ask_options(self, turn: Turn, rows: list[str]) -> list[Output]:
        """The pick-one question seen on a complete line, with the lines under it (P7)."""
        out = self._commit(turn, self.screen.cursor_row)
        if turn.options is None:
            return out
        question, row, below = turn.options
        turn.options = None
        cursor = self.screen.cursor_row
        if cursor > row and cursor >= turn.emitted and rows[self.screen.cursor.y].strip():
            below.append(rows[self.screen.cursor.y].strip())  # the last option, unfinished
            turn.emitted = cursor + 1
        return [*out, self._new_ask("options", question, option_choices(question, below))]

    def _new_ask(self, kind: str, prompt: str, choices: list[tuple[str, str]]) -> AskUser:
        ask = Ask(ask_id=self._new_id("ask"), kind=kind, prompt=prompt, choices=choices)
        self._ask = ask
        if choices:
            form: dict[str, Any] = {"type": "string",
                                    "oneOf": [{"const": label, "title": label}
                                              for label, _ in choices]}
        else:
            form = {"type": "string", "enum": ["yes", "no"]}
        return AskUser(ask_id=ask.ask_id, prompt=prompt, form=form)

    def _end_turn(self, turn: Turn, stop: StopReason) -> list[Output]:
        out = self._flush_sections(turn) + self._flush_text(turn)
        out += [TurnEnded("error" if turn.failed else stop)] * max(1, turn.in_flight)
        self._turn = None
        self._ask = None
        self.state = PtyState.READY
        self.screen.take_touched()
        return out + self._next_turn()

    # ---- the process -----------------------------------------------------------------
    def resize(self, cols: int, rows: int) -> None:
        self.screen.resize(rows, cols)

    def process_exited(self, description: str, code: int | None,
                       expected: bool = False) -> list[Output]:
        """The child is gone (P14): what the screen still shows, then ``pty_died``."""
        if self.state is PtyState.CLOSED:
            return []
        out = self._take_pending()
        turn = self._turn
        if turn is not None and turn.submitted:
            out += self._commit(turn, self.screen.cursor_row + 1, settled=True)
        self.state = PtyState.CLOSED
        if expected or self.killing:
            return out
        details: dict[str, Any] = {"exit_code": code} if code is not None and code >= 0 else {}
        if code is not None and code < 0:
            details["signal"] = -code
        out.append(CapError(code="pty_died", message=f"the PTY child ended: {description}",
                            details=details or None))
        return out

    def close(self) -> None:
        self.state = PtyState.CLOSED
