"""The fleet file's operational tables — ``[setup]`` and ``[rate_limit]`` — checked apart
from the routing and policy parts, so each can grow without the other's churn.

Problems go to the same checker as the rest of the file, so a fleet still reports every
problem at once, each with its path.
"""

from __future__ import annotations

import math
import shlex
from pathlib import PurePosixPath
from typing import Any

from trio_cap.actors.fleet.model import RateLimit, Setup

SETUP_KEYS = {"copy", "run", "timeout_s"}
RATE_LIMIT_KEYS = {"retries", "backoff_s", "max_backoff_s"}


def seconds(c: Any, value: Any, path: str, default: float) -> float:
    """A positive, finite number of seconds (a wait with no bound is never accepted)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value <= 0:
        c.bad(path, f"expected seconds as a number > 0, got {value!r}")
        return default
    return float(value)


def check_setup(c: Any, raw: Any, worktrees: str) -> Setup:
    """``[setup]``: ``copy`` (relative paths inside the checkout), ``run`` (argv lists, or
    strings split as a shell would split them — never run by one), ``timeout_s``."""
    if raw is None:
        return Setup()
    if not isinstance(raw, dict):
        c.bad("setup", "expected a table with copy, run, timeout_s")
        return Setup()
    for key in sorted(set(raw) - SETUP_KEYS, key=str):
        c.bad(f"setup.{key}", f"unknown key (setup takes {', '.join(sorted(SETUP_KEYS))})")
    copy = raw.get("copy", [])
    if isinstance(copy, str):
        copy = [copy]
    files: list[str] = []
    if not isinstance(copy, list):
        c.bad("setup.copy", f"expected a list of paths, got {copy!r}")
        copy = []
    for i, item in enumerate(copy):
        where = f"setup.copy[{i}]"
        if not isinstance(item, str) or not item.strip():
            c.bad(where, f"expected a path, got {item!r}")
            continue
        pure = PurePosixPath(item)
        if pure.is_absolute() or ".." in pure.parts:
            c.bad(where, f"{item!r} must be a path inside the checkout (relative, no '..')")
            continue
        files.append(str(pure))
    run = raw.get("run", [])
    if isinstance(run, str):
        run = [run]
    commands: list[tuple[str, ...]] = []
    if not isinstance(run, list):
        c.bad("setup.run", f"expected a list of commands, got {run!r}")
        run = []
    for i, item in enumerate(run):
        where = f"setup.run[{i}]"
        argv: list[str] | None = None
        if isinstance(item, str):
            try:
                argv = shlex.split(item)
            except ValueError as exc:
                c.bad(where, f"cannot split {item!r}: {exc}")
                continue
        elif isinstance(item, list) and all(isinstance(a, str) for a in item):
            argv = item
        if not argv:
            c.bad(where, f"expected a command (argv list or string), got {item!r}")
            continue
        commands.append(tuple(argv))
    timeout = seconds(c, raw.get("timeout_s"), "setup.timeout_s", Setup().timeout_s)
    if (files or commands) and worktrees == "none":
        c.bad("setup", 'setup runs in each new working directory, and worktrees = "none" '
                       'makes none: use "git" or "dirs"')
    return Setup(copy=tuple(files), run=tuple(commands), timeout_s=timeout)


def check_rate_limit(c: Any, raw: Any) -> RateLimit:
    """``[rate_limit]``: ``retries`` (pauses in a row before giving up, >= 0),
    ``backoff_s`` and ``max_backoff_s`` (seconds, the first at most the second)."""
    default = RateLimit()
    if raw is None:
        return default
    if not isinstance(raw, dict):
        c.bad("rate_limit", "expected a table with retries, backoff_s, max_backoff_s")
        return default
    for key in sorted(set(raw) - RATE_LIMIT_KEYS, key=str):
        c.bad(f"rate_limit.{key}",
              f"unknown key (rate_limit takes {', '.join(sorted(RATE_LIMIT_KEYS))})")
    retries = raw.get("retries", default.retries)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        c.bad("rate_limit.retries", f"expected a whole number >= 0, got {retries!r}")
        retries = default.retries
    backoff = seconds(c, raw.get("backoff_s"), "rate_limit.backoff_s", default.backoff_s)
    most = seconds(c, raw.get("max_backoff_s"), "rate_limit.max_backoff_s",
                   max(default.max_backoff_s, backoff))
    if backoff > most:
        c.bad("rate_limit.backoff_s", f"{backoff:g} s is more than max_backoff_s ({most:g} s)")
    return RateLimit(retries=retries, backoff_s=backoff, max_backoff_s=most)
