"""Fixtures for a real, throwaway PostgreSQL (bench/pg_server.py): one server per test
session, one fresh schema (so one empty log) per test.  Missing binaries fail the test
loudly with what to install; nothing is skipped."""

from __future__ import annotations

import itertools

import pytest

from bench.pg_server import PgServer, PostgresMissing

_schemas = itertools.count(1)


@pytest.fixture(scope="session")
def pg_server():
    try:
        server = PgServer()
    except PostgresMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    server.start()
    yield server
    server.destroy()


def fresh_url(server: PgServer) -> str:
    if not server.running():  # a test that stopped the server must not break the next one
        server.start()
    schema = f"t{next(_schemas)}"
    server.psql(f"CREATE SCHEMA {schema}")
    return server.url_for(schema)


@pytest.fixture
def pg_url(pg_server) -> str:
    """The URL of an empty log of its own."""
    return fresh_url(pg_server)
