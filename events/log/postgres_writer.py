"""The append connection: libpq in non-blocking mode, driven by Trio's own socket waits.

An append is the hot path (one per batch, thousands a second), and a worker
thread hop costs 60–150 µs on a busy machine — a third of a one-row commit.
So appends skip the threads: one connection per log, opened normally (in a
thread), then switched to libpq's non-blocking mode; a call sends the prepared
``cap_append`` with binary parameters and waits on the socket with
``trio.lowlevel.wait_readable`` / ``wait_writable``.  Everything else (reads,
the listener, resolving a lost connection) stays on the blocking driver in
threads (:mod:`.postgres_conn`).

A call is shielded from cancellation (a cancelled appender waits for the
answer, so the outcome is always known) and bounded by ``answer_timeout``;
an error that is not the statement's own is raised as
``psycopg.OperationalError`` and the connection is dropped, so the caller
resolves the batch by its token.
"""

from __future__ import annotations

import struct
import uuid

import attrs
import psycopg
import trio
from psycopg import pq

from trio_cap.events.log.postgres_rows import split_elements

_NAME = b"cap_append"
_SQL = b"SELECT cap_append($1, $2, $3, $4, $5, $6, $7)"
_TYPES = (2950, 25, 20, 701, 1009, 1001, 25)  # uuid, text, int8, float8, text[], bytea[], text
_MANY_NAME = MANY = b"cap_append_many"
_MANY_SQL = b"SELECT cap_append_many($1, $2, $3, $4, $5, $6, $7, $8)"
_MANY_TYPES = (2951, 1007, 1009, 1016, 1022, 1009, 1001, 25)
"""uuid[], int4[], text[], int8[], float8[], text[], bytea[], text"""
_TEXT_OID, _BYTEA_OID = 25, 17
_UUID_OID, _INT4_OID, _INT8_OID, _FLOAT8_OID = 2950, 23, 20, 701
_len = _int4 = struct.Struct(">i").pack
_int8 = struct.Struct(">q")
_float8 = struct.Struct(">d").pack
_array_head = struct.Struct(">iiIii").pack


def _array(oid: int, items: list[bytes] | list[bytes | None]) -> bytes:
    """A one-dimensional array in PostgreSQL's binary format (a None is a NULL)."""
    nulls = any(item is None for item in items)
    parts = [_array_head(1, int(nulls), oid, len(items), 1)]
    for item in items:
        if item is None:
            parts.append(_len(-1))
            continue
        parts.append(_len(len(item)))
        parts.append(item)
    return b"".join(parts)


def _framed(oid: int, count: int, body: bytes | bytearray, nulls: bool = False) -> bytes:
    """An array whose elements are already in ``body`` (see ``encode_batch``)."""
    return _array_head(1, int(nulls), oid, count, 1) + body


def _element(value: bytes | None) -> bytes:
    return _len(-1) if value is None else _len(len(value)) + value


@attrs.frozen
class Batch:
    """One appended batch as it goes to the database: ``kinds`` and ``payloads`` are the
    elements of its ``text[]`` and ``bytea[]`` arguments (``postgres_rows.encode_batch``)."""

    token: uuid.UUID
    stream: str
    cause: int | None
    at: float
    n: int
    kinds: bytes
    payloads: bytes | bytearray

    def kind_list(self) -> list[str]:
        return [k.decode() for k in split_elements(self.kinds)]

    def payload_list(self) -> list[bytes]:
        return split_elements(self.payloads)


def append_params(b: Batch, node: str | None) -> list[bytes | None]:
    return [b.token.bytes, b.stream.encode(), None if b.cause is None else _int8.pack(b.cause),
            _float8(b.at), _framed(_TEXT_OID, b.n, b.kinds),
            _framed(_BYTEA_OID, b.n, b.payloads), None if node is None else node.encode()]


def append_many_params(batches: list[Batch], node: str | None) -> list[bytes | None]:
    """``cap_append_many``'s arguments: per batch its token and where it ends; per event its
    batch's stream, cause and time beside its kind and payload."""
    ends: list[bytes] = []
    streams: list[bytes] = []
    causes: list[bytes] = []
    ats: list[bytes] = []
    total = 0
    for b in batches:
        total += b.n
        ends.append(_int4(total))
        streams.append(_element(b.stream.encode()) * b.n)
        causes.append(_element(None if b.cause is None else _int8.pack(b.cause)) * b.n)
        ats.append(_element(_float8(b.at)) * b.n)
    nulls = any(b.cause is None for b in batches)
    return [_array(_UUID_OID, [b.token.bytes for b in batches]), _array(_INT4_OID, ends),
            _framed(_TEXT_OID, total, b"".join(streams)),
            _framed(_INT8_OID, total, b"".join(causes), nulls),
            _framed(_FLOAT8_OID, total, b"".join(ats)),
            _framed(_TEXT_OID, total, b"".join(b.kinds for b in batches)),
            _framed(_BYTEA_OID, total, b"".join(b.payloads for b in batches)),
            None if node is None else node.encode()]


class AppendConnection:
    def __init__(self, conn: psycopg.Connection) -> None:
        """Take over an open autocommit connection: prepare the append, go non-blocking."""
        pg = conn.pgconn
        for name, sql, types in ((_NAME, _SQL, _TYPES), (_MANY_NAME, _MANY_SQL, _MANY_TYPES)):
            result = pg.prepare(name, sql, types)
            if result.status != pq.ExecStatus.COMMAND_OK:
                conn.close()
                raise psycopg.OperationalError(_message(result) or "cannot prepare the append")
        pg.nonblocking = 1
        self._conn = conn
        self._fd = pg.socket
        self.broken = False

    async def append(self, params: list[bytes | None], answer_timeout: float,
                     name: bytes = _NAME) -> int:
        """The last seq once committed; OperationalError when the outcome is unknown.
        ``name``: ``cap_append`` (one batch) or ``cap_append_many`` (a group)."""
        with trio.CancelScope(shield=True):
            with trio.move_on_after(answer_timeout):
                try:
                    return await self._call(params, name)
                except psycopg.OperationalError:
                    self.close()
                    raise
            self.close()
            raise psycopg.OperationalError(
                f"no answer to an append within {answer_timeout:g} s")

    async def _call(self, params: list[bytes | None], name: bytes) -> int:
        pg = self._conn.pgconn
        pg.send_query_prepared(name, params, (1,) * len(params), 1)
        while pg.flush():
            await trio.lowlevel.wait_writable(self._fd)
        results = []
        while True:
            pg.consume_input()
            while not pg.is_busy():
                result = pg.get_result()
                if result is None:
                    return _last_seq(results)
                results.append(result)
            await trio.lowlevel.wait_readable(self._fd)

    def close(self) -> None:
        self.broken = True
        self._conn.close()


def _message(result: pq.PGresult) -> str:
    raw = result.error_message
    return raw.decode(errors="replace").strip() if isinstance(raw, bytes) else str(raw)


def _last_seq(results: list[pq.PGresult]) -> int:
    for result in results:
        if result.status == pq.ExecStatus.FATAL_ERROR:
            state = result.error_field(pq.DiagnosticField.SQLSTATE)
            try:
                error = psycopg.errors.lookup(state.decode()) if state else psycopg.DatabaseError
            except KeyError:
                error = psycopg.DatabaseError
            raise error(_message(result))
    for result in results:
        if result.status == pq.ExecStatus.TUPLES_OK and result.ntuples == 1:
            return _int8.unpack(result.get_value(0, 0))[0]
    raise psycopg.OperationalError("the append returned no seq")
