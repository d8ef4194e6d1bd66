"""Connections for the PostgreSQL log: opening, a small pool, and what an error means.

Everything here is blocking psycopg 3 and runs in worker threads (or in a
command-line reader that has no event loop).  The pool is a stack of idle
connections: a worker takes one, uses it alone, and puts it back only if it
is still healthy, so a connection that broke mid-query is never reused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

import psycopg

from trio_cap.events.log.urls import URL_SCHEMES, is_url, redact  # noqa: F401 - re-exported

T = TypeVar("T")


class Unavailable(Exception):
    """The database could not be reached (within the reconnect window)."""


def connection_lost(exc: BaseException) -> bool:
    """True when ``exc`` says the connection (not the statement) failed."""
    statement = psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable
    return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) and \
        not isinstance(exc, statement)


def why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def connect(url: str, *, connect_timeout: float, autocommit: bool = True) -> psycopg.Connection:
    """Connect; a malformed URL is ``psycopg.ProgrammingError`` (never retried)."""
    from psycopg.conninfo import conninfo_to_dict

    conninfo_to_dict(url)
    return psycopg.connect(url, autocommit=autocommit,
                           connect_timeout=max(1, round(connect_timeout)))


def connect_retrying(url: str, *, connect_timeout: float, deadline: float,
                     stop: threading.Event | None = None) -> psycopg.Connection:
    """Connect, retrying with backoff until ``deadline`` (monotonic); Unavailable after."""
    pause = 0.05
    while True:
        try:
            return connect(url, connect_timeout=min(connect_timeout,
                                                    max(1.0, deadline - time.monotonic())))
        except psycopg.Error as exc:
            left = deadline - time.monotonic()
            if left <= 0 or (stop is not None and stop.is_set()):
                raise Unavailable(f"{redact(url)}: cannot connect: {why(exc)}") from None
            if stop is not None:
                stop.wait(min(pause, left))
            else:
                time.sleep(min(pause, left))
            pause = min(pause * 2, 1.0)


class Pool:
    """At most ``size`` connections, each used by one thread at a time."""

    def __init__(self, url: str, size: int, connect_timeout: float) -> None:
        self.url = url
        self.connect_timeout = connect_timeout
        self._idle: list[psycopg.Connection] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(size)
        self._closed = False

    def run(self, work: Callable[[psycopg.Connection], T], *, deadline: float | None = None) -> T:
        """``work(conn)`` on a pooled connection; a connection that failed is dropped."""
        self._slots.acquire()
        try:
            conn = self._take(deadline)
            try:
                result = work(conn)
            except BaseException:
                self._drop_or_keep(conn)
                raise
            self._give(conn)
            return result
        finally:
            self._slots.release()

    def _take(self, deadline: float | None) -> psycopg.Connection:
        with self._lock:
            if self._closed:
                raise Unavailable("the log is closed")
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed and conn.info.transaction_status == \
                        psycopg.pq.TransactionStatus.IDLE:
                    return conn
                conn.close()
        if deadline is None:
            deadline = time.monotonic() + self.connect_timeout
        return connect_retrying(self.url, connect_timeout=self.connect_timeout,
                                deadline=deadline)

    def _give(self, conn: psycopg.Connection) -> None:
        with self._lock:
            if self._closed or conn.closed:
                conn.close()
            else:
                self._idle.append(conn)

    def _drop_or_keep(self, conn: psycopg.Connection) -> None:
        if conn.closed or conn.broken or \
                conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.close()
        else:
            self._give(conn)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
