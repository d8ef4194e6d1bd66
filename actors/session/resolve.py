"""The session actor's look at the filesystem for the risk rating: symlinks.

Why here and not in the rating: the session machine is pure, so it judges
paths as strings, and a string cannot show that ``link/f`` goes through a
symlink out of the workspace.  This Trio-side helper resolves, once per
request, the workspace paths the request names (glob patterns expanded as
the shell would), and the actor logs what it found as a
``permission.paths_resolved`` event placed just before the request; the
machine rates from that event, so a replay gets the same rating with no
filesystem.  A path that cannot be checked (too many glob matches, an
invalid name) is reported as outside: when unsure, refuse.
"""

from __future__ import annotations

import glob
import itertools
import os
from collections.abc import Sequence

import trio

from trio_cap.actors.risk import paths_named
from trio_cap.events.kinds import Event, PermissionPathsResolved, PermissionRequest

MAX_GLOB_MATCHES = 1000


async def with_resolved_paths(events: Sequence[Event], cwd: str | None) -> list[Event]:
    """``events`` with a ``permission.paths_resolved`` before each request naming paths."""
    if cwd is None or not any(type(e) is PermissionRequest for e in events):
        return list(events)
    out: list[Event] = []
    for event in events:
        if type(event) is PermissionRequest:
            named = paths_named(event.tool, event.intent, event.scope, cwd)
            if named:
                outside = await trio.to_thread.run_sync(outside_of, cwd, named)
                out.append(PermissionPathsResolved(req_id=event.req_id, checked=len(named),
                                                   outside=outside))
        out.append(event)
    return out


def outside_of(cwd: str, paths: Sequence[str]) -> tuple[str, ...]:
    """The paths (as named) that resolve outside ``cwd`` once symlinks are followed."""
    root = os.path.realpath(cwd)
    prefix = root.rstrip(os.sep) + os.sep
    found: list[str] = []
    for path in dict.fromkeys(paths):
        try:
            if glob.has_magic(path):
                matches = list(itertools.islice(glob.iglob(path), MAX_GLOB_MATCHES + 1))
                if len(matches) > MAX_GLOB_MATCHES:
                    found.append(path)
                    continue
                candidates = [*matches, path]
            else:
                candidates = [path]
            for candidate in candidates:
                full = os.path.realpath(candidate)
                if full != root and not full.startswith(prefix):
                    found.append(path)
                    break
        except (OSError, ValueError):
            found.append(path)
    return tuple(found)
