"""Recorded traffic through the machine: every agent text arrives once and in order, every
stream ends its turn as its final state says.

``golden/corpus_v1.sse``: the shared corpus's a2a-sdk-shaped v1 streams (ids renumbered
per stream); ``golden/sdk_draft_chunks.sse``: a real a2a-sdk 1.3.0 draft-spelling stream of
a chunked artifact.  The expected text is read from the JSON by this test (through
httpx-sse's parser), not from the machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.driver_a2a.machine_lib import driver, ends, events
from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.actors.bindings.a2a.machine import Ended, SseBatch
from trio_cap.actors.bindings.a2a.machine_sse import SseReader
from trio_cap.events.kinds import CapError, ContentBlock, TextChunk, UserInputInject

GOLDEN = Path(__file__).parent / "golden"


def _payloads(raw: bytes) -> list[dict]:
    from httpx_sse._decoders import SSEDecoder, SSELineDecoder

    lines, decoder, out = SSELineDecoder(), SSEDecoder(), []
    for line in [*lines.decode(raw.decode()), *lines.flush()]:
        sse = decoder.decode(line.rstrip("\n"))
        if sse is not None and sse.data:
            out.append(json.loads(sse.data))
    return out


def _texts(parts: list[dict]) -> str:
    return "".join(p["text"] for p in parts if "text" in p)


def _expected(result: dict) -> tuple[str, str | None]:
    """(agent text, draft state) of one stream result, either spelling."""
    r = result
    kind = r.get("kind") or next(iter(r))
    body = r if "kind" in r else r[kind]
    if kind in ("artifactUpdate", "artifact-update"):
        return _texts(body["artifact"]["parts"]), None
    if kind in ("message",):
        return (_texts(body["parts"]) if body["role"] in ("agent", "ROLE_AGENT") else ""), None
    state = body["status"]["state"]
    msg = body["status"].get("message")
    text = _texts(msg["parts"]) if msg and msg["role"] in ("agent", "ROLE_AGENT") else ""
    return text, f.draft_state(state)


STOP = {"completed": "end_turn", "input-required": "end_turn", "failed": "error"}


@pytest.mark.parametrize(("name", "spelling"), [("corpus_v1.sse", f.CURRENT),
                                                ("sdk_draft_chunks.sse", f.DRAFT)])
@pytest.mark.parametrize("read", [7, 4096, 1 << 20])
def test_recorded_streams(name: str, spelling: f.Spelling, read: int) -> None:
    raw = (GOLDEN / name).read_bytes()
    streams: dict[int, list[dict]] = {}
    for payload in _payloads(raw):
        streams.setdefault(payload["id"], []).append(payload["result"])
    bodies: dict[int, bytes] = {}
    for block in raw.split(b"\r\n\r\n"):
        if block.startswith(b"data: "):
            rid = json.loads(block[6:])["id"]
            bodies[rid] = bodies.get(rid, b"") + block + b"\r\n\r\n"
    d = driver(spelling)
    for rid, results in streams.items():
        (post,) = [o for o in d.send([UserInputInject(content=(ContentBlock(text="go"),))])
                   if hasattr(o, "request_id")]
        assert post.request_id == rid
        reader, out, data = SseReader(), [], bodies[rid]
        for at in range(0, len(data), read):
            datas = reader.feed(data[at:at + read])
            if datas:
                out += d.receive_frame(SseBatch(rid, datas))
        out += d.receive_frame(Ended(rid))
        want = [_expected(r) for r in results]
        text = "".join(t.text for t in events(out) if type(t) is TextChunk)
        assert text == "".join(t for t, _ in want)
        final = [s for _, s in want if s is not None][-1] if any(
            s for _, s in want) else "completed"
        assert ends(out) == [STOP.get(final, "end_turn")]
        errors = [e for e in events(out) if type(e) is CapError]
        assert [e.code for e in errors] == (["agent_error"] if final == "failed" else [])
