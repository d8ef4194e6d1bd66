"""The ACP rows of ``python -m bench frames``: ``session/update`` lines → CAP core events.

Traffic: ``../shared/corpus/gen_acp.py`` (message and thought chunks, tool
calls and updates with diffs, plans, usage, commands), NDJSON as an ACP agent
writes it, read in 256 KiB reads as the connector does.

Measured in the same run, in turns, CPU time, per line:

* ``json.loads`` of each line (no typing: the baseline);
* **the official Python SDK 0.12.1** (``agent-client-protocol``): ``json.loads``
  + ``SessionNotification.model_validate`` of the params (pydantic), what its
  connection does with each notification before a client sees it;
* **trio-cap**: the bytes through the client machine (``AcpClient``: the kit's
  framer, one msgspec decode per read, the chunk runs joined by the C loop of
  ``acp/_runs.c`` when built, the update mapping) out as CAP events
  (``cap.text_chunk``, ``cap.thought``, ``cap.tool_call.*``, ``cap.plan``,
  ``cap.usage``, ``agent.raw``), with a prompt running so every update is a
  turn's.

The corpus's session ids are rewritten (untimed) to the one session the
machine opened, so every line is matched as it is in a live session.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable

from bench.common import interleaved_turns, row, turn_ratios
from bench.corpus import CorpusMissing, generator

READ = 256 * 1024
SESSION = "sess_bench"
_SID = re.compile(rb'"sessionId":"[^"]*"')


def corpus(n_lines: int, seed: int = 20261203) -> bytes:
    lines = generator("gen_acp").generate(n_lines, seed)
    data = ("\n".join(lines) + "\n").encode()
    return _SID.sub(b'"sessionId":"' + SESSION.encode() + b'"', data)


def new_client() -> object:
    """A client through initialize and session/new, with a prompt running."""
    from trio_cap.actors.bindings.acp.machine import AcpClient, ClientOptions
    from trio_cap.events.kinds import ContentBlock, UserInputInject

    client = AcpClient(ClientOptions(cwd="/home/dev"))
    client.initialize()
    client.receive_data(b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}\n')
    client.receive_data(b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"' + SESSION.encode()
                        + b'"}}\n')
    client.send(UserInputInject(content=(ContentBlock(text="go"),)))
    assert client.turn_running
    return client


def _ours(data: bytes) -> Callable[[], int]:
    reads = [data[i:i + READ] for i in range(0, len(data), READ)]

    def drive() -> int:
        client = new_client()
        feed = client.receive_data  # type: ignore[attr-defined]
        return sum(len(feed(chunk)) for chunk in reads)

    return drive


def _typed(lines: list[bytes]) -> Callable[[], int]:
    import msgspec

    from trio_cap.actors.bindings.acp import frames as f

    decode = msgspec.json.Decoder(f.UpdateMessage).decode
    return lambda: sum(1 for line in lines if decode(line))


def _sdk(lines: list[bytes]) -> Callable[[], int]:
    from acp.schema import SessionNotification

    loads = json.loads
    validate = SessionNotification.model_validate

    def parse() -> int:
        n = 0
        for line in lines:
            message = loads(line)
            validate(message["params"])
            n += 1
        return n

    return parse


def run(quick: bool = False) -> None:
    n = 40_000 if quick else 80_000  # 80,000 lines: the SDK's parse alone takes a second a turn
    try:
        data = corpus(n)
    except CorpusMissing as exc:
        raise SystemExit(f"bench frames: acp: {exc}") from None
    lines = [line for line in data.splitlines() if line.strip()]
    loads = json.loads
    ours = _ours(data)
    produced = ours()
    typed = _typed(lines)
    turns = interleaved_turns({
        "json_loads": lambda: sum(1 for line in lines if loads(line)),
        "typed": typed,
        "sdk": _sdk(lines),
        "ours": lambda: (ours(), len(lines))[1],
    }, repeat=7)
    rates = {name: statistics.median(r) for name, r in turns.items()}
    print(f"acp: {len(lines):,} session/update lines of ACP v1 traffic (shared corpus), "
          f"{produced:,} CAP events; lines/s, medians of 7 in turns, CPU time")
    base, sdk = rates["json_loads"], rates["sdk"]
    row("  json.loads of each line", base)
    row("  msgspec typed decode of each line alone", rates["typed"], base, "vs json.loads")
    print(f"      = {rates['typed'] / sdk:.1f}× the SDK: the ceiling of a typed path, before "
          "framing and translation")
    row("  ACP Python SDK 0.12.1 (json.loads + pydantic model_validate)", sdk, base,
        "vs json.loads")
    from trio_cap.actors.bindings.acp.runs import NATIVE

    row("  trio-cap: ACP bytes → CAP events (AcpClient)", rates["ours"], base, "vs json.loads")
    print("      (its chunk runs joined by the C loop)" if NATIVE else
          "      (its chunk runs joined in Python: the C loop was not built)")
    low, high = turn_ratios(turns, "ours", "sdk")
    print(f"      = {rates['ours'] / sdk:.1f}× the official SDK (target ≥ 8×); "
          f"turn by turn {low:.1f}–{high:.1f}×")


if __name__ == "__main__":
    run()
