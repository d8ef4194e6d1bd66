"""Telling a PostgreSQL URL from a file path, without importing a database driver.

Every command and ``open_orchestrator`` ask this; only a URL needs psycopg, so a run on
the file log (and every ``cap-agent`` start) never pays for importing it.
"""

from __future__ import annotations

import re

URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(target: object) -> bool:
    return isinstance(target, str) and target.startswith(URL_SCHEMES)


def redact(url: str) -> str:
    """The URL as messages show it: a password never reaches a terminal or a log."""
    return re.sub(r"^(postgres(?:ql)?://[^:/@]*):[^@/]*@", r"\1:***@", url)
