"""What the PTY settle machine is told: its settings, built-in patterns and line helpers.

The machine never compiles a pattern itself: manifest patterns are RE2
(CAP §5.4) and the RE2 compiler lives with the manifest code, a layer above
the machines.  The shell compiles them (``connector.settings_for``) and hands
the machine objects with a ``search(text)`` method; this module only says
which strings to compile when the manifest names none, so the built-ins are
RE2 patterns too and obey the same rules as a manifest's.

Pure: the standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from trio_cap.events.kinds import PlanEntry, PlanStatus


class Matcher(Protocol):
    """A compiled pattern (RE2's, or ``re``'s in tests): ``search`` → a match or None."""

    def search(self, text: str) -> Any: ...


IDLE_WINDOW = 0.2
"""Seconds without output before a screen counts as settled (CAP Appendix A3)."""
ENTER_GAP = 0.03
"""Seconds between typing a prompt and pressing Enter, so a TUI does not drop the Enter."""
SUBMIT_RETRIES = 2
"""Enters re-sent when a settled screen still shows the prompt in the input line."""
CANCEL_GAP = 0.1
"""Seconds between the writes of a multi-key cancel (Esc, then Esc again)."""
PASTE_THRESHOLD = 1024
"""Input longer than this many bytes (or with a newline) goes as one bracketed paste."""

BUILTIN_BLOCKED = (
    "(?i)do you trust the (files|contents|authors)",
    "(?i)trust (this|the) (folder|directory|workspace|project)\\?",
    "(?i)please (run /login|log ?in|sign ?in)",
    "(?i)(select|choose) (a |an |your )?(login|sign-in|authentication|auth) method",
    "(?i)press enter to (continue|sign in|log ?in|open|authenticate)",
    "(?i)(update|upgrade) (is )?available.*(y/n|yes/no|\\[y/N\\]|\\[Y/n\\])",
    "(?i)would you like to (update|upgrade|migrate)",
    "(?i)migrat(e|ion)\\b.*\\?\\s*(\\(|\\[)?(y/n|yes/no)",
)
"""Dialogs that block a TUI before or between turns: trust-this-folder, login/auth,
update and migration prompts (each bundled agent shows one of these on a fresh HOME).
A manifest adds its own with ``parse.x-blocked``."""

BUILTIN_CHROME = (
    "^[\\s\u2500-\u257f\u2580-\u259f]+$",
    "^\\s*[\u2502\u2503\u2551].*[\u2502\u2503\u2551]\\s*$",
    "(?i)\\besc to (interrupt|cancel)\\b",
    "^\\s*[\u00b7\u2722\u2733\u2736\u273b\u273d\u2810-\u28ff\u25d0-\u25d3]\\s+\\S+\u2026",
    "^\\s*\\? for shortcuts",
)
"""Redraw chrome that is never turn text: lines of box drawing, a box's sides, spinner
lines ("✶ Thinking… (esc to interrupt)"), shortcut footers.  A manifest adds its own
with ``parse.x-chrome``."""


@dataclass(frozen=True)
class PtySettings:
    """Everything the machine reads from a manifest, already compiled."""

    cols: int = 120
    rows: int = 40
    ready_when: Matcher | None = None
    """None: any visible character on a settled screen means ready."""
    idle: Sequence[Matcher] = ()
    learn_prompt: bool = False
    """Also count the line shown at ready as idle (an ad-hoc ``pty:CMD`` whose prompt the
    default idle patterns do not know, e.g. ``bash-5.2$``)."""
    blocked: Sequence[Matcher] = ()
    busy: Sequence[Matcher] = ()
    """Lines that say the program is working: never ready or idle while one shows."""
    busy_wait: float = 30.0
    """With ``busy`` lines: how long after Enter an idle-looking screen that never showed
    one still does not end the turn (an agent that fails before it starts)."""
    redraw: bool = False
    """The program repaints its main screen in place (Ink): read output as P12 does."""
    chrome: Sequence[Matcher] = ()
    tool_call_start: Matcher | None = None
    tool_call_end: Matcher | None = None
    plan_section: Matcher | None = None
    thought_section: Matcher | None = None
    ask_yes_no: Matcher | None = None
    ask_options: Matcher | None = None
    error_lines: Sequence[Matcher] = ()
    bracketed_paste: bool = False
    cancel: str = "graceful"
    """``capabilities.mid_turn_cancel``: graceful (Ctrl-C), hard (kill), none (refuse)."""
    cancel_keys: tuple[bytes, ...] = (b"\x03",)
    """What a graceful cancel types, one write per item :data:`CANCEL_GAP` apart."""
    text_prefix: Matcher | None = None
    """A reply glyph (``● ``) stripped from the start of text lines."""
    queued_input: bool = False
    idle_window: float = IDLE_WINDOW
    enter_gap: float = ENTER_GAP
    submit_retries: int = SUBMIT_RETRIES
    raw_bytes: bool = False
    """Emit ``cap.pty.raw_bytes`` for every read (only when a subscriber opted in)."""
    scrollback: int = 10_000
    yes: str = "y"
    no: str = "n"
    extra: dict[str, Any] = field(default_factory=dict)


def matches(patterns: Sequence[Matcher], text: str) -> bool:
    return any(p.search(text) is not None for p in patterns)


def group(match: Any, name: str) -> str | None:
    """A named group's text, or None when the pattern has no such group or it did not take part."""
    try:
        value = match.group(name)
    except (IndexError, KeyError, ValueError, TypeError):
        return None
    return value if isinstance(value, str) else None


