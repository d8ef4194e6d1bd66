"""The PostgreSQL backend: one shared log for several orchestrator nodes.

How it stays honest under Trio: psycopg's async API runs on asyncio, so
appends drive libpq in non-blocking mode on Trio's own socket waits
(:mod:`.postgres_writer`; a cancelled appender still waits for the answer, so
an append's outcome is always known), and everything else runs the blocking
driver in Trio worker threads (``trio.to_thread``) on a small pool of
connections (:mod:`.postgres_conn`).
Live appends of other nodes arrive through LISTEN/NOTIFY on one listener
thread per log, which hands the rows to the event loop with
``trio.from_thread`` — no asyncio, no polling.

The contract (the same :class:`EventLog` as the memory and file logs):

* **seqs** are assigned by the database in the appending transaction
  (``cap_append``, see :mod:`.postgres_schema`): one transaction and one
  round trip per batch, one row per event, gap-free, commit order = seq order;
* **append returns after commit**.  A connection lost mid-append is
  reported (``notices``) and resolved: the writer reconnects (within
  ``reconnect_timeout``) and looks up the batch's token — committed: the
  append returns its seq; not committed: it is retried (the token's primary
  key refuses a duplicate even in a race); the database still unreachable:
  :class:`LogWriteError`, and the log takes no more appends.  A PostgreSQL
  restart during a run is therefore either ridden out or a clean failure;
  nothing acknowledged is lost (the server's own durability: an
  acknowledged commit is on its WAL);
* **reads** are synchronous, like the file log's: this process's view is a
  contiguous prefix of the table (``last_seq``), the recent part held in
  memory, older seqs read with one indexed range query;
* **subscriptions** are the base class's pulled subscription, unchanged: the
  listener (and every append, which fills any gap before it returns) extends
  the visible prefix, so catch-up and live tail are still one read and a
  dropped listener connection only delays events — it reconnects, LISTENs,
  then reads the head and every row after what it had.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from itertools import accumulate, repeat

import psycopg
import trio

from trio_cap.events.clock import Clock
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import Event
from trio_cap.events.log.base import EventLog, LogClosed
from trio_cap.events.log.errors import LogWriteError
from trio_cap.events.log.postgres_conn import (
    Pool,
    Unavailable,
    connect,
    connect_retrying,
    connection_lost,
    redact,
    why,
)
from trio_cap.events.log.postgres_group import GroupCommit, Queued
from trio_cap.events.log.postgres_rows import (
    Row,
    decode_rows,
    encode_batch,
    encode_envelope_rows,
)
from trio_cap.events.log.postgres_schema import CHANNEL_PREFIX, SchemaError, check
from trio_cap.events.log.postgres_writer import (
    MANY,
    AppendConnection,
    Batch,
    append_many_params,
    append_params,
)

__all__ = ["PostgresEventLog", "SchemaError", "Unavailable"]

_RECENT_KEEP = 65536
_FETCH = 4096
_RANGE = ("SELECT seq, at, stream, cause, payload FROM cap_events "
          "WHERE seq BETWEEN %s AND %s ORDER BY seq")
_STREAM = ("SELECT seq, at, stream, cause, payload FROM cap_events "
           "WHERE stream = %s AND seq BETWEEN %s AND %s ORDER BY seq")
_APPEND = "SELECT cap_append(%b, %b, %b, %b, %b, %b, %b)"  # binary: payloads travel as bytes
_HEAD = "SELECT last_seq FROM cap_head"

_logger = logging.getLogger("trio_cap.log.postgres")


class PostgresEventLog(EventLog):
    def __init__(
        self,
        url: str,
        *,
        clock: Clock | None = None,
        readonly: bool = False,
        create: bool = True,
        pool_size: int = 4,
        connect_timeout: float = 10.0,
        reconnect_timeout: float = 30.0,
        notices: Callable[[str], None] | None = None,
    ) -> None:
        """Connect and check the schema (blocking: use :meth:`open` inside Trio).

        ``create``: a writer creates the schema in a database that has none.
        ``notices`` hears what the log rode out (a lost connection, a retry).
        """
        super().__init__(clock)
        self.url = url
        self.path = redact(url)
        self.readonly = readonly
        self.connect_timeout = connect_timeout
        self.reconnect_timeout = reconnect_timeout
        self._notices = notices or _logger.warning
        self._read_lock = threading.Lock()
        self._failed: str | None = None
        self._recent: list[Envelope] = []
        self._ahead: dict[int, Envelope] = {}
        self._listener: _Listener | None = None
        self.retries = 0
        """Appends that met a lost connection and were resolved (committed or retried)."""
        self.node: str | None = None
        """The node appending through this log (set by ``open_node``): once another node
        fenced it (:meth:`fence`), the database refuses its appends."""
        try:
            self._reader = connect(url, connect_timeout=connect_timeout)
        except psycopg.ProgrammingError as exc:
            raise ValueError(why(exc)) from None
        except psycopg.Error as exc:
            raise Unavailable(f"{self.path}: cannot connect: {why(exc)}") from None
        try:
            check(self._reader, self.path, create=create and not readonly)
            schema = self._reader.execute("SELECT current_schema()").fetchone()[0]
            self.channel = CHANNEL_PREFIX + schema
            last = self._reader.execute(_HEAD).fetchone()[0]
        except BaseException as exc:
            self._reader.close()
            if isinstance(exc, psycopg.Error):
                raise Unavailable(f"{self.path}: {why(exc)}") from None
            raise
        self._visible_seq = last
        self._next_seq = self._recent_base = self._indexed_from = last + 1
        self._pool = Pool(url, pool_size, connect_timeout)
        self._writer: AppendConnection | None = None
        self._group = GroupCommit(self._commit_group)

    @classmethod
    async def open(cls, url: str, *, listen: bool = True, **options) -> PostgresEventLog:
        """Connect in a worker thread; ``listen``: follow other writers' appends live."""
        log = await trio.to_thread.run_sync(functools.partial(cls, url, **options))
        if listen:
            log.listen()
        return log

    def listen(self) -> None:
        """Start following appends made through other connections (call inside Trio)."""
        if self._listener is None and not self._closed:
            self._listener = _Listener(self, trio.lowlevel.current_trio_token())
            self._listener.start()

    # ---- writing -------------------------------------------------------
    async def append(
        self, events: Iterable[Event], *, stream: str = "", cause: int | None = None
    ) -> int:
        if self._closed:
            raise LogClosed("the event log is closed")
        batch = list(events)
        if not batch:
            await trio.lowlevel.checkpoint()
            return self._visible_seq
        if self.readonly:
            raise LogWriteError(f"{self.path} was opened read-only")
        if self._failed is not None:
            raise LogWriteError(f"{self.path}: the log takes no more appends after an earlier "
                                f"failure ({self._failed})")
        kinds, payloads = encode_batch(batch)  # refused here: nothing was sent
        queued = Queued(Batch(uuid.uuid4(), stream, cause, self._clock.now(), len(batch),
                              kinds, payloads), batch)
        try:
            last = await self._group.submit(queued)
        except LogWriteError as exc:
            self._failed = str(exc)
            raise
        if self._visible_seq < last:
            await self._fill_to(last)
        return last

    async def _commit_group(self, group: list[Queued]) -> None:
        """Store a group (see :mod:`.postgres_group`) and make it visible, in seq order."""
        try:
            if len(group) == 1:
                lasts = [await self._send(group[0].batch)]
            else:
                lasts = await self._send_many([q.batch for q in group])
        except BaseException as exc:
            for q in group:
                q.error = exc
            raise
        envs: list[Envelope] = []
        runs: list[tuple[str, int, int]] = []
        for q, last in zip(group, lasts, strict=True):  # a group's seqs follow its order
            q.last = last
            b = q.batch
            first = last - b.n + 1
            envs += map(Envelope, range(first, last + 1), repeat(b.at, b.n),
                        repeat(b.stream, b.n), repeat(b.cause, b.n), q.events)
            runs.append((b.stream, first, last))
        self._absorb(envs, runs)

    async def _send(self, b: Batch) -> int:
        """One batch through the non-blocking append connection; a failure that leaves the
        outcome unknown is resolved by its token on the blocking driver."""
        last, lost = await self._try_writer(append_params(b, self.node), None)
        if lost is None:
            return last
        return await trio.to_thread.run_sync(self._append_sync, b, lost)

    async def _send_many(self, batches: list[Batch]) -> list[int]:
        """Several batches in one call and one commit; each batch's last seq.  After a lost
        connection each batch is resolved by its own token (the group committed whole or
        not at all, so either all are found or each is sent again)."""
        last, lost = await self._try_writer(append_many_params(batches, self.node), MANY)
        if lost is None:  # the group's seqs run in its order, up to ``last``
            sizes = [b.n for b in batches]
            return list(accumulate(sizes, initial=last - sum(sizes)))[1:]
        return [await trio.to_thread.run_sync(self._append_sync, b, lost)
                for b in batches]

    async def _try_writer(self, params: list[bytes | None], name: bytes | None
                          ) -> tuple[int, str | None]:
        """Send on the append connection: (the last seq, None) when it answered, else
        (0, why the connection was lost: the outcome is unknown); other errors are the
        batch's own."""
        try:
            if self._writer is None or self._writer.broken:
                self._writer = None
                self._writer = await trio.to_thread.run_sync(self._open_writer)
            if name is None:
                return await self._writer.append(params, self.reconnect_timeout), None
            return await self._writer.append(params, self.reconnect_timeout, name), None
        except psycopg.Error as exc:
            if not connection_lost(exc):
                raise LogWriteError(f"{self.path}: append failed: {why(exc)}; nothing of "
                                    "the batch was stored") from None
            return 0, why(exc)

    def _open_writer(self) -> AppendConnection:
        return AppendConnection(connect(self.url, connect_timeout=self.connect_timeout))

    def _append_sync(self, b: Batch, lost: str | None = None) -> int:
        """One batch, one transaction, on the blocking driver; ``lost``: the first attempt's
        connection failed (why), so the token is looked up before anything is sent again."""
        deadline = None if lost is None else time.monotonic() + self.reconnect_timeout
        token = b.token
        params = (token, b.stream, b.cause, b.at, b.kind_list(), b.payload_list(), self.node)

        def append(conn: psycopg.Connection) -> int:
            return conn.execute(_APPEND, params).fetchone()[0]

        def lookup(conn: psycopg.Connection) -> int | None:
            row = conn.execute("SELECT last_seq FROM cap_appends WHERE token = %s",
                               (token,)).fetchone()
            return None if row is None else row[0]

        while True:
            try:
                if lost is not None:
                    committed = self._pool.run(lookup, deadline=deadline)
                    if committed is not None:
                        self.retries += 1
                        self._notices(f"{self.path}: the connection was lost during an append "
                                      f"({lost}); reconnected: the batch had committed "
                                      f"(seqs up to {committed})")
                        return committed
                    self.retries += 1
                    self._notices(f"{self.path}: the connection was lost during an append "
                                  f"({lost}); reconnected: the batch had not committed, so it "
                                  "was sent again")
                return self._pool.run(append, deadline=deadline)
            except psycopg.errors.UniqueViolation:
                lost = lost or "a retry met its own committed batch"
                continue  # our token is there: the lookup returns its seq
            except Unavailable as exc:
                raise LogWriteError(
                    f"{self.path}: the database is unreachable ({exc}); an append in flight "
                    "may or may not have committed, and the log takes no more appends "
                    "(reopen it to see its last seq)") from None
            except psycopg.Error as exc:
                if not connection_lost(exc):
                    raise LogWriteError(f"{self.path}: append failed: {why(exc)}; nothing of "
                                        "the batch was stored") from None
                lost = why(exc)
                if deadline is None:
                    deadline = time.monotonic() + self.reconnect_timeout

    def _absorb(self, envs: list[Envelope], runs: list[tuple[str, int, int]] | None = None
                ) -> None:
        """Extend the visible prefix with whatever of ``envs`` is new (any order, repeats ok).
        ``runs``: ``envs`` are this process's own batches in seq order, (stream, first, last)
        each, so the stream index takes one entry per batch without looking at the events."""
        nxt = self._visible_seq + 1
        ahead = self._ahead
        if not ahead and envs and envs[0].seq == nxt and envs[-1].seq == nxt + len(envs) - 1:
            run = envs  # the common case: this process's own append, next in line
            nxt += len(envs)
            if runs is not None:
                for stream, first, last in runs:
                    self._streams.add(stream, first, last)
                self._extend(run, nxt)
                return
        else:
            for env in envs:
                if env.seq >= nxt:
                    ahead[env.seq] = env
            run = []
            while nxt in ahead:
                run.append(ahead.pop(nxt))
                nxt += 1
            if not run:
                return
        index = self._streams
        stream = run[0].stream
        if run[-1].stream == stream and all(env.stream == stream for env in run):
            index.add(stream, run[0].seq, nxt - 1)  # one batch, one stream
        else:
            for env in run:
                index.add(env.stream, env.seq, env.seq)
        self._extend(run, nxt)

    def _extend(self, run: list[Envelope], nxt: int) -> None:
        self._recent.extend(run)
        if len(self._recent) > 2 * _RECENT_KEEP:
            drop = len(self._recent) - _RECENT_KEEP
            del self._recent[:drop]
            self._recent_base += drop
        self._next_seq = nxt
        self._publish(nxt - 1)

    async def _fill_to(self, last: int) -> None:
        """Read other writers' rows below ``last`` so the visible prefix reaches it."""
        while self._visible_seq < last:
            start = self._visible_seq + 1
            end = min(last, start + _FETCH - 1)
            envs = await trio.to_thread.run_sync(self._fetch_pooled, start, end)
            self._absorb(envs)

    def _fetch_pooled(self, start: int, end: int) -> list[Envelope]:
        deadline = time.monotonic() + self.reconnect_timeout
        while True:
            try:
                return decode_rows(self._pool.run(
                    lambda conn: conn.execute(_RANGE, (start, end), binary=True).fetchall(),
                    deadline=deadline))
            except psycopg.Error as exc:
                if not connection_lost(exc) or time.monotonic() > deadline:
                    raise LogWriteError(f"{self.path}: reading back committed events failed: "
                                        f"{why(exc)}") from None

    async def _store(self, envs: list[Envelope]) -> None:  # pragma: no cover - append overrides
        raise NotImplementedError

    # ---- reading -------------------------------------------------------
    def _query(self, sql: str, params: tuple) -> list[Row]:
        """A read on the reader connection, reconnecting once within the window."""
        with self._read_lock:
            try:
                return self._reader.execute(sql, params, binary=True).fetchall()
            except psycopg.Error as exc:
                if not connection_lost(exc):
                    raise Unavailable(f"{self.path}: read failed: {why(exc)}") from None
            self._reader.close()
            self._reader = connect_retrying(
                self.url, connect_timeout=self.connect_timeout,
                deadline=time.monotonic() + self.reconnect_timeout)
            try:
                return self._reader.execute(sql, params, binary=True).fetchall()
            except psycopg.Error as exc:
                raise Unavailable(f"{self.path}: read failed: {why(exc)}") from None

    def _read_range(self, from_seq: int, to_seq: int) -> list[Envelope]:
        base = self._recent_base
        if from_seq >= base:
            i = from_seq - base
            return self._recent[i : i + (to_seq - from_seq + 1)]
        out = decode_rows(self._query(_RANGE, (from_seq, min(to_seq, base - 1))))
        if to_seq >= base:
            out.extend(self._recent[: to_seq - base + 1])
        return out

    async def _read_range_async(self, from_seq: int, to_seq: int) -> list[Envelope]:
        """Rows older than the in-memory window are read in a worker thread, so a
        subscriber catching up from far back never stalls the event loop; the window
        itself is read here, in the loop that changes it."""
        out: list[Envelope] = []
        while from_seq <= to_seq:
            base = self._recent_base
            if from_seq >= base:
                out.extend(self._read_range(from_seq, to_seq))
                break
            older = min(to_seq, base - 1)
            out.extend(decode_rows(await trio.to_thread.run_sync(
                self._query, _RANGE, (from_seq, older))))
            from_seq = older + 1
        return out

    _reads_old_streams = True

    async def _read_old_stream_async(self, stream: str, start: int, end: int
                                     ) -> list[Envelope]:
        """One session's rows from before this process opened the log: the (stream, seq)
        index, in a worker thread."""
        return decode_rows(await trio.to_thread.run_sync(
            self._query, _STREAM, (stream, start, end)))

    def read(self, from_seq: int = 1, stream: str | None = None, *, until: int | None = None,
             limit: int | None = None) -> list[Envelope]:
        start = max(from_seq, 1)
        if stream is None or start >= self._indexed_from:
            return super().read(from_seq, stream, until=until, limit=limit)
        # one stream's events from before this process opened the log: the (stream, seq) index
        end = self._visible_seq if until is None else min(until, self._visible_seq)
        if limit is not None:
            end = min(end, start + limit - 1)
        old_end = min(end, self._indexed_from - 1)
        out = decode_rows(self._query(_STREAM, (stream, start, old_end))) \
            if start <= old_end else []
        if end >= self._indexed_from:
            out.extend(self._read_stream(stream, self._indexed_from, end))
        return out

    def server_time(self) -> float:
        """The database server's clock (Unix seconds): one clock for every node, so leases do
        not depend on the machines' clocks agreeing."""
        with self._read_lock:
            try:
                return self._reader.execute(
                    "SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()[0]
            except psycopg.Error as exc:
                raise Unavailable(f"{self.path}: {why(exc)}") from None

    async def fence(self, node: str, by: str) -> None:
        """Refuse every later append of ``node`` (it was taken over by ``by``), in the
        database, before the taker writes anything about it."""
        def fence() -> None:
            self._pool.run(lambda conn: conn.execute(
                "INSERT INTO cap_fenced (node, fenced_by) VALUES (%s, %s) "
                "ON CONFLICT (node) DO NOTHING", (node, by)))

        await trio.to_thread.run_sync(fence)

    def head(self) -> int:
        """The last committed seq in the database now (which may be ahead of ``last_seq``)."""
        return self._query(_HEAD, ())[0][0]

    @asynccontextmanager
    async def exclusive(self, name: str) -> AsyncIterator[None]:
        """Hold a database-wide advisory lock named ``name`` (one holder across all nodes),
        with this log caught up to the head once it is held."""
        conn = await trio.to_thread.run_sync(
            functools.partial(connect, self.url, connect_timeout=self.connect_timeout))
        try:
            await trio.to_thread.run_sync(
                conn.execute, "SELECT pg_advisory_lock(hashtext(%s))", (f"trio-cap:{name}",))
            head = await trio.to_thread.run_sync(lambda: conn.execute(_HEAD).fetchone()[0])
            await self._fill_to(head)
            yield
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(conn.close)

    def import_envelopes(self, windows: Iterable[list[Envelope]]):
        """Store envelopes with their own seqs into this empty log, in one transaction
        (``cap log copy``); a non-empty log is refused and nothing is written."""
        from trio_cap.events.log.copy import CopyRefused, CopyReport

        count = last = 0
        with self._read_lock, self._reader.transaction():
            conn = self._reader
            head = conn.execute("SELECT last_seq FROM cap_head FOR UPDATE").fetchone()[0]
            if head:
                raise CopyRefused(f"{self.path} already holds {head} events; copy into an "
                                  "empty log")
            with conn.cursor().copy("COPY cap_events (seq, at, stream, cause, kind, payload) "
                                    "FROM STDIN") as copy:
                for envs in windows:
                    for (seq, at, stream, cause, payload), env in zip(
                            encode_envelope_rows(envs), envs, strict=True):
                        copy.write_row((seq, at, stream, cause, env.kind, payload))
                    count += len(envs)
                    last = envs[-1].seq if envs else last
            conn.execute("UPDATE cap_head SET last_seq = %s", (last,))
            conn.execute("SELECT pg_notify(%s, %s)", (self.channel, str(last)))
        return CopyReport(count, last)

    def close_sync(self) -> None:
        """Close without Trio, for command-line tools that never appended."""
        if not self._closed:
            self._closed = True
            self._close_connections()

    # ---- lifecycle -----------------------------------------------------
    async def _close_backend(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            await trio.to_thread.run_sync(listener.stop)
        await trio.to_thread.run_sync(self._close_connections)

    def _close_connections(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._pool.close()
        with self._read_lock:
            self._reader.close()

    def close(self) -> None:
        """Close a read-only log without Trio (command-line readers)."""
        if not self.readonly:
            raise RuntimeError("a writable log is closed with aclose()")
        if not self._closed:
            self._closed = True
            if self._listener is not None:
                self._listener.stop()
            self._close_connections()


class _Listener:
    """One thread: LISTEN for the log's high-water seq, read the new rows, hand them over.

    After every (re)connect it LISTENs first and then reads the head, so an
    append that committed while it was away is read, never missed.
    """

    def __init__(self, log: PostgresEventLog, token: trio.lowlevel.TrioToken) -> None:
        self.log = log
        self.token = token
        self.wake = f"cap_wake.{uuid.uuid4().hex[:16]}"
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"cap-listen {log.path}",
                                       daemon=True)
        self.fetched = log._visible_seq
        self.reconnects = 0

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            try:  # wake it at once rather than at its next timeout
                with connect(self.log.url, connect_timeout=2) as conn:
                    conn.execute(f'NOTIFY "{self.wake}"')
            except psycopg.Error:
                pass
            self.thread.join(timeout=5)

    def _run(self) -> None:
        log = self.log
        pause = 0.05
        while not self.stopping.is_set():
            try:
                with connect(log.url, connect_timeout=log.connect_timeout) as conn:
                    conn.execute(f'LISTEN "{log.channel}"')
                    conn.execute(f'LISTEN "{self.wake}"')
                    pause = 0.05
                    self._deliver(conn, conn.execute(_HEAD).fetchone()[0])
                    while not self.stopping.is_set():
                        high = 0
                        for note in conn.notifies(timeout=1.0, stop_after=1):
                            high = max(high, _seq(note.payload))
                        for note in conn.notifies(timeout=0.0):  # coalesce a burst
                            high = max(high, _seq(note.payload))
                        if high:
                            self._deliver(conn, high)
            except psycopg.Error as exc:
                if self.stopping.is_set():
                    return
                self.reconnects += 1
                if self.reconnects == 1 or self.reconnects % 100 == 0:
                    log._notices(f"{log.path}: the live subscription lost its connection "
                                 f"({why(exc)}); reconnecting and catching up")
                self.stopping.wait(pause)
                pause = min(pause * 2, 1.0)
            except (trio.RunFinishedError, trio.Cancelled):
                return

    def _deliver(self, conn: psycopg.Connection, high: int) -> None:
        start = max(self.fetched, self.log._visible_seq) + 1
        while start <= high and not self.stopping.is_set():
            end = min(high, start + _FETCH - 1)
            rows = conn.execute(_RANGE, (start, end), binary=True).fetchall()
            envs = decode_rows(rows)
            if envs:
                trio.from_thread.run_sync(self.log._absorb, envs, trio_token=self.token)
            self.fetched = end
            start = end + 1


def _seq(payload: str) -> int:
    try:
        return int(payload)
    except ValueError:
        return 0
