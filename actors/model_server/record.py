"""The request log: what each agent really sent, as JSONL, secrets removed.

Tests assert on agent behaviour through this (which endpoint, which tools were
offered, what the tool result said), so every request is kept in memory as well
as written, one flushed line each, to the optional file.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import trio

from trio_cap.actors.model_server.sse import dumps

REDACTED = "<redacted>"
_SECRET_HEADERS = frozenset({
    "authorization", "proxy-authorization", "x-api-key", "x-goog-api-key", "api-key",
    "cookie", "set-cookie",
})
_SECRET_WORDS = ("token", "secret", "password", "api-key", "apikey")
_SECRET_QUERY = frozenset({"key", "api_key", "apikey", "access_token", "token"})


def is_secret_header(name: str) -> bool:
    name = name.lower()
    return name in _SECRET_HEADERS or any(w in name for w in _SECRET_WORDS)


def clean_headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """Header dict (repeated names joined) with secret values replaced, names kept."""
    out: dict[str, str] = {}
    for key_b, value_b in raw:
        key = key_b.decode("latin-1").lower()
        value = REDACTED if is_secret_header(key) else value_b.decode("latin-1")
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


def clean_query(query: str) -> dict[str, str]:
    return {k: (REDACTED if k.lower() in _SECRET_QUERY else v)
            for k, v in parse_qsl(query, keep_blank_values=True)}


def _open_append(path: Path) -> int:
    """Open for appending without ever blocking: a FIFO nobody reads fails (ENXIO) at once
    instead of hanging the server before it listens.  The descriptor stays non-blocking:
    Linux ignores that for regular files, and for a pipe, FIFO or terminal it lets a
    stalled reader stall only the requests being recorded, never the event loop."""
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)


class RecordError(Exception):
    """The record file cannot be opened; the message is one line naming it."""


class Recorder:
    """Keeps every record; lets a test wait for the n-th one instead of sleeping.

    ``keep=False`` (the CLI) counts records without holding them: a long-running
    server must not keep every request body it ever saw in memory.  A record is
    written before its response is sent (a test that got the response finds its
    line), waiting for a slow reader without blocking anything else.  A write that
    fails (disk full, file gone) does not fail the request: recording stops,
    ``failure`` says why in one line and ``failed`` is set, so the owner can stop
    serving rather than go on with a record that silently lacks requests.
    """

    def __init__(self, path: Path | None = None, *, keep: bool = True) -> None:
        self.path = path
        self.keep = keep
        self.records: list[dict[str, Any]] = []
        self.count = 0  # records numbered so far
        self.done = 0  # records fully handled (written, when there is a file)
        self.failure: str | None = None
        self.failed = trio.Event()
        self._fd: int | None = None
        self._lock = trio.Lock()  # one line at a time, in seq order (trio locks are fair)
        self._waiters: list[tuple[int, trio.Event]] = []
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = _open_append(path)
            except OSError as exc:
                why = ("a FIFO that no process is reading" if exc.errno == errno.ENXIO
                       else exc.strerror or str(exc))
                raise RecordError(f"cannot open the record file {path}: {why}") from None

    async def add(self, record: dict[str, Any]) -> None:
        await self.commit(self.prepare(record))

    def prepare(self, record: dict[str, Any]) -> bytes | None:
        """Number the record and encode its line, at once (no checkpoint): the caller can
        then drop the request's decoded body before waiting on :meth:`commit`."""
        self.count += 1
        record = {"seq": self.count, **record}
        if self.keep:
            self.records.append(record)
        if self._fd is None:
            return None
        try:
            return dumps(record) + b"\n"
        except RecursionError:
            return dumps({**record, "body": "<body nested too deeply to record>"}) + b"\n"

    async def commit(self, line: bytes | None) -> None:
        """Write a prepared line (in seq order), then wake whoever waits for that many."""
        if line is not None:
            await self._write(line)
        self.done += 1
        still = []
        for n, event in self._waiters:
            if self.done >= n:
                event.set()
            else:
                still.append((n, event))
        self._waiters = still

    async def _write(self, line: bytes) -> None:
        view = memoryview(line)
        async with self._lock:
            while view and self._fd is not None:
                try:
                    view = view[os.write(self._fd, view):]
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(self._fd)
                except OSError as exc:
                    self.failure = (f"cannot write the record file {self.path}: "
                                    f"{exc.strerror or exc}")
                    self.close()
                    self.failed.set()

    async def wait_for(self, count: int) -> list[dict[str, Any]]:
        if self.done < count:
            event = trio.Event()
            self._waiters.append((count, event))
            await event.wait()
        return self.records

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)
