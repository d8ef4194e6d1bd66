"""``python -m bench pty``: the PTY driver's VT screen and its settle detection.

1. **VT feed throughput** on the shared corpus's redraw-heavy TUI stream
   (``gen_tty.py``: an Ink-style agent TUI at 120×40, spinner and input box
   redrawn every frame, a line scrolling off every 25 frames) and on plain
   scrolling text, in 4 KiB reads as a PTY master delivers them.  Contenders,
   run in turns and timed in CPU time: pyte's ``HistoryScreen`` with 10,000
   lines of history (the peer), pyte's plain ``Screen`` (no scrollback),
   :class:`TuiVtScreen` with 10,000 lines, and the whole settle machine
   (screen + rules, a turn running).  Ratio = × HistoryScreen; target ≥ 3×.
2. **Settle overhead beyond the idle window**: real ``bash`` turns through the
   connector; for each, the time from the arrival of the turn's last byte to
   the delivery of its turn end, minus the idle window (target < 20 ms).  Also
   the cost of one settle decision on a screen with a full scrollback.
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import pyte

from bench.common import interleaved_rates, row
from bench.corpus import CorpusMissing, generator

READ = 4096
COLS, ROWS = 120, 40
HISTORY = 10_000


def corpus(frames: int) -> tuple[bytes, bytes]:
    """(tui, plain) byte streams from ``gen_tty.py`` (seeded as its own main is)."""
    gen = generator("gen_tty")
    g = gen.Gen(11)
    return gen.tui(g, frames), gen.plain(g, 500_000)


def chunks(data: bytes) -> list[bytes]:
    return [data[i:i + READ] for i in range(0, len(data), READ)]


def _pyte(screen_factory: Callable[[], Any], reads: list[bytes], n: int) -> Callable[[], int]:
    def run() -> int:
        stream = pyte.ByteStream(screen_factory())
        for c in reads:
            stream.feed(c)
        return n
    return run


def _ours(reads: list[bytes], n: int) -> Callable[[], int]:
    from trio_cap.actors.bindings.pty.machine_screen import TuiVtScreen

    def run() -> int:
        screen = TuiVtScreen(COLS, ROWS, HISTORY)
        for c in reads:
            screen.feed(c)
        return n
    return run


def _settings() -> Any:
    from trio_cap.actors.bindings.pty.connector import settings_for
    from trio_cap.actors.manifest.validate import validate_data

    m = validate_data({
        "agent": {"name": "bench", "binary": "x", "profiles": []},
        "startup": {"command": ["x"], "ready_when": {"pattern": "\\S"}},
        "pty": {"cols": COLS, "rows": ROWS},
        "parse": {"idle": ["^>\\s*$"], "tool_call_start": "^⏺ (?P<tool>\\w+)\\((?P<args>.*)\\)$"},
        "capabilities": {"streaming_output": True},
    }, "bench manifest")
    return settings_for(m)


def _machine(reads: list[bytes], n: int) -> Callable[[], int]:
    """The whole machine: ready at the first settle, a turn running for the rest."""
    from trio_cap.actors.bindings.pty.machine import PtyMachine
    from trio_cap.actors.ids import SequentialIds
    from trio_cap.events.kinds import ContentBlock, UserInputInject

    settings = _settings()
    prompt = UserInputInject(content=(ContentBlock(text="go"),))

    def run() -> int:
        m = PtyMachine(settings, new_id=SequentialIds().new)
        m.receive_data(reads[0], 0.0)
        m.tick(1.0)
        m.send(prompt)
        m.tick(1.1)
        now = 1.1
        for c in reads[1:]:
            now += 0.001  # 4 KiB per ms: never quiet, as during a busy turn
            m.receive_data(c, now)
        return n
    return run


def feed_rows(quick: bool) -> None:
    frames = 600 if quick else 800  # pyte (the peer) sets the run time: under 2 minutes
    try:
        tui, plain = corpus(frames)
    except CorpusMissing as exc:
        raise SystemExit(f"bench pty: {exc}") from None
    repeat = 3 if quick else 5
    for label, data, n, unit in (("TUI redraw stream", tui, frames, "frames"),
                                 ("plain scrolling text", plain, plain.count(b"\n"), "lines")):
        reads = chunks(data)
        rates = interleaved_rates({
            "history": _pyte(lambda: pyte.HistoryScreen(COLS, ROWS, history=HISTORY), reads, n),
            "plain": _pyte(lambda: pyte.Screen(COLS, ROWS), reads, n),
            "ours": _ours(reads, n),
            "machine": _machine(reads, n),
        }, repeat=repeat)
        base = rates["history"]
        print(f"  {label}: {len(data):,} bytes in {len(reads):,} reads of {READ} B, "
              f"{unit}/s, × pyte HistoryScreen({HISTORY:,})")
        row(f"pyte HistoryScreen, {HISTORY:,} lines history (peer)", base, base)
        row("pyte Screen, no scrollback (reference)", rates["plain"], base)
        row(f"TuiVtScreen, {HISTORY:,} lines scrollback", rates["ours"], base,
            "target ≥ 3×")
        row("PtyMachine: TuiVtScreen + settle rules, turn running", rates["machine"], base)
    for label, data in (("TUI", tui), ("plain", plain)):
        _same_screens(label, data)


def _same_screens(label: str, data: bytes) -> None:
    """Both kept the same scrollback and show the same screen (the speed is not from
    skipping work)."""
    from trio_cap.actors.bindings.pty.machine_screen import TuiVtScreen

    data = data.rsplit(b"\x1b[?1049l", 1)[0]  # before the TUI leaves its alternate screen,
    theirs = pyte.HistoryScreen(COLS, ROWS, history=HISTORY)  # which pyte does not know
    pyte.ByteStream(theirs).feed(data)
    ours = TuiVtScreen(COLS, ROWS, HISTORY)
    ours.feed(data)
    same = list(ours.history()) == [
        "".join(r[x].data for x in range(COLS)).rstrip() for r in theirs.history.top]
    same = same and ours.rows() == [r.rstrip() for r in theirs.display]
    print(f"  check, {label}: {len(ours.scrollback):,} scrollback lines kept by both, "
          f"screen and scrollback text {'identical' if same else 'DIFFERENT'}")


# ---- settle overhead ------------------------------------------------------------------------


async def _bash_turns(turns: int) -> tuple[list[float], float]:
    import trio

    from trio_cap.actors.bindings.base import TurnEnded
    from trio_cap.actors.bindings.pty.connector import PtyConnector
    from trio_cap.actors.connection import AgentSpec
    from trio_cap.actors.ids import SequentialIds
    from trio_cap.actors.manifest.validate import validate_data
    from trio_cap.events.kinds import ContentBlock, SessionConfig, UserInputInject

    m = validate_data({
        "agent": {"name": "bash", "binary": "bash", "profiles": []},
        "startup": {"command": ["bash", "--norc", "--noprofile", "-i"],
                    "ready_when": {"pattern": "^bench\\$\\s*$"}},
        "pty": {"cols": COLS, "rows": ROWS},
        "parse": {"idle": ["^bench\\$\\s*$"]},
        "capabilities": {"streaming_output": True},
    }, "bench bash")
    record: list[Any] = []
    send, receive = trio.open_memory_channel[Any](math.inf)
    cwd = tempfile.mkdtemp(prefix="bench-pty-")
    spec = AgentSpec(name="bash", binding="pty", config=SessionConfig(cwd=cwd),
                     argv=m.startup.command, options={"manifest": m, "pty.record": record},
                     ids=SequentialIds())
    overheads: list[float] = []
    connector = PtyConnector(env={"PS1": "bench$ "}, grace=1.0)
    async with connector.open(spec, send) as conn:
        window = conn.machine.s.idle_window
        for i in range(turns):
            await conn.send([UserInputInject(content=(ContentBlock(text=f"seq 1 {i * 40}"),))])
            while not isinstance(await receive.receive(), TurnEnded):
                pass
            ended = trio.current_time()
            last = max(args[1] for method, args in record if method == "receive_data")
            overheads.append(ended - last - window)
    os.rmdir(cwd)
    return overheads, window


def _settle_cost() -> float:
    """Seconds per settle decision on a screen with a full scrollback (pure machine)."""
    from trio_cap.actors.bindings.pty.machine import PtyMachine
    from trio_cap.actors.ids import SequentialIds
    from trio_cap.events.kinds import ContentBlock, UserInputInject

    m = PtyMachine(_settings(), new_id=SequentialIds().new)
    m.receive_data(b"Welcome\r\n> ", 0.0)
    m.tick(1.0)
    now, n = 1.0, 200
    body = b"".join(b"output line %d\r\n" % i for i in range(HISTORY + 100))
    m.send(UserInputInject(content=(ContentBlock(text="go"),)))
    m.tick(1.1)
    m.receive_data(body, 1.2)
    m.tick(2.0)
    start = time.process_time()
    for i in range(n):
        now = 3.0 + i
        m.receive_data(b"\x1b[Gspinner %d" % i, now)
        m.tick(now + 0.5)  # one settle: not idle, the turn goes on
    return (time.process_time() - start) / n


def settle_rows(quick: bool) -> None:
    import trio

    turns = 8 if quick else 30
    overheads, window = trio.run(_bash_turns, turns)
    ms = sorted(o * 1000 for o in overheads)
    p95 = ms[min(len(ms) - 1, math.ceil(0.95 * len(ms)) - 1)]
    print(f"  settle overhead beyond the {window * 1000:.0f} ms idle window, {turns} real bash "
          f"turns: median {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms, max {ms[-1]:.1f} ms "
          "(target < 20 ms)")
    print(f"  one settle decision, {HISTORY:,}-line scrollback, turn running: "
          f"{_settle_cost() * 1e6:,.0f} µs CPU")


def run(quick: bool = False) -> None:
    print(f"pty: VT feed, {COLS}×{ROWS}; medians of runs in turns, CPU time "
          f"(cores {os.cpu_count()})")
    feed_rows(quick)
    print("pty: settle detection")
    settle_rows(quick)


if __name__ == "__main__":
    run(quick=bool(os.environ.get("QUICK")))
