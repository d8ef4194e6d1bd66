"""All bodies being received at once share one budget: beyond it, 503 instead of memory.

In-process (the same hypercorn server the CLI runs, on a real loopback socket) with
small limits, so the arithmetic is exact: three slow clients each send 899 of
their 900 body bytes against a 2,000-byte shared budget; whatever order the
server reads them in, exactly one is refused and the other two complete.
"""

from __future__ import annotations

import json

import trio

from tests.harness.serve_process import http_head
from trio_cap.actors.model_server import open_model_server

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 800}]})


async def test_shared_budget_refuses_exactly_the_body_that_crosses_it() -> None:
    body = BODY.encode()
    body = body[:-1] + b" " * (900 - len(body)) + b"}"
    assert len(body) == 900
    async with open_model_server(max_body=1000, max_buffered=2000) as server:
        streams = [await trio.open_tcp_stream(server.host, server.port) for _ in range(3)]
        send, results = trio.open_memory_channel[tuple[int, int]](3)

        async def read(i: int) -> None:
            status, _ = await http_head(streams[i], within=30)
            await send.send((i, status))

        async with trio.open_nursery() as nursery:
            for i, stream in enumerate(streams):
                nursery.start_soon(read, i)
                await stream.send_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                                      b"Content-Length: 900\r\n\r\n" + body[:-1])
            with trio.fail_after(30):
                refused, status = await results.receive()
            assert status == 503
            for i, stream in enumerate(streams):
                if i != refused:
                    await stream.send_all(body[-1:])
            with trio.fail_after(30):
                done = {await results.receive(), await results.receive()}
        assert {status for _, status in done} == {200}
        for stream in streams:
            await stream.aclose()
        statuses = [r["reply"]["status"] for r in server.records]
        assert sorted(statuses) == [200, 200, 503]
        assert server.app._buffered == 0  # every byte counted in is counted out
