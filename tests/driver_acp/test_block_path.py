"""The block path (a read's lines in one msgspec call) says what the line-by-line path says.

The slow path is the same machine with the reader's block decoder removed, so every
line goes through JSON-RPC classification and the lenient decoder.  Text boundaries
are the only allowed difference (the block path joins a read's run of chunks).
"""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.acp_bench import corpus, new_client
from trio_cap.actors.bindings.acp.machine import events_of
from trio_cap.actors.bindings.ndjson import NdjsonReader, NoRecovery
from trio_cap.events.kinds import TextChunk, Thought

from .test_fuzz import messages


def merged(events: list[object]) -> list[object]:
    out: list[object] = []
    for e in events:
        last = out[-1] if out else None
        if (type(e) in (TextChunk, Thought) and type(last) is type(e)
                and msgspec.structs.replace(last, text="") == msgspec.structs.replace(e, text="")):
            out[-1] = msgspec.structs.replace(e, text=last.text + e.text)  # type: ignore[attr-defined]
        else:
            out.append(e)
    return out


def run(data: bytes, read: int, block: bool) -> list[object]:
    client = new_client()
    if not block:
        client._reader = NdjsonReader(client.rpc.receive, None, max_line=client._reader.max_line,  # type: ignore[attr-defined]
                                      recovery=NoRecovery())
    out: list[object] = []
    for i in range(0, len(data), read):
        out += events_of(client.receive_data(data[i:i + read]))  # type: ignore[attr-defined]
    out += events_of(client.receive_eof())  # type: ignore[attr-defined]
    return merged(out)


def test_the_corpus_gives_the_same_events_both_ways() -> None:
    data = corpus(4000)
    fast = run(data, 256 * 1024, block=True)
    assert len(fast) > 100
    assert fast == run(data, 256 * 1024, block=False)
    assert fast == run(data, 4096, block=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(messages(), max_size=12), st.integers(1, 512))
def test_any_traffic_gives_the_same_events_both_ways(lines: list[bytes], read: int) -> None:
    data = b"".join(line.replace(b'"s1"', b'"sess_bench"') for line in lines)
    assert run(data, read, block=True) == run(data, read, block=False)
