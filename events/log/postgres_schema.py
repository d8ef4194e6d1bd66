"""The PostgreSQL log's schema as numbered migrations, and the checks an open makes.

The schema lives in the connection's current schema (``search_path``), so one
database can hold several logs (``?options=-csearch_path%3Dteam_a``).

Tables (migration 1):

* ``cap_events`` — one row per event: ``seq`` (primary key, global, gap-free),
  ``stream``, ``kind``, ``at``, ``cause``, ``payload`` (the event as msgpack, the
  same bytes the file log stores for it); index on ``(stream, seq)``.
* ``cap_head`` — one row holding the last committed seq.  An append takes its
  row lock, numbers its batch from it and commits; the next appender waits on
  that lock, so seq N+1 can never become visible before N (commit order = seq
  order) and a rolled-back batch leaves no hole.
* ``cap_appends`` — the token of every committed batch and its last seq: after
  a connection is lost mid-append the writer asks whether its token is there,
  so it retries only a batch that provably did not commit (and the primary
  key refuses a second copy even then).
* ``cap_schema`` — the applied migration versions.

Migration 2 adds ``cap_append(...)``: the whole append (lock, number, insert,
token, NOTIFY with the new high-water seq) in one server-side call, so an
append costs one round trip and one commit whatever its size.  Migration 3
adds ``cap_fenced``: a node that was taken over is listed there (by the taker,
before it writes anything), and ``cap_append`` refuses that node's appends
under the head lock — so nothing a lost node writes can follow its takeover.
Migration 4 adds ``cap_append_many(...)``: several batches (each with its own
token, stream, cause and time) in one call and one commit — the group commit
of appends that queued up behind one another (many sessions, one connection).
"""

from __future__ import annotations

LOCK_KEY = 0x63617073  # 'caps': pg_advisory_xact_lock key that serialises migrations
CHANNEL_PREFIX = "cap_log."
"""LISTEN/NOTIFY channel: this prefix plus the schema name (one channel per log)."""

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (1, "events, head, append tokens", """
CREATE TABLE cap_events (
    seq     bigint PRIMARY KEY,
    stream  text NOT NULL,
    kind    text NOT NULL,
    at      double precision NOT NULL,
    cause   bigint,
    payload bytea NOT NULL
);
CREATE INDEX cap_events_stream_seq ON cap_events (stream, seq);
CREATE TABLE cap_head (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    last_seq bigint NOT NULL
);
INSERT INTO cap_head VALUES (true, 0);
CREATE TABLE cap_appends (
    token    uuid PRIMARY KEY,
    last_seq bigint NOT NULL
);
"""),
    (2, "one-call append with NOTIFY", """
CREATE FUNCTION cap_append(p_token uuid, p_stream text, p_cause bigint,
                           p_at double precision, p_kinds text[], p_payloads bytea[])
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint := cardinality(p_payloads);
    last bigint;
BEGIN
    UPDATE cap_head SET last_seq = last_seq + n RETURNING last_seq INTO last;
    INSERT INTO cap_appends (token, last_seq) VALUES (p_token, last);
    INSERT INTO cap_events (seq, stream, kind, at, cause, payload)
        SELECT last - n + u.i, p_stream, u.k, p_at, p_cause, u.p
        FROM unnest(p_kinds, p_payloads) WITH ORDINALITY AS u(k, p, i);
    PERFORM pg_notify('cap_log.' || current_schema(), last::text);
    RETURN last;
END
$$;
"""),
)

