"""``python -m bench a2a``: events/s a published session streams to N concurrent SSE subscribers.

One ``cap serve a2a`` server (in this process, on hypercorn's Trio worker)
publishes cap-agent with a script whose turn waits a moment and then says
``WORDS`` words one chunk each (one ``cap.text_chunk`` → one appended
artifact part, one SSE event, per word).  One caller starts the turn with ``message/stream``; N-1
more subscribe to the task (``tasks/resubscribe``) during the wait.  Every
subscriber reads raw SSE bytes over its own HTTP connection and counts
``data:`` events to the final one.

Figures: events delivered per second, summed over subscribers (the fan-out
throughput), and per subscriber; the 1-subscriber row is the baseline of the
ratio column (how well the fan-out scales).  The clients run in the same
process on the same 2 cores, so their cost is included: these are lower
bounds for what remote subscribers would see.  Medians of several runs.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx
import trio

from trio_cap.actors.agent.script import load_script
from trio_cap.actors.bindings.a2a.serve_app import RPC_PATH
from trio_cap.actors.bindings.a2a.serve_server import open_a2a_server
from trio_cap.actors.bindings.a2a.serve_sessions import SessionOptions
from trio_cap.actors.orchestrator import open_orchestrator, resolve


def _script(tmp: Path, words: int, subscribers: int) -> object:
    """The turn waits before it speaks (time for every subscriber to connect), then talks."""
    path = tmp / "script.toml"
    text = " ".join(f"w{i}" for i in range(words))
    wait = 1.0 + 0.1 * subscribers
    path.write_text(f'chunk_words = 1\n[[turn]]\nsteps = [{{ wait = {wait} }}, '
                    f'{{ say = "{text}" }}]\n')
    return load_script(path)


async def _count(http: httpx.AsyncClient, body: dict, started: trio.Event,
                 out: list[tuple[int, float, float]]) -> None:
    events = 0
    first = last = 0.0
    async with http.stream("POST", RPC_PATH, json=body) as response:
        started.set()
        tail = b""
        async for chunk in response.aiter_bytes():
            now = time.perf_counter()
            data = tail + chunk
            if not first:  # timed from the first word on (not the snapshot nor the wait)
                at = data.find(b'"text":"w0 "')
                if at < 0:
                    tail = data[-16:]
                    continue
                first = now
                data = b"\n" + data[data.rfind(b"data: ", 0, at):]
                tail = b""
            events += data.count(b"\ndata: ") - tail.count(b"\ndata: ")
            last = now
            tail = data[-16:]
    out.append((events, first, last))


async def measure(subscribers: int, words: int) -> tuple[float, float, int]:
    """(events/s summed over subscribers, events/s per subscriber, events each)."""
    with TemporaryDirectory() as tmp:
        script = _script(Path(tmp), words, subscribers)
        agent = await resolve("cap-agent")
        async with open_orchestrator() as orch, open_a2a_server(
                orch, agent, options=SessionOptions(cwd=tmp, script=script)) as server:
            limits = httpx.Limits(max_connections=subscribers + 4)
            async with httpx.AsyncClient(base_url=server.base_url, timeout=120,
                                         limits=limits) as http:
                results: list[tuple[int, float, float]] = []
                async with trio.open_nursery() as nursery:
                    started = trio.Event()
                    nursery.start_soon(_count, http, {
                        "jsonrpc": "2.0", "id": 0, "method": "message/stream", "params": {
                            "message": {"kind": "message", "messageId": "m", "role": "user",
                                        "parts": [{"kind": "text", "text": "go"}]}}},
                        started, results)
                    await started.wait()
                    # the task exists before its stream's headers are sent
                    task_id = next(iter(server.publisher.machine.tasks))
                    for i in range(subscribers - 1):
                        nursery.start_soon(_count, http, {
                            "jsonrpc": "2.0", "id": i + 1, "method": "tasks/resubscribe",
                            "params": {"id": task_id}}, trio.Event(), results)
        events = [r[0] for r in results]
        wall = max(r[2] for r in results) - min(r[1] for r in results if r[1])
        total = sum(events)
        return total / wall, total / wall / subscribers, min(events)


def run(quick: bool = False) -> None:
    words = 2_000 if quick else 20_000
    fanout = (1, 4) if quick else (1, 10, 50)
    repeat = 1 if quick else 3
    print(f"a2a publisher: one session's turn ({words:,} text chunks → appended artifact parts) "
          f"streamed over SSE, medians of {repeat}")
    print(f"  {'subscribers':<14} {'events/s (all)':>16} {'per subscriber':>16} "
          f"{'× 1 subscriber':>15}  events each")
    base = None
    for n in fanout:
        runs = [trio.run(measure, n, words) for _ in range(repeat)]
        total = statistics.median(r[0] for r in runs)
        each = statistics.median(r[1] for r in runs)
        base = base or total
        print(f"  {n:<14} {total:>16,.0f} {each:>16,.0f} {total / base:>14.2f}×  "
              f"{min(r[2] for r in runs):,}")
