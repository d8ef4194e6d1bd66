"""stream-json figures: an agent's stdout read into CAP events, against the peers.

Two inputs, each a row group:

* **Claude Code traffic** from the shared corpus generator
  (``../shared/corpus/gen_streamjson.py``: multi-turn sessions with
  ``--include-partial-messages``, 96 % ``stream_event`` deltas);
* **cap-agent**: trio-cap's own agent run once on a long scripted turn with
  partial messages on, its real stdout recorded.

Compared in the same run on the same lines: ``json.loads`` per line (the
floor of any Python reader) and the official ``claude-agent-sdk``'s own path
(``json.loads`` + its ``parse_message``).  trio-cap's figure is the whole
driver path as the connector runs it: reads of up to 256 KiB in, CAP events
out, a prompt sent before each turn's result arrives.  Ratios are
trio-cap ÷ peer.  Every run also checks that the events are the same as when
the same bytes arrive one line per read (text joined, driver rule R2).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import interleaved_rates, row
from bench.corpus import CorpusMissing, stream_json

READ = 256 * 1024
"""The connector's read size."""

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

Plan = list[tuple[int, bytes]]
"""The reads, each with the number of prompts sent just before it."""


def record_cap_agent(chunks: int, workdir: Path) -> bytes:
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


def plan_reads(stdout: bytes, size: int = READ) -> Plan:
    """Cut ``stdout`` into reads; each turn's prompt goes out before the read that ends it."""
    ends: list[int] = []  # byte offset of each result line's newline
    pos = 0
    for line in stdout.splitlines(keepends=True):
        pos += len(line)
        if line.startswith(b'{"type":"result"'):
            ends.append(pos - 1)
    plan: Plan = []
    for start in range(0, len(stdout), size):
        stop = start + size
        plan.append((sum(1 for e in ends if start <= e < stop), stdout[start:stop]))
    return plan


def new_driver() -> Any:
    from trio_cap.actors.bindings.stream_json.driver import StreamJsonDriver

    ids = itertools.count()
    return StreamJsonDriver(new_uuid=lambda: f"u{next(ids)}", session_id="bench")


def drive(plan: Plan, keep: bool = False) -> list[Any] | int:
    """The driver over the whole plan: its outputs (``keep``) or how many there were."""
    from trio_cap.events.kinds import ContentBlock, UserInputInject

    prompt = UserInputInject(content=(ContentBlock(text="go"),))
    driver = new_driver()
    outputs: list[Any] = []
    n = 0
    for prompts, data in plan:
        for _ in range(prompts):
            driver.send(prompt)
        got = driver.receive_data(data)
        n += len(got)
        if keep:
            outputs += got
    got = driver.receive_eof()
    n += len(got)
    return outputs + got if keep else n


def line_plan(plan: Plan) -> Plan:
    """The same bytes and prompts, one line per read."""
    stdout = b"".join(data for _, data in plan)
    prompts = sum(p for p, _ in plan)
    lines = stdout.splitlines(keepends=True)
    out: Plan = []
    for line in lines:
        out.append((1 if line.startswith(b'{"type":"result"') and prompts else 0, line))
        prompts -= out[-1][0]
    return out


def sdk_parser() -> Callable[[dict[str, Any]], Any] | None:
    try:
        from claude_agent_sdk._internal.message_parser import parse_message
    except ImportError:
        return None
    return parse_message  # type: ignore[no-any-return]


def measure(label: str, stdout: bytes, repeat: int = 5) -> dict[str, float]:
    """One row group: the peers and the driver on ``stdout``, in turns; returns the figures."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    plan = plan_reads(stdout)
    deltas = sum(1 for line in lines if line.startswith(b'{"type":"stream_event"')
                 and b'"content_block_delta"' in line[:400])
    print(f"{label}: {len(lines):,} lines ({len(stdout) / 1e6:.1f} MB, "
          f"{100 * deltas / len(lines):.0f} % content deltas), reads of {READ // 1024} KiB; "
          f"medians of {repeat} runs taken in turns, CPU time; ratio = trio-cap ÷ peer")
    loads = json.loads

    def json_loads() -> int:
        return sum(1 for line in lines if loads(line))

    contenders: dict[str, Callable[[], int]] = {"json_loads": json_loads}
    parse = sdk_parser()
    if parse is not None:
        def sdk() -> int:
            for line in lines:
                data = loads(line)
                try:
                    parse(data)
                except Exception:  # the SDK rejects frames it does not know; it still read them
                    pass
            return len(lines)

        contenders["sdk"] = sdk
    contenders["driver"] = lambda: (drive(plan), len(lines))[1]
    figures = interleaved_rates(contenders, repeat)
    base = figures["json_loads"]
    row("peer: json.loads per line", base)
    if parse is None:
        print("  peer: claude-agent-sdk not installed (pip install '.[test]')")
    else:
        row("peer: claude-agent-sdk json.loads + parse_message", figures["sdk"], base,
            "vs json.loads")
    row("trio-cap driver: stdout bytes → CAP events", figures["driver"], base, "vs json.loads")
    if parse is not None:
        row("", figures["driver"], figures["sdk"], "vs claude-agent-sdk")
    events = drive(plan)
    from trio_cap.actors.bindings.stream_json.driver_blocks import joined_text

    same = joined_text(drive(plan, keep=True)) == joined_text(drive(line_plan(plan), keep=True))
    print(f"  ({events:,} CAP events and turn ends from {len(lines):,} lines; "
          f"same events as one line per read: {'yes' if same else 'NO'})")
    if not same:
        raise SystemExit("the driver's events depend on how the bytes were read")
    figures["ratio"] = figures["driver"] / base
    return figures


def run(quick: bool = False) -> None:
    n = 40_000 if quick else 100_000  # 35 MB a row group: medians of 5 stay steady, and the
    # bench (two row groups, three contenders, five turns each) stays under 2 minutes
    missing: CorpusMissing | None = None
    try:
        corpus = stream_json(n, seed=20261201)
    except CorpusMissing as exc:
        missing = exc
    else:
        measure("stream-json, Claude Code traffic (shared corpus)", corpus)
    with tempfile.TemporaryDirectory() as tmp:
        stdout = record_cap_agent(20_000 if quick else 50_000, Path(tmp))
    measure("stream-json, cap-agent recorded", stdout)
    if missing is not None:
        raise SystemExit(f"bench stream-json: no Claude Code traffic row: {missing}")
