"""Reads the tables of docs/cap.md so drift tests can hold the code to them."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "cap.md"


def table(heading: str) -> list[list[str]]:
    """Rows (cells stripped of backticks) of the first table under ``## heading``."""
    text = DOC.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(heading)}\s*$", text, re.M)
    assert match, f"docs/cap.md has no section '## {heading}'"
    rows: list[list[str]] = []
    started = False
    for line in text[match.end():].splitlines():
        if line.startswith("## "):
            break
        if line.startswith("|"):
            started = True
            cells = [c.strip().replace("`", "") for c in line.strip().strip("|").split("|")]
            rows.append(cells)
        elif started:
            break
    assert len(rows) > 2, f"no table under '## {heading}'"
    return rows[2:]  # drop the header and the |---| line
