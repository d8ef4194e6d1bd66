"""``python -m bench a2a``: events/s a published session streams to N concurrent SSE subscribers.

One ``cap serve a2a`` server (in this process, on hypercorn's Trio worker)
publishes cap-agent with a script whose turn waits a moment and then says
``WORDS`` words one chunk each (one ``cap.text_chunk`` → one appended
artifact part, one SSE event, per word).  One caller starts the turn with ``message/stream``; N-1
more subscribe to the task (``tasks/resubscribe``) during the wait.  Every
subscriber reads raw SSE bytes over its own HTTP connection and counts
``data:`` events to the final one.

Figures: events delivered per second, summed over subscribers (the fan-out
throughput), and per subscriber, against a2a-sdk 1.3.0's own server
(``a2a_sdk_peer.py``: DefaultRequestHandler, the same turn as appended
artifact chunks) measured with the same clients in the same run.  The clients run in the same
process on the same 2 cores, so their cost is included: these are lower
bounds for what remote subscribers would see.  Medians of several runs.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx
import trio

from bench.common import RECORDED
from trio_cap.actors.agent.script import load_script
from trio_cap.actors.bindings.a2a.serve_app import RPC_PATH
from trio_cap.actors.bindings.a2a.serve_server import open_a2a_server
from trio_cap.actors.bindings.a2a.serve_sessions import SessionOptions
from trio_cap.actors.orchestrator import open_orchestrator, resolve

PEER = Path(__file__).with_name("a2a_sdk_peer.py")


def _script(tmp: Path, words: int, subscribers: int) -> object:
    """The turn waits before it speaks (time for every subscriber to connect), then talks."""
    path = tmp / "script.toml"
    text = " ".join(f"w{i}" for i in range(words))
    wait = 1.0 + 0.1 * subscribers
    path.write_text(f'chunk_words = 1\n[[turn]]\nsteps = [{{ wait = {wait} }}, '
                    f'{{ say = "{text}" }}]\n')
    return load_script(path)


async def _count(http: httpx.AsyncClient, body: dict, task_ids: list[str],
                 started: trio.Event, out: list[tuple[int, float, float]]) -> None:
    events = 0
    first = last = 0.0
    async with http.stream("POST", RPC_PATH, json=body) as response:
        tail = b""
        async for chunk in response.aiter_bytes():
            now = time.perf_counter()
            data = tail + chunk
            if not task_ids:  # the first event is the new task: its id, for the others
                line = data.split(b"\n", 1)[0]
                task_ids.append(json.loads(line[len(b"data: "):])["result"]["id"])
                started.set()
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


async def _subscribers(base_url: str, subscribers: int) -> tuple[float, float, int]:
    """One draft ``message/stream`` and N-1 ``tasks/resubscribe`` against ``base_url``:
    (events/s summed over subscribers, events/s per subscriber, fewest events one got)."""
    limits = httpx.Limits(max_connections=subscribers + 4)
    results: list[tuple[int, float, float]] = []
    async with httpx.AsyncClient(base_url=base_url, timeout=120, limits=limits) as http, \
            trio.open_nursery() as nursery:
        started = trio.Event()
        task_ids: list[str] = []
        nursery.start_soon(_count, http, {
            "jsonrpc": "2.0", "id": 0, "method": "message/stream", "params": {
                "message": {"kind": "message", "messageId": "m", "role": "user",
                            "parts": [{"kind": "text", "text": "go"}]}}},
            task_ids, started, results)
        await started.wait()
        for i in range(subscribers - 1):
            nursery.start_soon(_count, http, {
                "jsonrpc": "2.0", "id": i + 1, "method": "tasks/resubscribe",
                "params": {"id": task_ids[0]}}, task_ids, trio.Event(), results)
    events = [r[0] for r in results]
    wall = max(r[2] for r in results) - min(r[1] for r in results if r[1])
    total = sum(events)
    return total / wall, total / wall / subscribers, min(events)


async def ours(subscribers: int, words: int) -> tuple[float, float, int]:
    with TemporaryDirectory() as tmp:
        script = _script(Path(tmp), words, subscribers)
        agent = await resolve("cap-agent")
        async with open_orchestrator() as orch, open_a2a_server(
                orch, agent, options=SessionOptions(cwd=tmp, script=script)) as server:
            return await _subscribers(server.base_url, subscribers)


async def a2a_sdk(subscribers: int, words: int) -> tuple[float, float, int]:
    """The same clients against a2a-sdk's own server (``a2a_sdk_peer.py``, its own process)."""
    wait = 1.0 + 0.1 * subscribers
    proc = await trio.lowlevel.open_process(
        [sys.executable, str(PEER), str(words), str(wait)], stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        out = b""
        with trio.fail_after(60):
            while b"\n" not in out:
                out += await proc.stdout.receive_some(100)
        return await _subscribers(f"http://127.0.0.1:{int(out)}", subscribers)
    finally:
        proc.kill()
        await proc.wait()


def run(quick: bool = False) -> None:
    words = 500 if quick else 800  # a2a-sdk's server at 50 subscribers sets the run time
    fanout = (1, 4) if quick else (1, 10, 50)
    repeat = 1 if quick else 3
    print(f"a2a publisher: one session's turn ({words:,} text chunks → appended artifact parts) "
          f"streamed over SSE to N subscribers, medians of {repeat} interleaved runs; "
          "a2a-sdk 1.3.0's own server (uvicorn, its own process) with the same clients")
    print(f"  {'subscribers':<12} {'server':<10} {'events/s (all)':>15} {'per subscriber':>15} "
          f"{'× a2a-sdk':>10}  fewest events one got")
    for n in fanout:
        runs: dict[str, list[tuple[float, float, int]]] = {"trio-cap": [], "a2a-sdk": []}
        for _ in range(repeat):
            runs["trio-cap"].append(trio.run(ours, n, words))
            runs["a2a-sdk"].append(trio.run(a2a_sdk, n, words))
        peer = statistics.median(r[0] for r in runs["a2a-sdk"])
        for name, got in runs.items():
            total = statistics.median(r[0] for r in got)
            each = statistics.median(r[1] for r in got)
            print(f"  {n:<12} {name:<10} {total:>15,.0f} {each:>15,.0f} {total / peer:>9.2f}×  "
                  f"{min(r[2] for r in got):,}")
            RECORDED.append({"label": f"{name}, {n} subscriber(s), events/s in all",
                             "rate": total, "per_subscriber": each, "ratio": total / peer,
                             "note": "× a2a-sdk's own server"})
