"""The driven agent's command line: the manifest's fast-path argv plus the session config.

Pure, so the exact argv is testable without spawning anything.  Flags the
manifest's argv already carries are not repeated; flags an ad-hoc
``stream-json:CMD`` agent lacks (the stream-json formats, ``--verbose``) are
added, because without them Claude Code does not speak stream-json at all.
"""

from __future__ import annotations

from collections.abc import Sequence

from trio_cap.events.kinds import SessionConfig

PERMISSION_MODES = {"none": "bypassPermissions", "confirm": "default", "interactive": "default"}
"""CAP ``permission_mode`` → Claude Code's ``--permission-mode``.

``none`` is the ``bypass`` policy: the agent's own no-prompt mode.  The other
two keep Claude Code's default mode, where every write or command it does not
consider safe comes to trio-cap as a ``can_use_tool`` prompt.
"""


def _has(argv: Sequence[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in argv)


def driver_argv(base: Sequence[str], config: SessionConfig, agent_session: str) -> tuple[str, ...]:
    """``agent_session`` is the agent's session uuid: resumed when the config names one."""
    if not base:
        raise ValueError("the manifest declares no stream-json argv")
    argv = list(base)

    def add(flag: str, *value: str) -> None:
        if not _has(argv, flag):
            argv.extend((flag, *value))

    add("--output-format", "stream-json")
    add("--verbose")
    add("--include-partial-messages")
    add("--permission-prompt-tool", "stdio")
    add("--permission-mode", PERMISSION_MODES[config.permission_mode])
    if config.model:
        add("--model", config.model)
    if config.max_turns is not None:
        add("--max-turns", str(config.max_turns))
    if config.system_prompt:
        # Appended, not replacing: Claude Code's own prompt is what teaches it its tools.
        add("--append-system-prompt", config.system_prompt)
    if config.session_resume_id:
        add("--resume", config.session_resume_id)
    else:
        argv.append(f"--session-id={agent_session}")
    add("--input-format", "stream-json")  # last, as the SDK puts it
    return tuple(argv)
