"""The request log: what each agent really sent, as JSONL, secrets removed.

Tests assert on agent behaviour through this (which endpoint, which tools were
offered, what the tool result said), so every request is kept in memory as well
as written, one flushed line each, to the optional file.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any
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


class Recorder:
    """Keeps every record; lets a test wait for the n-th one instead of sleeping."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.records: list[dict[str, Any]] = []
        self._file: IO[bytes] | None = None
        self._waiters: list[tuple[int, trio.Event]] = []
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("ab")

    def add(self, record: dict[str, Any]) -> None:
        record = {"seq": len(self.records) + 1, **record}
        self.records.append(record)
        if self._file is not None:
            self._file.write(dumps(record) + b"\n")
            self._file.flush()
        still = []
        for n, event in self._waiters:
            if len(self.records) >= n:
                event.set()
            else:
                still.append((n, event))
        self._waiters = still

    async def wait_for(self, count: int) -> list[dict[str, Any]]:
        if len(self.records) < count:
            event = trio.Event()
            self._waiters.append((count, event))
            await event.wait()
        return self.records

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
