"""``python -m bench frames``: one figure per binding machine (DESIGN §2a), same shape for all.

Each row feeds one sans-io machine the traffic its binding sees from real
agents (the shared corpus generators), in reads of up to 256 KiB as its shell
would, and compares it with ``json.loads`` on the same messages in the same
run (taken in turns, CPU time).  A binding adds its row to :data:`ROWS`:
a name, what the traffic models, how to make it, and how to drive its machine.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from bench.common import interleaved_rates, row
from bench.corpus import CorpusMissing, stream_json


@dataclass(frozen=True)
class MachineRow:
    binding: str
    traffic: str
    make_input: Callable[[int], bytes]
    """``n`` messages of realistic traffic, as the agent writes them."""
    prepare: Callable[[bytes], Callable[[], object]]
    """Cut the input into the shell's reads (untimed); the callable feeds a fresh machine."""


def _stream_json(data: bytes) -> Callable[[], object]:
    from bench.stream_json_bench import drive, plan_reads

    plan = plan_reads(data)
    return lambda: drive(plan)


ROWS: list[MachineRow] = [
    MachineRow("stream-json driver", "Claude Code stdout, partial messages (shared corpus)",
               lambda n: stream_json(n, seed=20261202), _stream_json),
    # ACP's rows are bench/acp_bench.py and A2A's bench/a2a_frames_bench.py (each also
    # measures its official SDK's parse).
]


def run(quick: bool = False) -> None:
    # 50,000 lines are 18 MB of stream-json, plenty for a median of 5; more only made the
    # corpus generator (a third of the row's time) and the bench longer than 2 minutes
    n = 40_000 if quick else 50_000
    print(f"frames: each binding machine on {n:,} messages of realistic traffic, reads of "
          "256 KiB; medians of 5 runs in turns, CPU time; ratio = machine ÷ json.loads")
    for machine in ROWS:
        try:
            data = machine.make_input(n)
        except CorpusMissing as exc:
            raise SystemExit(f"bench frames: {machine.binding}: {exc}") from None
        rates = _measure(machine, data)
        row(f"{machine.binding}: {machine.traffic}", rates["machine"], rates["json_loads"],
            "vs json.loads")
    from bench import a2a_frames_bench, acp_bench  # own rows: they measure the SDKs too

    acp_bench.run(quick=quick)
    a2a_frames_bench.run(quick=quick)


def _measure(machine: MachineRow, data: bytes) -> dict[str, float]:
    lines = [line for line in data.splitlines() if line.strip()]
    loads = json.loads
    feed = machine.prepare(data)
    return interleaved_rates({
        "json_loads": lambda: sum(1 for line in lines if loads(line)),
        "machine": lambda: (feed(), len(lines))[1],
    })