MIGRATIONS += (
    (3, "fenced nodes: a taken-over node's appends are refused in the database", """
CREATE TABLE cap_fenced (
    node      text PRIMARY KEY,
    fenced_by text NOT NULL,
    at        timestamptz NOT NULL DEFAULT now()
);
DROP FUNCTION cap_append(uuid, text, bigint, double precision, text[], bytea[]);
CREATE FUNCTION cap_append(p_token uuid, p_stream text, p_cause bigint,
                           p_at double precision, p_kinds text[], p_payloads bytea[],
                           p_node text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint := cardinality(p_payloads);
    last bigint;
    taker text;
BEGIN
    UPDATE cap_head SET last_seq = last_seq + n RETURNING last_seq INTO last;
    IF p_node IS NOT NULL THEN  -- under the head lock: a fence committed before is seen
        SELECT fenced_by INTO taker FROM cap_fenced WHERE node = p_node;
        IF FOUND THEN
            RAISE EXCEPTION 'node % was taken over by % after its lease lapsed; it may not '
                            'append any more', p_node, taker USING ERRCODE = 'CAPF0';
        END IF;
    END IF;
    INSERT INTO cap_appends (token, last_seq) VALUES (p_token, last);
    INSERT INTO cap_events (seq, stream, kind, at, cause, payload)
        SELECT last - n + u.i, p_stream, u.k, p_at, p_cause, u.p
        FROM unnest(p_kinds, p_payloads) WITH ORDINALITY AS u(k, p, i);
    PERFORM pg_notify('cap_log.' || current_schema(), last::text);
    RETURN last;
END
$$;
"""),
    (4, "group commit: several appended batches in one call and one commit", """
CREATE FUNCTION cap_append_many(p_tokens uuid[], p_ends int[], p_streams text[],
                                p_causes bigint[], p_ats double precision[], p_kinds text[],
                                p_payloads bytea[], p_node text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint := cardinality(p_payloads);
    last bigint;
    taker text;
BEGIN
    UPDATE cap_head SET last_seq = last_seq + n RETURNING last_seq INTO last;
    IF p_node IS NOT NULL THEN  -- under the head lock: a fence committed before is seen
        SELECT fenced_by INTO taker FROM cap_fenced WHERE node = p_node;
        IF FOUND THEN
            RAISE EXCEPTION 'node % was taken over by % after its lease lapsed; it may not '
                            'append any more', p_node, taker USING ERRCODE = 'CAPF0';
        END IF;
    END IF;
    INSERT INTO cap_appends (token, last_seq)
        SELECT t.tok, last - n + t.e FROM unnest(p_tokens, p_ends) AS t(tok, e);
    INSERT INTO cap_events (seq, stream, kind, at, cause, payload)
        SELECT last - n + u.i, u.s, u.k, u.a, u.c, u.p
        FROM unnest(p_streams, p_kinds, p_ats, p_causes, p_payloads)
             WITH ORDINALITY AS u(s, k, a, c, p, i);
    PERFORM pg_notify('cap_log.' || current_schema(), last::text);
    RETURN last;
END
$$;
"""),
)

LATEST = MIGRATIONS[-1][0]


class SchemaError(Exception):
    """The database holds no usable trio-cap log (absent, too old or too new)."""


def current_version(conn) -> int | None:
    """The highest applied migration, or None when this schema holds no trio-cap log."""
    row = conn.execute("SELECT to_regclass('cap_schema') IS NOT NULL").fetchone()
    if not row[0]:
        return None
    row = conn.execute("SELECT coalesce(max(version), 0) FROM cap_schema").fetchone()
    return int(row[0])


def migrate(conn) -> list[int]:
    """Apply every missing migration, each in its own transaction; returns those applied.

    Safe to run from several processes at once: an advisory lock makes them
    take turns, and each re-reads the version under it.
    """
    applied: list[int] = []
    for version, _, sql in MIGRATIONS:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            conn.execute("CREATE TABLE IF NOT EXISTS cap_schema (version int PRIMARY KEY, "
                         "applied_at timestamptz NOT NULL DEFAULT now())")
            have = current_version(conn) or 0
            if have > LATEST:
                raise SchemaError(newer_message(have))
            if version <= have:
                continue
            conn.execute(sql)
            conn.execute("INSERT INTO cap_schema (version) VALUES (%s)", (version,))
            applied.append(version)
    return applied


def newer_message(have: int) -> str:
    return (f"the log's schema is version {have}, newer than this trio-cap knows ({LATEST}); "
            "upgrade trio-cap")


def check(conn, where: str, *, create: bool) -> None:
    """Refuse a schema this build cannot use; create it in an empty one if ``create``."""
    have = current_version(conn)
    if have is None or have == 0:
        if create:
            migrate(conn)
            return
        raise SchemaError(f"{where} holds no trio-cap log (create it with: cap log migrate "
                          f"{where})")
    if have > LATEST:
        raise SchemaError(f"{where}: {newer_message(have)}")
    if have < LATEST:
        raise SchemaError(f"{where}: the log's schema is version {have}, this trio-cap needs "
                          f"{LATEST}; upgrade it with: cap log migrate {where}")
