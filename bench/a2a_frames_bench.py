"""The A2A rows of ``python -m bench frames``: an SSE stream of A2A v1.0 traffic → CAP core events.

Traffic: ``../shared/corpus/gen_a2a.py`` (``SendStreamingMessage`` answers as an
a2a-sdk 1.3.0 server writes them: task, working, artifact chunks or Gemini-style
status messages, tool data parts, completed / input-required / failed; 8 %
direct messages), one SSE response per turn, read in 64 KiB chunks.

Measured in the same run, in turns, CPU time, per SSE event:

* ``json.loads`` of each event's data (no SSE framing, no typing: the baseline);
* msgspec's typed decode of each event's data into ``frames.StreamV1`` alone (the
  ceiling of any path that validates what it reads);
* **a2a-sdk 1.3.0's own client parse**: ``json.loads`` + its JSON-RPC check +
  ``parse_lenient`` (protobuf ``json_format.ParseDict`` into ``StreamResponse``),
  exactly what ``JsonRpcTransport._send_stream_request`` does per event (no SSE
  framing either);
* **trio-cap**: the stream's bytes through the sans-io SSE reader
  (``machine_sse``) and the driver machine, out as CAP events (``cap.text_chunk``,
  ``cap.artifact``, ``agent.raw`` for non-CAP data parts, turn ends) — the
  framing and the translation included, and each turn's request built.  Every
  event is typed in full: the turn's other events by the full Structs, its text
  events by the byte shape the first of them taught (``bindings.byte_shape``: constant
  segments compared, every varying string decoded; the same events as the full
  decode, ``tests/driver_a2a/test_shape.py``);
* **trio-cap via httpx-sse**: the same, with ``httpx-sse``'s decoder (the SSE
  reader's test oracle) splitting the lines instead.

The corpus's JSON-RPC ids are rewritten (untimed) to the ids the machine gives
its requests, one streaming send per turn, so every event is matched as it is
in a live session.  The ratio to a2a-sdk is printed as the median's and as the
lowest and highest of the turns (each turn times every contender once, in turn).
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable
from itertools import count

from bench.common import interleaved_turns, row, turn_ratios
from bench.corpus import CorpusMissing, generator

CHUNK = 64 * 1024
_ID = re.compile(r'"id": "([^"]+)", "jsonrpc"')


def corpus(n_events: int, seed: int = 3) -> list[list[str]]:
    """The corpus's payloads grouped into streams (one per JSON-RPC id, in order)."""
    payloads = generator("gen_a2a").generate(n_events, seed)
    streams: list[list[str]] = []
    last = None
    for p in payloads:
        m = _ID.search(p)
        rid = m.group(1) if m else None
        if rid != last or not streams:
            streams.append([])
            last = rid
        streams[-1].append(p)
    return streams


def _sse_chunks(stream: list[str], rid: int) -> list[bytes]:
    body = b"".join(b"data: " + _ID.sub(f'"id": {rid}, "jsonrpc"', p).encode() + b"\r\n\r\n"
                    for p in stream)
    return [body[i:i + CHUNK] for i in range(0, len(body), CHUNK)]


def _machine_driver(streams: list[list[str]], via_httpx_sse: bool) -> Callable[[], int]:
    from trio_cap.actors.bindings.a2a import frames as f
    from trio_cap.actors.bindings.a2a.machine import A2aDriver, Ended, SseBatch
    from trio_cap.actors.bindings.a2a.machine_card import Choice
    from trio_cap.actors.bindings.a2a.machine_sse import SseReader
    from trio_cap.events.kinds import ContentBlock, SessionConfig, UserInputInject

    plan = [_sse_chunks(s, rid) for rid, s in enumerate(streams, start=1)]
    choice = Choice(spelling=f.CURRENT, url="http://127.0.0.1:1/rpc", tenant="", other=None,
                    other_url=None, cap_extension=False, bearer_declared=False)
    inject = UserInputInject(content=(ContentBlock(text="go"),))
    config = SessionConfig(cwd="/")

    def drive() -> int:
        ids = count()
        machine = A2aDriver(choice, new_id=lambda: f"m{next(ids)}", first_id=1)
        machine.send([config])
        receive = machine.receive_frame
        produced = 0
        for rid, chunks in enumerate(plan, start=1):
            machine.send([inject])
            reader = _HttpxSse() if via_httpx_sse else SseReader()
            for chunk in chunks:
                datas = reader.feed(chunk)
                if datas:
                    produced += len(receive(SseBatch(rid, datas)))
            produced += len(receive(Ended(rid)))
        return produced

    return drive


