"""A running ``cap model serve`` under hostile input: bounded, responsive, and it stops.

Every test runs the real command as a process and talks HTTP to it over
loopback (httpx, or a raw socket where a client must misbehave).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import signal
from pathlib import Path

import httpx
import trio

from tests.harness.serve_process import Served, http_head, peak_rss_kib, rss_kib, serving

LIMIT = 16 * 1024 * 1024
CHAT = "/v1/chat/completions"


def chat(text: str) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": text}]}


def script(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return ["--script", str(path)]


async def post(url: str, body: bytes | dict[str, object],
               headers: dict[str, str] | None = None) -> httpx.Response:
    async with httpx.AsyncClient(base_url=url, timeout=30.0) as client:
        if isinstance(body, dict):
            return await client.post(CHAT, json=body, headers=headers)
        return await client.post(CHAT, content=body, headers=headers)


async def assert_still_serving(served: Served) -> None:
    r = await post(served.url, chat("still there?"))
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"]


# ---- regular expressions: linear time, whatever the message ----------------------------


async def test_catastrophic_pattern_answers_at_once_and_sigterm_works(tmp_path: Path) -> None:
    args = script(tmp_path, '[[rules]]\nmatch = "(a+)+$"\ntext = "matched"\n'
                            '[[rules]]\nmatch = "(x+x+)+y"\ntext = "other"\n'
                            '[default]\ntext = "no match"\n')
    async with serving(args) as served:
        with trio.fail_after(20):  # Python's re took forever on the first of these
            for text in ["a" * 35 + "!", "x" * 5000, "a" * 1_000_000 + "!"]:
                r = await post(served.url, chat(text))
                assert r.json()["choices"][0]["message"]["content"] == "no match"
            r = await post(served.url, chat("b" + "a" * 100_000))
            assert r.json()["choices"][0]["message"]["content"] == "matched"
        code, took = await served.stop(signal.SIGTERM)
    assert code == 0 and took < 10


async def test_whitespace_reply_text_is_streamed_in_linear_time(tmp_path: Path) -> None:
    args = script(tmp_path, '[default]\ntext = "' + " " * 200_000 + 'end"\n')
    async with serving(args) as served:
        with trio.fail_after(20):
            r = await post(served.url, {**chat("hi"), "stream": True})
        assert r.status_code == 200 and "end" in r.text


# ---- bodies: 413 beyond the limit, never the whole thing in memory ------------------------


async def test_declared_oversize_body_is_refused_before_it_is_sent() -> None:
    async with serving() as served:
        stream = await trio.open_tcp_stream(served.host, served.port)
        async with stream:
            await stream.send_all(
                f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {100 * 1024 * 1024}\r\n\r\n".encode())
            status, data = await http_head(stream)  # not one body byte was sent
        assert status == 413
        assert b"application/json" in data.lower()
        await assert_still_serving(served)
        code, _ = await served.stop()
    assert code == 0


async def test_streamed_oversize_body_is_cut_off_at_the_limit() -> None:
    """Chunked (no length declared): refused once past 16 MiB; memory stays bounded."""
    async with serving() as served:
        before = rss_kib(served.proc.pid)
        stream = await trio.open_tcp_stream(served.host, served.port)
        chunk = b"x" * (1024 * 1024)
        sent = 0
        status = 0
        async with stream:
            await stream.send_all(f"POST {CHAT} HTTP/1.1\r\nHost: x\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\n".encode())

            async def send_body() -> None:
                nonlocal sent
                try:
                    for _ in range(100):  # would be 100 MiB
                        await stream.send_all(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        sent += len(chunk)
                except trio.BrokenResourceError:
                    pass  # the server closed the connection after its 413

            async with trio.open_nursery() as nursery:
                nursery.start_soon(send_body)
                status, data = await http_head(stream, within=30)
                nursery.cancel_scope.cancel()
        assert status == 413 and b'"error"' in data
        assert sent < 100 * len(chunk)
        assert rss_kib(served.proc.pid) - before < 80 * 1024, "the body was held in memory"
        await assert_still_serving(served)


async def test_oversize_body_through_httpx_gets_a_json_413() -> None:
    async with serving() as served:
        body = b"{" + b" " * LIMIT + b"}"
        try:
            r = await post(served.url, body, headers={"content-type": "application/json"})
        except httpx.TransportError:  # the server may close while httpx is still writing
            pass
        else:
            assert r.status_code == 413
            assert "too large" in r.json()["error"]["message"]


async def test_body_at_the_limit_is_served() -> None:
    text = "y" * (LIMIT - 200)
    async with serving() as served:
        r = await post(served.url, json.dumps(chat(text)).encode(),
                       headers={"content-type": "application/json"})
        assert r.status_code == 200


async def test_compressed_body_may_not_inflate_past_the_limit() -> None:
    bomb = gzip.compress(b'{"messages": "' + b"0" * (64 * 1024 * 1024) + b'"}')
    assert len(bomb) < 1024 * 1024
    async with serving() as served:
        before = rss_kib(served.proc.pid)
        r = await post(served.url, bomb, headers={"content-encoding": "gzip",
                                                  "content-type": "application/json"})
        assert r.status_code == 413
        assert rss_kib(served.proc.pid) - before < 80 * 1024
        ok = gzip.compress(json.dumps(chat("zipped")).encode())
        r = await post(served.url, ok, headers={"content-encoding": "gzip",
                                                "content-type": "application/json"})
        assert r.status_code == 200


async def test_413_is_in_the_api_s_own_error_shape() -> None:
    async with serving() as served:
        # A declared length with no body: the refusal comes before any body is read.
        for path, check in [
            ("/v1/messages", lambda j: j["error"]["type"] == "request_too_large"),
            ("/v1beta/models/g:generateContent", lambda j: j["error"]["code"] == 413),
            (CHAT, lambda j: "too large" in j["error"]["message"]),
        ]:
            stream = await trio.open_tcp_stream(served.host, served.port)
            async with stream:
                head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {LIMIT + 1}\r\n\r\n"
                await stream.send_all(head.encode())
                status, data = await http_head(stream)
            assert status == 413
            assert check(json.loads(data.split(b"\r\n\r\n", 1)[1])), data


async def test_a_body_of_tiny_values_cannot_multiply_into_memory() -> None:
    """15 MiB of ``{},`` would decode into ~5 million dicts (~600 MB): refused unread."""
    count = (15 * 1024 * 1024) // 3
    bomb = b'{"messages": [' + b"{}," * count + b'{}]}'
    async with serving() as served:
        r = await post(served.url, bomb, headers={"content-type": "application/json"})
        assert r.status_code == 413 and "JSON values" in r.json()["error"]["message"]
        assert peak_rss_kib(served.proc.pid) < 200 * 1024
        dense = "a," * 900_000  # comma-dense but under the bound: served
        r = await post(served.url, chat(dense))
        assert r.status_code == 200


# ---- hostile JSON -------------------------------------------------------------------------


async def test_deeply_nested_bodies_are_a_400_not_a_crash() -> None:
    async with serving() as served:
        deep = b'{"messages": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
        r = await post(served.url, deep, headers={"content-type": "application/json"})
        assert r.status_code == 400 and "deep" in r.json()["error"]["message"]
        nested: object = "hidden"
        for _ in range(900):  # decodable, but deeper than any real content
            nested = {"content": nested}
        r = await post(served.url, {"model": "m", "messages": [
            {"role": "user", "content": nested}]})
        assert r.status_code == 200
        await assert_still_serving(served)
        code, _ = await served.stop()
    assert code == 0
    assert b"Traceback" not in served.stderr


# ---- signals while a hostile request is in flight ----------------------------------------


async def test_sigterm_with_a_slow_client_mid_body() -> None:
    async with serving() as served:
        stream = await trio.open_tcp_stream(served.host, served.port)
        async with stream:
            await stream.send_all(f"POST {CHAT} HTTP/1.1\r\nHost: x\r\n"
                                  f"Content-Length: {LIMIT}\r\n\r\n".encode())
            # 8 MiB more than any socket buffer holds: once send_all returns, the server
            # has been reading this body, so the request is genuinely in flight.
            await stream.send_all(b" " * (8 * 1024 * 1024))
            code, took = await served.stop(signal.SIGTERM)
    assert code == 0 and took < 10
    assert b"Traceback" not in served.stderr


async def test_sigterm_with_many_idle_connections() -> None:
    async with serving() as served:
        streams = [await trio.open_tcp_stream(served.host, served.port) for _ in range(50)]
        for stream in streams:  # slowloris: half a request line each, never finished
            await stream.send_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        await assert_still_serving(served)
        code, took = await served.stop(signal.SIGTERM)
        for stream in streams:
            await stream.aclose()
    assert code == 0 and took < 10


async def test_sigterm_and_sigint_during_a_slow_stream(tmp_path: Path) -> None:
    args = script(tmp_path, '[default]\ntext = "one two three four five six"\n'
                            "delay_ms = 60000\n")
    for signum, expected in [(signal.SIGTERM, 0), (signal.SIGINT, 130)]:
        async with (
            serving(args) as served,
            httpx.AsyncClient(base_url=served.url, timeout=30) as client,
            client.stream("POST", CHAT, json={**chat("hi"), "stream": True}) as r,
        ):
            assert r.status_code == 200
            async for _ in r.aiter_bytes():
                break  # the first chunk is out; the next one is a minute away
            code, took = await served.stop(signum)
        assert code == expected and took < 10


async def test_record_file_that_fills_up_stops_the_server_with_one_line() -> None:
    async with serving(["--record", "/dev/full"]) as served:
        r = await post(served.url, chat("hello"))
        assert r.status_code == 200
        with trio.fail_after(15):
            code = await served.proc.wait()
            await served.stderr_closed.wait()
    assert code == 1
    text = served.stderr.decode()
    assert "Traceback" not in text
    assert "cap model serve: cannot write the record file /dev/full: No space left on device" in (
        text)



async def test_sigterm_while_the_record_reader_has_stalled() -> None:
    """``--record /dev/stdout`` into a pipe nobody reads: requests wait, the server does not.

    A 1 MiB record line cannot fit a pipe (64 KiB), so once its first bytes arrive the
    write is certainly stuck; SIGTERM must still end the server at once.
    """
    async with serving(["--record", "/dev/stdout"]) as served, trio.open_nursery() as nursery:
        stdout = served.proc.stdout
        assert stdout is not None

        async def stuck_request() -> None:
            with contextlib.suppress(httpx.TransportError):  # the server goes away
                await post(served.url, chat("z" * (1024 * 1024)))

        nursery.start_soon(stuck_request)
        seen = b""
        with trio.fail_after(30):
            while b'{"seq":1' not in seen:
                seen += await stdout.receive_some(4096)
        code, took = await served.stop(signal.SIGTERM)
        nursery.cancel_scope.cancel()
    assert code == 0 and took < 10
    assert b"Traceback" not in served.stderr


async def test_stays_responsive_while_clients_flood_it_with_bodies() -> None:
    """Ten clients pushing 15 MiB bodies at once: an ordinary request still gets through."""
    async with serving() as served:
        streams = [await trio.open_tcp_stream(served.host, served.port) for _ in range(10)]
        started = trio.Event()
        sent = 0

        async def flood(stream: trio.SocketStream) -> None:
            nonlocal sent
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.send_all(f"POST {CHAT} HTTP/1.1\r\nHost: x\r\n"
                                      f"Content-Length: {15 << 20}\r\n\r\n".encode())
                for _ in range(15):
                    await stream.send_all(b" " * (1 << 20))
                    sent += 1
                    if sent >= 20:
                        started.set()

        async with trio.open_nursery() as nursery:
            for stream in streams:
                nursery.start_soon(flood, stream)
            with trio.fail_after(30):
                await started.wait()  # 20 MiB of hostile body already taken in
            begin = trio.current_time()
            await assert_still_serving(served)
            assert trio.current_time() - begin < 10
            code, took = await served.stop(signal.SIGTERM)
            nursery.cancel_scope.cancel()
        for stream in streams:
            await stream.aclose()
    assert code == 0 and took < 10


async def test_a_client_that_never_reads_its_reply_holds_up_nobody(tmp_path: Path) -> None:
    """Others are served meanwhile, and SIGTERM still ends the server (hypercorn shields
    its socket writes, so the CLI's exit deadline is what ends the stuck one)."""
    args = script(tmp_path, '[default]\ntext = "' + "word " * 2_000_000 + '"\n')
    async with serving(args) as served:
        stream = await trio.open_tcp_stream(served.host, served.port)
        body = json.dumps(chat("hi")).encode()
        await stream.send_all(f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: "
                              f"application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                              .encode() + body)
        # a 10 MB reply: take its head, then never read again
        status, _ = await http_head(stream, within=30, read_body=False)
        assert status == 200
        with trio.fail_after(30):
            r = await post(served.url, chat("another"))
        assert r.status_code == 200
        code, took = await served.stop(signal.SIGTERM)
        await stream.aclose()
        with trio.fail_after(15):
            await served.stderr_closed.wait()
    assert code == 0 and took < 10
    assert b"did not let its connection close" in served.stderr
