"""A read's text chunks joined into runs: the ACP hot read's inner loop, in C when built.

While a turn runs, nearly everything an agent writes is a message's text chunks,
and the client joins consecutive ones into one event (``machine_hot.py``).  In
Python that loop costs ~1,300 instructions a chunk — a sixth of the whole bytes
→ CAP events drive — so ``_runs.c`` does the same in C, reading each Struct field
at its slot.  :func:`join_runs_py` here is the reference: the C loop is tested
against it (``tests/driver_acp/test_runs.py``), and it runs wherever the C
module was not built (no C compiler at install: the build marks it optional).

An *entry* is ``(kind, message_id, text)`` for a run — consecutive chunks of one
kind (:class:`~.frames.MessageChunkView` or :class:`~.frames.ThoughtChunkView`)
and one ``message_id``, text blocks, no ``_meta`` on the update or its block —
or, for anything else, the update itself.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from trio_cap.actors.bindings.acp import frames as f

try:
    from trio_cap.actors.bindings.acp import _runs  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - built wherever the tests run
    _runs = None

NATIVE = _runs is not None
"""True when the C loop runs (the bench says which)."""


class PyLayout:
    """The types one session's notifications decode to (what the C ``Layout`` reads
    offsets from)."""

    __slots__ = ("message", "note")

    def __init__(self, message: type, note: type) -> None:
        self.message, self.note = message, note


def layout(message: type, note: type) -> Any:
    """The layout :func:`join_runs` takes for a session's message and notification types."""
    if _runs is None:
        return PyLayout(message, note)
    return _runs.Layout(message, note, f.MessageChunkView, f.ThoughtChunkView, f.TextView,
                        UNSET)


def join_runs_py(items: list[Any], layout: PyLayout) -> list[Any]:
    """The runs and other updates of a read of one session's notifications, in order."""
    out: list[Any] = []
    text_t, message_t, thought_t = f.TextView, f.MessageChunkView, f.ThoughtChunkView
    run_kind: type | None = None
    run_id: Any = None
    parts: list[str] = []
    for item in items:
        if type(item) is not layout.message or type(item.params) is not layout.note:
            raise TypeError(f"join_runs: an item of type {type(item).__name__}")
        update = item.params.update
        kind = type(update)
        if (kind is message_t or kind is thought_t) and type(update.content) is text_t \
                and update.meta is UNSET and update.content.meta is UNSET:
            if kind is run_kind and update.message_id == run_id:
                parts.append(update.content.text)
                continue
            if run_kind is not None:
                out.append((run_kind, run_id, "".join(parts)))  # one part: the part itself
            run_kind, run_id, parts = kind, update.message_id, [update.content.text]
            continue
        if run_kind is not None:
            out.append((run_kind, run_id, "".join(parts)))  # one part: the part itself
            run_kind = None
        out.append(update)
    if run_kind is not None:
        out.append((run_kind, run_id, "".join(parts)))  # one part: the part itself
    return out


join_runs = join_runs_py if _runs is None else _runs.join_runs