class _HttpxSse:
    """httpx-sse's decoder over the lines of each read, as ``EventSource.aiter_sse`` does."""

    def __init__(self) -> None:
        from httpx_sse._decoders import SSEDecoder, SSELineDecoder

        self.lines = SSELineDecoder()
        self.decoder = SSEDecoder()

    def feed(self, chunk: bytes) -> list[bytes]:
        out = []
        decode = self.decoder.decode
        for line in self.lines.decode(chunk.decode()):
            sse = decode(line.rstrip("\n"))
            if sse is not None and sse.data:
                out.append(sse.data.encode())
        return out


def _typed_decode(payloads: list[str]) -> Callable[[], int]:
    from trio_cap.actors.bindings.a2a import frames as f

    def decode() -> int:
        for data in payloads:
            f.decode_stream(f.CURRENT, data)
        return len(payloads)

    return decode


def _a2a_sdk(payloads: list[str]) -> Callable[[], int]:
    from a2a.types import StreamResponse
    from a2a.utils.proto_utils import parse_lenient

    loads = json.loads

    def parse() -> int:
        n = 0
        for data in payloads:
            response = loads(data)
            if "result" not in response:  # _check_jsonrpc_response
                raise ValueError("no result")
            parse_lenient(response["result"], StreamResponse())
            n += 1
        return n

    return parse


def run(quick: bool = False) -> None:
    # 40,000 events (~270 turns) keep the A2A rows near 45 s on the loaded 2-core machine
    # (a2a-sdk's parse is nine tenths of it; 100,000 took ~115 s) and still give every
    # contender five turns of ~0.1 s or more: enough for a median and its spread
    n = 20_000 if quick else 40_000
    try:
        streams = corpus(n)
    except CorpusMissing as exc:
        raise SystemExit(f"bench frames: a2a: {exc}") from None
    payloads = [p for s in streams for p in s]
    events = len(payloads)
    loads = json.loads
    ours = _machine_driver(streams, via_httpx_sse=False)
    ours_httpx = _machine_driver(streams, via_httpx_sse=True)
    produced = ours()
    typed = _typed_decode(payloads)
    turns = interleaved_turns({
        "json_loads": lambda: sum(1 for p in payloads if loads(p)),
        "typed": typed,
        "a2a_sdk": _a2a_sdk(payloads),
        "ours": lambda: (ours(), events)[1],
        "ours_httpx_sse": lambda: (ours_httpx(), events)[1],
    })
    rates = {name: statistics.median(r) for name, r in turns.items()}
    print(f"a2a: {events:,} SSE events in {len(streams):,} streams of A2A v1.0 traffic "
          f"(shared corpus), {produced:,} machine outputs; events/s, medians of 5 in turns")
    base, sdk = rates["json_loads"], rates["a2a_sdk"]
    row("  json.loads of each event's data", base)
    row("  msgspec typed decode of each event's data alone", rates["typed"], base,
        "vs json.loads")
    print(f"      = {rates['typed'] / rates['a2a_sdk']:.1f}× a2a-sdk: the ceiling of any "
          "typed path, before SSE and translation")
    row("  a2a-sdk 1.3.0 client parse (json.loads + protobuf ParseDict)", sdk, base,
        "vs json.loads")
    for key, label in (("ours", "trio-cap: SSE bytes → CAP events (machine_sse + driver)"),
                       ("ours_httpx_sse", "trio-cap: the same through httpx-sse's decoder")):
        row(f"  {label}", rates[key], base, "vs json.loads")
        low, high = turn_ratios(turns, key, "a2a_sdk")
        print(f"      = {rates[key] / sdk:.1f}× a2a-sdk (target ≥ 50×); turn by turn "
              f"{low:.1f}–{high:.1f}×")
