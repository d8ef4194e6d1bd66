"""One turn of the PTY settle machine, as data: its state, its echo and its text so far.

Split from :mod:`.machine` so the machine module keeps its rules and decisions
while the bookkeeping of one turn — which prompt lines are still expected as
echo, the text lines not yet emitted, an open plan or thought section — lives
beside it as plain data and pure functions.

Pure: the standard library and ``events/`` only (a machine helper, DESIGN §2a).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from trio_cap.actors.bindings.base import Output
from trio_cap.events.kinds import Plan, PlanEntry, TextChunk, Thought


@dataclass
class Ask:
    ask_id: str
    kind: str  # yes_no | options | dialog
    prompt: str
    choices: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Turn:
    text: str
    message_id: str
    submitted: bool = False
    enter_at: float | None = None
    output_after_enter: bool = False
    verified: bool = False
    retries: int = 0
    cancelled: bool = False
    failed: bool = False
    gen: int = 0
    start_row: int = 0
    emitted: int = 0
    echo: deque[str] = field(default_factory=deque)
    """The prompt's lines (whitespace removed) not yet seen echoed back."""
    echo_checked: bool = False
    prompts: set[str] = field(default_factory=set)
    """What stood before the echoed input on its rows (``>>>``, ``...``): a row showing only
    one of them before any output is the REPL's continuation of the same input."""
    seen: set[str] = field(default_factory=set)
    prev_touched: int = 1 << 62
    blanks: int = 0
    any_text: bool = False
    buf: list[str] = field(default_factory=list)
    tools: dict[str, list[str]] = field(default_factory=dict)
    plan: list[PlanEntry] | None = None
    thought: list[str] | None = None
    asked: set[tuple[int, int]] = field(default_factory=set)
    options: tuple[str, int, list[str]] | None = None
    """A pick-one question seen on a complete line: its text, row and the lines under it
    so far (its choices); asked at the next settle, once they are all on the screen."""
    in_flight: int = 1
    saw_busy: bool = False
    """A ``parse.x-busy`` line showed after Enter: the program took the prompt (P9)."""
    cancel_pending: bool = False
    """A cancel came before the program showed it was busy: sent once it does."""


BOX_SIDES = "\u2502\u2503\u2551\u258f\u258e|"
"""Right edges of input boxes: │ ┃ ║ ▏ ▎ |."""


def compact(text: str) -> str:
    """``text`` without any whitespace (echo is compared this way: wrapping and prompts
    move spaces around)."""
    return "".join(text.split())


def prompt_like(prefix: str, prompts: set[str]) -> bool:
    return (not prefix or prefix in prompts
            or (len(prefix) <= 8 and not any(c.isalnum() for c in prefix)))


def error_code(line: str) -> str:
    low = line.lower()
    if ("rate" in low and "limit" in low) or "429" in low:
        return "rate_limit"
    if any(w in low for w in ("auth", "login", "unauthorized", "401", "api key")):
        return "auth_error"
    if "context" in low and any(w in low for w in ("length", "window", "overflow", "too long")):
        return "context_overflow"
    if "model" in low and any(w in low for w in ("not found", "unavailable", "overloaded")):
        return "model_unavailable"
    return "agent_error"


def echoed(turn: Turn, text: str, columns: int) -> bool:
    """Is this row the program echoing the prompt back (P10)?

    A row is echo when it ends with the next prompt line and what stands before
    it is empty, a prompt already seen (``tcap$``) or a continuation prompt (``...``,
    ``>``: a few characters, none of them a letter or digit); a full-width
    row ending with the start of that line is the first part of a wrapped echo.  A
    first row that is no echo at all means the program does not echo: stop looking.
    """
    squeezed = compact(text)
    if not squeezed:
        return False
    first, turn.echo_checked = not turn.echo_checked, True
    cur = turn.echo[0]
    if squeezed.endswith(cur):
        prefix = squeezed[:-len(cur)]
        if first or prompt_like(prefix, turn.prompts):
            if prefix:
                turn.prompts.add(prefix)
            turn.echo.popleft()
            return True
    if len(text) >= columns - 1:
        for k in range(min(len(squeezed), len(cur)), 0, -1):
            prefix = squeezed[:-k]
            if squeezed.endswith(cur[:k]) and (first or prompt_like(prefix, turn.prompts)):
                if prefix:
                    turn.prompts.add(prefix)
                turn.echo[0] = cur[k:]
                return True
    if first:
        turn.echo.clear()
    return False


def flush_text(turn: Turn) -> list[Output]:
    """The text lines gathered so far, as one ``cap.text_chunk``."""
    if not turn.buf:
        return []
    text = "\n".join(turn.buf) + "\n"
    turn.buf = []
    return [TextChunk(message_id=turn.message_id, text=text)]


def flush_plan(turn: Turn) -> list[Output]:
    entries, turn.plan = turn.plan, None
    if not entries:
        return []
    return [*flush_text(turn), Plan(entries=tuple(entries))]


def flush_sections(turn: Turn) -> list[Output]:
    """Close an open plan or thought section (a blank line, a settle, the turn's end)."""
    out = flush_plan(turn)
    lines, turn.thought = turn.thought, None
    if lines:
        out += flush_text(turn)
        out.append(Thought(message_id=turn.message_id, text="\n".join(lines)))
    return out
