"""``cap replay LOG --agent SESSION_ID --serve stream-json``: a recorded agent on stdio.

The Trio shell of :class:`~trio_cap.actors.replay.playback.Playback`: stdin is
read as lines, stdout gets the recorded bytes.  ``cap run --agent
replay:LOG#SESSION`` starts it as ``python -m trio_cap.actors.cli.serve_replay
LOG SESSION [driver flags]``: the flags a stream-json driver adds (Claude
Code's own) are accepted, and ``--session-id`` / ``--resume`` name the live
agent session id, used in place of the recorded one.
"""

from __future__ import annotations

import argparse
import sys

import trio

from trio_cap.actors.cli.common import EXIT_OK, UsageError
from trio_cap.actors.replay.check import group_sessions
from trio_cap.actors.replay.playback import CloseOutput, Exit, Expect, Playback, Write
from trio_cap.events.kinds import SessionReady

SERVABLE = ("stream-json",)
"""Bindings a recorded agent can be served on in this build."""


def serve_command(args: argparse.Namespace) -> int:
    from trio_cap.actors.cli.log_cmd import open_readonly

    if args.agent is None or args.serve is None:
        raise UsageError("--agent SESSION_ID and --serve BINDING go together")
    if args.serve not in SERVABLE:
        raise UsageError(f"--serve {args.serve}: this build plays a recorded agent back over "
                         f"{', '.join(SERVABLE)} only")
    log = open_readonly(args.log)
    streams = group_sessions([log.read()], args.agent)
    log.close()
    if args.agent not in streams:
        raise UsageError(f"no session {args.agent!r} in {args.log}")
    recorded = streams[args.agent]
    try:
        playback = Playback(recorded, args.serve)
    except ValueError as exc:
        raise UsageError(f"--agent {args.agent}: {exc}") from None
    live = _live_session_id(getattr(args, "driver_flags", []) or [])
    old = next((e.event.agent_session_id for e in recorded  # type: ignore[attr-defined]
                if type(e.event) is SessionReady), None)
    if live and old and live != old:
        playback.subs[old] = live
    return trio.run(_serve, playback)


def _live_session_id(argv: list[str]) -> str | None:
    for i, arg in enumerate(argv):
        for flag in ("--session-id", "--resume"):
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
            if arg == flag and i + 1 < len(argv):
                return argv[i + 1]
    return None


async def _serve(playback: Playback) -> int:
    stdin = trio.lowlevel.FdStream(sys.stdin.fileno())
    stdout = trio.lowlevel.FdStream(sys.stdout.fileno())
    buffered = bytearray()
    eof = False

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
            got = await lines(step.lines)
            if got is None:  # the driver closed stdin earlier than the recorded one did
                print("cap: replay: the driver closed stdin before the recording ended; "
                      "stopping the playback", file=sys.stderr)
                return EXIT_OK
            playback.learn(step.recorded, got)
        elif type(step) is CloseOutput:
            await stdout.aclose()
        elif type(step) is Exit:
            return step.code
    return EXIT_OK


def main(argv: list[str]) -> int:
    """``python -m trio_cap.actors.cli.serve_replay LOG SESSION [driver flags]``."""
    from trio_cap.actors.cli.errors import report

    if len(argv) < 2:
        print("usage: python -m trio_cap.actors.cli.serve_replay LOG SESSION_ID [flags]",
              file=sys.stderr)
        return 2
    args = argparse.Namespace(log=argv[0], agent=argv[1], serve="stream-json",
                              driver_flags=argv[2:])
    try:
        return serve_command(args)
    except BaseException as exc:  # one line and an exit code, as every cap command
        return report(exc)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