_FAILED_STATUS = frozenset({"failed", "failure", "error", "errored", "fail", "denied",
                            "rejected", "cancelled", "canceled", "✗", "✘", "x"})


def status_is_error(status: str | None) -> bool:
    return status is not None and status.strip().lower() in _FAILED_STATUS


_DONE = ("[x]", "[X]", "☑", "☒", "✔", "✓", "✅", "●")
_DOING = ("[~]", "[-]", "◐", "◑", "→", "▶", "⏵", "◉")
_TODO = ("[ ]", "☐", "○", "◯", "□")
_BULLETS = ("- ", "* ", "• ", "+ ")


def plan_entry(line: str, index: int) -> PlanEntry | None:
    """A plan line ("- [x] write tests", "2. ship it", "☐ docs") as an entry, else None."""
    text = line.strip()
    if not text:
        return None
    status: PlanStatus = "pending"
    item = False
    for prefix in _BULLETS:
        if text.startswith(prefix):
            text, item = text[len(prefix):].lstrip(), True
            break
    else:
        head, dot, rest = text.partition(". ")
        if dot and head.isdigit():
            text, item = rest.lstrip(), True
    for marks, mark_status in ((_DONE, "completed"), (_DOING, "in_progress"), (_TODO, "pending")):
        for mark in marks:
            if text.startswith(mark):
                text, item, status = text[len(mark):].lstrip(), True, mark_status  # type: ignore[assignment]
                break
        else:
            continue
        break
    if not item or not text:
        return None
    return PlanEntry(id=f"plan-{index}", content=text, status=status)


def yes_no_text(value: Any, yes: str, no: str) -> str | None:
    """What to type for a yes/no answer, or None when the answer says neither."""
    if isinstance(value, bool):
        return yes if value else no
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("y", "yes", "true", "ok", "allow", "1"):
            return yes
        if word in ("n", "no", "false", "deny", "0"):
            return no
    return None


_MARKERS = "\u276f\u203a>\u25b8*\u2022-"
"""Selection markers TUIs put before the highlighted option."""


def option_choices(question: str, following: Sequence[str]) -> list[tuple[str, str]]:
    """(label, what to type) for the options listed under a pick-one question.

    Numbered lines ("1. Yes", "> 2. No") answer with their number, bullets with
    their text; a question naming its options inline ("(a/b/c)") with the word.
    """
    out: list[tuple[str, str]] = []
    for line in following:
        text = line.strip().lstrip(_MARKERS).strip()
        head, sep, rest = text.partition(".")
        if sep and head.isdigit() and rest.strip():
            out.append((rest.strip(), head))
        elif line.strip()[:1] in ("-", "*", "•") and text:
            out.append((text, text))
    if out:
        return out
    if "(" in question and ")" in question:
        inner = question[question.rfind("(") + 1:question.rfind(")")]
        words = [w.strip() for w in inner.replace(",", "/").split("/") if w.strip()]
        if len(words) >= 2:
            return [(w, w) for w in words]
    return []
