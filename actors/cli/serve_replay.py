"""``cap replay LOG --agent SESSION_ID --serve stream-json|acp|pty``: a recorded agent on stdio.

The Trio shell of :class:`~trio_cap.actors.replay.playback.Playback`: stdin is
read as lines (stream-json, ACP) or bytes (PTY), stdout gets the recorded
bytes.  On a terminal (PTY) the playback first puts it in raw mode, as the
recorded program did (its echo is in the recording; the terminal's own would
double it), and keeps the recorded gaps between the driver's keys and the
program's output unless ``--fast``.  ``cap run --agent replay:LOG#SESSION``
starts it as ``python -m trio_cap.actors.cli.serve_replay LOG SESSION [driver
flags]`` over the binding the session was recorded on: the flags a stream-json
driver adds (Claude Code's own) are accepted, and ``--session-id`` /
``--resume`` name the live agent session id, used in place of the recorded one.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import trio

from trio_cap.actors.cli.common import EXIT_OK, UsageError
from trio_cap.actors.replay.check import group_sessions
from trio_cap.actors.replay.playback import (
    SERVABLE,
    CloseOutput,
    Exit,
    Expect,
    Hold,
    Playback,
    Write,
)
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import SessionReady, SessionStarting


def _recorded(log_path: str, session: str) -> list[Envelope]:
    from trio_cap.actors.cli.log_cmd import open_readonly

    log = open_readonly(log_path)
    try:
        streams = group_sessions([log.read()], session)
    finally:
        log.close()
    if session not in streams:
        raise UsageError(f"no session {session!r} in {log_path}")
    return streams[session]


def recorded_binding(recorded: list[Envelope]) -> str | None:
    """The binding the session's agent spoke (its last connection's, after a fallback)."""
    found = [e.event.binding for e in recorded  # type: ignore[attr-defined]
             if type(e.event) is SessionStarting]
    return found[-1] if found else None


def serve_command(args: argparse.Namespace) -> int:
    if args.agent is None or args.serve is None:
        raise UsageError("--agent SESSION_ID and --serve BINDING go together")
    if args.serve not in (*SERVABLE, "a2a"):
        raise UsageError(f"--serve {args.serve}: this build plays a recorded agent back over "
                         f"{', '.join(SERVABLE)} or a2a only")
    recorded = _recorded(args.log, args.agent)
    if args.serve == "a2a":
        from trio_cap.actors.cli.serve_replay_a2a import serve_a2a_playback

        return serve_a2a_playback(args, recorded)
    try:
        playback = Playback(recorded, args.serve)
    except ValueError as exc:
        raise UsageError(f"--agent {args.agent}: {exc}") from None
    live = _live_session_id(getattr(args, "driver_flags", []) or [])
    old = next((e.event.agent_session_id for e in recorded  # type: ignore[attr-defined]
                if type(e.event) is SessionReady), None)
    if live and old and live != old:
        playback.subs[old] = live
    with _raw_terminal(playback.binding == "pty"):
        return trio.run(_serve, playback, bool(getattr(args, "fast", False)))


@contextmanager
def _raw_terminal(wanted: bool) -> Iterator[None]:
    """A terminal on stdin in raw mode (no echo, no line editing, output as recorded: the
    recorded program's own echo is in the recording), as it was again afterwards."""
    fd = sys.stdin.fileno()
    if not wanted or not os.isatty(fd):
        yield
        return
    import tty

    from trio_cap.actors.cli.terminal import terminal_mode

    with terminal_mode(fd, tty.setraw):
        yield


def _live_session_id(argv: list[str]) -> str | None:
    for i, arg in enumerate(argv):
        for flag in ("--session-id", "--resume"):
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
            if arg == flag and i + 1 < len(argv):
                return argv[i + 1]
    return None


async def _serve(playback: Playback, fast: bool = False) -> int:
    terminal = playback.binding == "pty"
    # FdStream owns and closes its fd: copies, so stdin stays open for the terminal's restore
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    stdout = trio.lowlevel.FdStream(os.dup(sys.stdout.fileno()))
    buffered = bytearray()
    eof = False
    timed = terminal and not fast
    mark: tuple[float, float] | None = None
    """(recorded time, live time) of the last step: the next write keeps the recorded gap."""

    async def keys(n: int) -> bytes | None:
        nonlocal eof
        while len(buffered) < n and not eof:
            chunk = await stdin.receive_some(65536)
            if not chunk:
                eof = True
            buffered.extend(chunk)
        if len(buffered) < n:
            return None
        got = bytes(buffered[:n])
        del buffered[:n]
        return got

    async def lines(n: int) -> bytes | None:
        nonlocal eof
        while buffered.count(b"\n") < n and not eof:
            chunk = await stdin.receive_some(65536)
            if not chunk:
                eof = True
            buffered.extend(chunk)
        if buffered.count(b"\n") < n:
            return None
        cut = 0
        for _ in range(n):
            cut = buffered.index(b"\n", cut) + 1
        got = bytes(buffered[:cut])
        del buffered[:cut]
        return got

    for step in playback.steps():
        at = getattr(step, "at", None)
        if timed and mark is not None and at is not None and type(step) is Write:
            await trio.sleep_until(mark[1] + max(0.0, at - mark[0]))  # the recorded gap
        if type(step) is Write:
            if step.stderr:
                sys.stderr.buffer.write(step.data)
                sys.stderr.flush()
            else:
                await stdout.send_all(step.data)
        elif type(step) is Expect:
            if step.eof:  # the recorded driver closed stdin here: wait for this one to
                while not eof:
                    chunk = await stdin.receive_some(65536)
                    eof = not chunk
                continue
            got = await (keys(step.size) if terminal else lines(step.lines))
            if got is None:  # the driver closed stdin earlier than the recorded one did
                print("cap: replay: the driver closed stdin before the recording ended; "
                      "stopping the playback", file=sys.stderr)
                return EXIT_OK
            playback.learn(step.recorded, got)
        elif type(step) is CloseOutput:
            await stdout.aclose()
            null = os.open(os.devnull, os.O_WRONLY)  # our stdout's last copy goes: the driver
            os.dup2(null, sys.stdout.fileno())       # reads the end of output, as recorded
            os.close(null)
        elif type(step) is Exit:
            return step.code
        elif type(step) is Hold:
            while not eof:  # until the driver closes our input (a terminal: hangs up)
                eof = not await stdin.receive_some(65536)
            return EXIT_OK
        if at is not None:
            mark = (at, trio.current_time())
    return EXIT_OK


def main(argv: list[str]) -> int:
    """``python -m trio_cap.actors.cli.serve_replay LOG SESSION [driver flags]``."""
    from trio_cap.actors.cli.errors import report

    if len(argv) < 2:
        print("usage: python -m trio_cap.actors.cli.serve_replay LOG SESSION_ID [flags]",
              file=sys.stderr)
        return 2
    args = argparse.Namespace(log=argv[0], agent=argv[1], serve=None, fast=False,
                              driver_flags=argv[2:])
    try:
        args.serve = recorded_binding(_recorded(args.log, args.agent)) or "stream-json"
        return serve_command(args)
    except BaseException as exc:  # one line and an exit code, as every cap command
        return report(exc)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
