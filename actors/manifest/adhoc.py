"""Ad-hoc agent specs: ``pty:CMD``, ``stream-json:CMD``, ``acp:CMD``, ``a2a:URL``.

Naming an agent that has no manifest should still work, as in the Rust
reference's CLI.  The spec becomes a minimal manifest for exactly that one
binding; it goes through the same validator as a file, so it obeys the same
rules.  CMD is split with :mod:`shlex` because a person typed it on a command
line; what comes out is an argv array and is never given to a shell.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from typing import Any
from urllib.parse import urlsplit

from trio_cap.actors.manifest.checks import PROGRAM_RULE, is_safe_program
from trio_cap.actors.manifest.model import Manifest
from trio_cap.actors.manifest.validate import ManifestInvalid, validate_data

PREFIXES = {"pty": "pty", "stream-json": "stream-json", "acp": "acp", "a2a": "a2a",
            "replay": "stream-json"}
"""Spec prefix → binding name (``replay:LOG#SESSION``: a recorded agent played back, over
the binding it was recorded on: :func:`replay_binding`; over a2a on a port ``cap run``
opens, :data:`A2A_PLAYBACK`)."""

PTY_RECORDED = "x-pty-recorded"
"""Manifest table a played-back PTY session carries: the recorded session's PTY settings
(its patterns, size, timings), so the driver reads the playback as it read the original."""

A2A_PLAYBACK = "x-a2a-playback"
"""Manifest table of a recorded A2A agent (``replay:LOG#SESSION`` recorded over a2a): the
log and session whose recording ``cap run`` serves on 127.0.0.1 for the run; its
``fast_path.a2a_serve_at`` is a placeholder until that server listens."""

A2A_PLAYBACK_URL = "http://127.0.0.1:1/"
"""Placeholder address of a played-back A2A agent before its server listens (nothing there)."""

READY_ANY_OUTPUT = "\\S"
"""Without knowing the program, any visible output counts as started."""


class AdHocError(ValueError):
    """An ad-hoc spec that cannot become a manifest (bad command or URL)."""


def adhoc_binding(spec: str) -> str | None:
    """The binding an ad-hoc spec names, or None when ``spec`` is not ad-hoc."""
    head, sep, _ = spec.partition(":")
    return PREFIXES.get(head) if sep else None


def _argv(spec: str, rest: str) -> list[str]:
    try:
        argv = shlex.split(rest)
    except ValueError as exc:
        raise AdHocError(f"{spec!r}: cannot split the command: {exc}") from None
    if not argv:
        raise AdHocError(f"{spec!r}: the command is empty")
    if "/" in argv[0] and not argv[0].startswith("/"):
        argv[0] = os.path.abspath(argv[0])  # ./my-agent is meant relative to here
    if not is_safe_program(argv[0]):
        raise AdHocError(f"{spec!r}: {argv[0]!r} {PROGRAM_RULE}")
    return argv


def _replay_argv(spec: str, rest: str) -> list[str]:
    """What ``cap replay LOG --agent SESSION --serve BINDING`` runs, as a program that
    also takes the flags a stream-json driver adds (Claude Code's)."""
    log, sep, session = rest.rpartition("#")
    if not sep or not log or not session:
        raise AdHocError(f"{spec!r}: expected replay:LOG#SESSION_ID")
    if not os.path.isfile(log):
        raise AdHocError(f"{spec!r}: no log file {log!r}")
    return [sys.executable, "-m", "trio_cap.actors.cli.serve_replay", os.path.abspath(log),
            session]


def replay_binding(spec: str, log: str, session: str) -> tuple[str, dict[str, Any] | None]:
    """The binding ``session`` was recorded over in ``log`` (its last connection's), and for
    PTY the machine settings it recorded."""
    from trio_cap.events.kinds import FrameOut, SessionStarting
    from trio_cap.events.log import FileEventLog

    try:
        opened = FileEventLog(log, readonly=True)
    except Exception as exc:  # a damaged or foreign file: one line, as any bad input
        raise AdHocError(f"{spec!r}: cannot read {log!r}: {exc}") from None
    binding: str | None = None
    settings: dict[str, Any] | None = None
    try:
        for env in opened.read():
            if env.stream != session:
                continue
            ev = env.event
            if type(ev) is SessionStarting:
                binding = ev.binding
            elif type(ev) is FrameOut and isinstance(ev.frame, dict) and \
                    isinstance(ev.frame.get("pty_machine"), dict):
                settings = ev.frame["pty_machine"].get("settings")
    finally:
        opened.close()
    if binding is None:
        raise AdHocError(f"{spec!r}: no session {session!r} in {log!r}")
    if binding not in ("stream-json", "acp", "pty", "a2a"):
        raise AdHocError(f"{spec!r}: the session was recorded over {binding}; a recorded "
                         "agent is played back over stream-json, acp, pty or a2a")
    return binding, settings


def _name_from(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")
    return name or "agent"


def adhoc_manifest(spec: str) -> tuple[Manifest, str]:
    """Synthesize the manifest for ``spec``; returns it with the one binding it allows."""
    binding = adhoc_binding(spec)
    if binding is None:
        raise AdHocError(f"{spec!r} is not an ad-hoc spec (pty:, stream-json:, acp:, a2a:)")
    rest = spec.partition(":")[2].strip()
    fast_path: dict[str, Any] = {
        "stream_json": False, "acp_stdio": False, "a2a_serve_at": False, "grpc": False,
    }
    extra: dict[str, Any] = {}
    if binding == "a2a":
        parts = urlsplit(rest)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise AdHocError(f"{spec!r}: expected a2a:http(s)://host[:port][/path]")
        name = _name_from(f"a2a-{parts.hostname}-{parts.port or parts.scheme}")
        # A remote agent has no local program; the PTY fields are placeholders
        # that are never used, because only the a2a binding is allowed.
        argv = ["a2a-remote"]
        fast_path["a2a_serve_at"] = rest
    elif spec.startswith("replay:"):
        argv = _replay_argv(spec, rest)
        name = _name_from(f"replay-{rest.rpartition('#')[2]}")
        binding, recorded = replay_binding(spec, argv[-2], argv[-1])
        if binding == "stream-json":
            fast_path["stream_json"] = argv
        elif binding == "acp":
            fast_path["acp_stdio"] = argv
        elif binding == "a2a":  # served on a port by the run itself (cap run)
            fast_path["a2a_serve_at"] = A2A_PLAYBACK_URL
            extra[A2A_PLAYBACK] = {"log": argv[-2], "session": argv[-1]}
        elif recorded is not None:
            extra[PTY_RECORDED] = recorded
    else:
        argv = _argv(spec, rest)
        name = _name_from(os.path.basename(argv[0]))
        if binding == "stream-json":
            fast_path["stream_json"] = argv
        elif binding == "acp":
            fast_path["acp_stdio"] = argv
    raw = {
        "agent": {"name": name, "binary": argv[0], "profiles": []},
        "startup": {"command": argv, "ready_when": {"pattern": READY_ANY_OUTPUT}},
        "fast_path": fast_path,
        "pty": {"cols": 120, "rows": 40},
        "capabilities": {"streaming_output": True},
        **extra,
    }
    try:
        return validate_data(raw, f"ad-hoc spec {spec!r}"), binding
    except ManifestInvalid as exc:
        raise AdHocError("; ".join(exc.lines())) from None
