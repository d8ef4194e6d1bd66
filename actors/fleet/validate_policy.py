"""The fleet file's policy extras — per-tool lists and ``[auto_answer]`` — checked apart from
routing, with every problem sent to the same checker so ``cap fleet validate`` still
reports them all at once, each with its path.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from trio_cap.actors.fleet.answerer import (
    DEFAULT_ARCHIVE,
    DEFAULT_MAX_PASSAGES,
    DEFAULT_THRESHOLD,
)
from trio_cap.actors.fleet.model import AutoAnswerSettings

AUTO_ANSWER_KEYS = {"enabled", "archive", "threshold", "max_passages"}
MAX_PASSAGES = 20
"""More passages than this is no longer an answer but a reading list."""


def check_tools(c: Any, raw: dict, path: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``allow_tools`` / ``deny_tools``: lists of tool names or globs; a pattern in both is a
    contradiction the author should resolve, not one deny quietly wins."""
    lists = []
    for key in ("allow_tools", "deny_tools"):
        value = raw.get(key, [])
        where = f"{path}.{key}" if path else key
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip()
                                                  for v in value):
            c.bad(where, f"expected a list of tool names or globs (\"Read\", \"mcp__*\"), "
                         f"got {value!r}")
            value = []
        lists.append(tuple(value))
    allow, deny = lists
    for i, pattern in enumerate(allow):
        if pattern in deny:
            where = f"{path}.allow_tools[{i}]" if path else f"allow_tools[{i}]"
            c.bad(where, f"{pattern!r} is in deny_tools too: keep it in one list")
    return allow, deny


def check_auto_answer(c: Any, raw: Any, base_dir: Path) -> AutoAnswerSettings | None:
    """``[auto_answer]``: ``enabled`` (default true once the table is there), ``archive`` (a
    folder with markdown files, relative to the fleet file; default ``docs/research/``),
    ``threshold`` (a BM25 score > 0), ``max_passages`` (1 to 20)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        c.bad("auto_answer", "expected a table with enabled, archive, threshold, max_passages")
        return None
    for key in sorted(set(raw) - AUTO_ANSWER_KEYS, key=str):
        c.bad(f"auto_answer.{key}",
              f"unknown key (auto_answer takes {', '.join(sorted(AUTO_ANSWER_KEYS))})")
    enabled = c.flag(raw, "enabled", "auto_answer.enabled")
    archive = c.text(raw, "archive", "auto_answer.archive") or DEFAULT_ARCHIVE
    threshold = raw.get("threshold", DEFAULT_THRESHOLD)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) \
            or not math.isfinite(threshold) or threshold <= 0:
        c.bad("auto_answer.threshold",
              f"expected a BM25 score as a number > 0, got {threshold!r}")
        threshold = DEFAULT_THRESHOLD
    most = raw.get("max_passages", DEFAULT_MAX_PASSAGES)
    if isinstance(most, bool) or not isinstance(most, int) or not 1 <= most <= MAX_PASSAGES:
        c.bad("auto_answer.max_passages",
              f"expected a whole number from 1 to {MAX_PASSAGES}, got {most!r}")
        most = DEFAULT_MAX_PASSAGES
    if enabled is False:
        return None
    folder = (base_dir / archive).resolve()
    if not folder.exists():
        c.bad("auto_answer.archive", f"archive folder {archive} does not exist ({folder})")
    elif not folder.is_dir():
        c.bad("auto_answer.archive", f"{archive} is not a folder")
    elif not any(p.is_file() for p in folder.rglob("*.md")):
        c.bad("auto_answer.archive", f"archive folder {archive} has no markdown (.md) files")
    return AutoAnswerSettings(str(folder), float(threshold), most)
