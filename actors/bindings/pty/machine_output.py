"""The PTY machine's turn output (rules P10–P12): settled screen rows become CAP events.

Split from :mod:`.machine` so the machine module keeps its states, settles and asks
while the one job of turning a turn's screen rows into text, tool calls, plans and
thoughts lives here.  A mixin of :class:`.machine.PtyMachine`: the annotations below
are the machine's state it reads and writes; the rest of the turn's bookkeeping is
plain data in :mod:`.machine_turn`.

Pure: the standard library and ``events/`` only (a machine helper, DESIGN §2a).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from trio_cap.actors.bindings.base import Output
from trio_cap.actors.bindings.pty.machine_rules import (
    PtySettings,
    group,
    matches,
    plan_entry,
    status_is_error,
)
from trio_cap.actors.bindings.pty.machine_screen import TuiVtScreen
from trio_cap.actors.bindings.pty.machine_turn import (
    Ask,
    Turn,
    compact,
    echoed,
    error_code,
    flush_plan,
    flush_sections,
    flush_text,
)
from trio_cap.events.kinds import CapError, ToolCallEnd, ToolCallStart


class TurnOutput:
    """The turn-output half of the PTY machine (a mixin of :class:`.machine.PtyMachine`)."""

    s: PtySettings
    screen: TuiVtScreen
    _turn: Turn | None
    _ask: Ask | None
    _pending: list[Output]
    _new_id: Callable[[str], str]

    def _idle(self, last: str) -> bool:
        raise NotImplementedError

    def _ask_on_line(self, line: str, key: tuple[int, int], below: Sequence[str]) -> list[Output]:
        raise NotImplementedError

    def _before_switch(self) -> None:
        """The screen is about to switch buffers: what the old one shows is final."""
        turn = self._turn
        if turn is not None and turn.submitted and turn.gen == self.screen.generation:
            self._pending += self._commit(turn, self.screen.cursor_row + 1)

    def _stream(self, turn: Turn) -> list[Output]:
        screen = self.screen
        if turn.gen != screen.generation:
            turn.gen = screen.generation
            turn.start_row = turn.emitted = screen.first_row
            turn.seen = set()
            turn.prev_touched = 1 << 62
            screen.take_touched()
        touched = screen.take_touched()
        if screen.alternate or self.s.redraw:
            upto = screen.scrolled  # P12: only what scrolled off is surely done
        else:  # what scrolled off is done too, however recently it was written
            upto = max(min(screen.cursor_row, touched, turn.prev_touched), screen.scrolled)
        turn.prev_touched = touched
        return self._commit(turn, upto)

    def _commit(self, turn: Turn, upto: int, *, settled: bool = False) -> list[Output]:
        screen = self.screen
        out: list[Output] = []
        start = max(turn.emitted, screen.first_row)
        if screen.alternate or self.s.redraw:
            texts = [screen.row_text(n) for n in range(start, min(upto, screen.scrolled))]
            if settled:
                rows = screen.rows()
                texts += rows[:max(0, upto - screen.scrolled)]
            turn.emitted = max(turn.emitted, min(upto, screen.scrolled))
            for text in texts:
                if text is None:
                    continue
                key = text.strip()
                if key and key in turn.seen:
                    continue
                if key:
                    turn.seen.add(key)
                out += self._line(turn, text, -1)
        else:
            n = start
            wrapped = screen.wrapped
            while n < upto:
                last = n  # a line the terminal wrapped is one logical line (Appendix A2)
                while last in wrapped and last + 1 < upto:
                    last += 1
                if last in wrapped and not settled:
                    break  # it goes on below what is done: later, whole
                parts = [screen.row_text(k, strip=k not in wrapped) for k in range(n, last + 1)]
                if parts[0] is not None:
                    out += self._line(turn, "".join(p or "" for p in parts).rstrip(), n)
                n = last + 1
            turn.emitted = max(turn.emitted, n)
        if settled:
            out += self._flush_sections(turn)
        return out + self._flush_text(turn)

    def _line(self, turn: Turn, text: str, row: int) -> list[Output]:
        s = self.s
        stripped = text.strip()
        if turn.echo and self._echoed(turn, text):
            return []
        if not turn.any_text and turn.prompts and compact(text) in turn.prompts:
            return []
        if not stripped:
            closes = turn.plan is not None or turn.thought is not None
            out = self._flush_sections(turn)
            if turn.any_text and not closes:  # the blank that closes a section is its own
                turn.blanks += 1
            return out
        if matches(s.chrome, text) or self._idle(stripped):
            return []
        if turn.options is not None:
            turn.options[2].append(stripped)
            return []
        out: list[Output] = []
        if turn.plan is not None:
            entry = plan_entry(text, len(turn.plan) + 1)
            if entry is not None:
                turn.plan.append(entry)
                return []
            out += self._flush_plan(turn)
        if turn.thought is not None:
            turn.thought.append(stripped)
            return out
        if s.tool_call_start is not None and (m := s.tool_call_start.search(text)):
            name = group(m, "tool") or "tool"
            call_id = self._new_id("call")
            turn.tools.setdefault(name, []).append(call_id)
            args = group(m, "args")
            return out + self._flush_text(turn) + [ToolCallStart(
                call_id=call_id, name=name, input={"args": args} if args is not None else {})]
        if s.tool_call_end is not None and (m := s.tool_call_end.search(text)):
            name = group(m, "tool") or "tool"
            open_calls = turn.tools.get(name) or next(
                (calls for calls in turn.tools.values() if calls), None)
            call_id = open_calls.pop() if open_calls else self._new_id("call")
            status = group(m, "status")
            return out + self._flush_text(turn) + [ToolCallEnd(
                call_id=call_id, output=status or "", is_error=status_is_error(status))]
        if s.plan_section is not None and s.plan_section.search(text) is not None:
            turn.plan = []
            return out + self._flush_text(turn)
        if s.thought_section is not None and s.thought_section.search(text) is not None:
            turn.thought = []
            return out + self._flush_text(turn)
        if (s.ask_options is not None and self._ask is None and s.ask_options.search(text)
                and (self.screen.generation, row) not in turn.asked):
            turn.asked.add((self.screen.generation, row))
            turn.options = (stripped, row, [])
            return out + self._flush_text(turn)
        asked = self._ask_on_line(text, (self.screen.generation, row), ())
        if asked:
            return out + self._flush_text(turn) + asked
        if s.error_lines and matches(s.error_lines, text):
            out += self._flush_text(turn)
            out.append(CapError(code=error_code(stripped), message=stripped,
                                details={"line": stripped}))
        turn.buf.extend([""] * turn.blanks)
        turn.blanks = 0
        if s.text_prefix is not None and (m := s.text_prefix.search(text)) and m.start() == 0:
            text = text[m.end():]  # the reply glyph ("● ") is the TUI's, not the reply's
        turn.buf.append(text.rstrip())
        turn.any_text = True
        return out

    def _echoed(self, turn: Turn, text: str) -> bool:
        return echoed(turn, text, self.screen.columns)

    _flush_text = staticmethod(flush_text)
    _flush_plan = staticmethod(flush_plan)
    _flush_sections = staticmethod(flush_sections)
