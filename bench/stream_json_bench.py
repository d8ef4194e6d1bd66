"""stream-json figures: reading an agent's stdout into typed events, against the peers.

The input is real: trio-cap's own ``cap-agent`` (the stream-json agent side)
is run once on a long scripted turn with partial messages on, and its stdout —
Claude-shaped ``stream_event`` deltas, ``assistant`` and ``user`` frames,
``result``, CAP extension frames — is what every reader gets.  Compared in
the same run: ``json.loads`` per line (the floor of any Python reader), and the
official ``claude-agent-sdk``'s own path (``json.loads`` + its
``parse_message``).  Ratios are trio-cap ÷ peer.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import median_rate, row

SCRIPT = """
[[turn]]
steps = [
  { think = "planning a long answer" },
  { burst = %d, batch = 500, text = "streamed words " },
  { write = "notes.txt", content = "written by the bench\\n" },
  { run = "true" },
  { say = "done" },
]
"""


def record_stdout(chunks: int, workdir: Path) -> bytes:
    script = workdir / "flood.toml"
    script.write_text(SCRIPT % chunks)
    agent = Path(sys.executable).with_name("cap-agent")
    result = subprocess.run(
        [str(agent), "--output-format", "stream-json", "--verbose",
         "--include-partial-messages", "--dangerously-skip-permissions",
         "--no-workspace-diff", "--script", str(script), "-p", "go"],
        cwd=workdir, capture_output=True, check=True, timeout=300,
    )
    return result.stdout


def bench_json_loads(lines: list[bytes]) -> float:
    return median_rate(lambda: sum(1 for line in lines if json.loads(line)))


def bench_sdk(lines: list[bytes]) -> float | None:
    try:
        from claude_agent_sdk._internal.message_parser import parse_message
    except ImportError:
        return None

    def once() -> int:
        n = 0
        for line in lines:
            data = json.loads(line)
            try:
                parse_message(data)
            except Exception:  # the SDK rejects frames it does not know; it still read them
                pass
            n += 1
        return n

    return median_rate(once)


def bench_driver(stdout: bytes, n_lines: int) -> tuple[float, int]:
    from trio_cap.actors.bindings.stream_json.driver import StreamJsonDriver
    from trio_cap.events.kinds import ContentBlock, UserInputInject

    produced = [0]

    def once() -> int:
        ids = itertools.count()
        driver = StreamJsonDriver(new_uuid=lambda: f"u{next(ids)}")
        driver.send(UserInputInject(content=(ContentBlock(text="go"),)))
        out = 0
        for i in range(0, len(stdout), 65536):  # reads of 64 KiB, as the shell does
            out += len(driver.receive_data(stdout[i : i + 65536]))
        out += len(driver.receive_eof())
        produced[0] = out
        return n_lines

    return median_rate(once), produced[0]


def run(quick: bool = False) -> None:
    chunks = 20_000 if quick else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        stdout = record_stdout(chunks, Path(tmp))
    lines = [line for line in stdout.splitlines() if line.strip()]
    print(f"stream-json: {len(lines):,} lines ({len(stdout) / 1e6:.1f} MB) recorded from "
          f"cap-agent; medians of 3 runs; ratio = trio-cap ÷ peer")
    loads = bench_json_loads(lines)
    sdk = bench_sdk(lines)
    driver, events = bench_driver(stdout, len(lines))
    row("peer: json.loads per line", loads)
    if sdk is None:
        print("  peer: claude-agent-sdk not installed (pip install '.[test]')")
    else:
        row("peer: claude-agent-sdk json.loads + parse_message", sdk)
    row("trio-cap driver: bytes → typed frames → CAP events", driver, loads, "vs json.loads")
    if sdk is not None:
        row("", driver, sdk, "vs claude-agent-sdk")
    print(f"  ({events:,} CAP events and markers out of {len(lines):,} lines)")
