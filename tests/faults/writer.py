"""The kill -9 target: appends numbered events forever through the FileEventLog API.

Each event's text starts with ``event <seq>`` (it knows its seq: it is the only
writer), and after each append returns, the acknowledged last seq is written
to stdout with one unbuffered ``write`` — so every line the parent reads names
an event the log acknowledged before the process died.  Lines are padded to
1 KiB so the pipe holds few of them: the writer cannot run far ahead of the
parent's kill.

    python -m tests.faults.writer LOG POLICY SEED [big]

``big``: every append is one 24 MB record, so a kill often lands inside the
``write`` and leaves a torn final append.
"""

from __future__ import annotations

import os
import random
import sys

import trio

from trio_cap.events.kinds import TextChunk
from trio_cap.events.log import FileEventLog


async def main(path: str, policy: str, seed: int, big: bool) -> None:
    rng = random.Random(seed)
    log = await FileEventLog.open(path, fsync=policy)
    os.write(1, f"open {log.last_seq}\n".encode())
    while True:
        n = 4000 if big else rng.choice([1, 1, 3, 40, 700, 4500])
        first = log.last_seq + 1
        pad = "x" * (6000 if big else rng.choice([0, 20, 300]))
        events = [TextChunk(message_id="k", text=f"event {first + k} {pad}") for k in range(n)]
        if big:
            os.write(1, b"begin\n")  # the killer's cue: this append is under way
        last = await log.append(events, stream="w")
        if last != first + n - 1:
            raise SystemExit(f"append returned {last}, expected {first + n - 1}")
        os.write(1, f"{last}".ljust(1023).encode() + b"\n")  # 64 fill the pipe: bounded lead


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:] == ["big"])
