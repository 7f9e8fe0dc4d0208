"""Fixtures of the state store tests (the harnesses live in ``statekit.py``).

``backend`` runs each test on SQLite (a file in ``tmp_path``) and on
PostgreSQL (the database named by ``GOVSYNC_TEST_POSTGRES``, e.g.
``postgresql://postgres@127.0.0.1:5432/test``; those tests are marked
``postgres`` and skipped when the variable is unset): a ``Harness`` of
contract.py, the suite both backends run (test_contract.py).  Where PostgreSQL
should be there (``.ci/run`` sets ``GOVSYNC_REQUIRE_POSTGRES=1`` on a machine
that has it), they fail instead: unset or unreachable, nothing is skipped
silently.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from contract import Harness
from statekit import POSTGRES_ENV, REQUIRE_ENV, PostgresHarness, SqliteHarness

from govsync.state import StateStore


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The PostgreSQL test database's URL, or skip (fail, if it is required)."""
    url = os.environ.get(POSTGRES_ENV, "")
    required = os.environ.get(REQUIRE_ENV, "") == "1"
    if not url and required:
        pytest.fail(f"{REQUIRE_ENV}=1 but {POSTGRES_ENV} is not set: the PostgreSQL "
                    "tests must run here", pytrace=False)
    if required:
        try:
            psycopg.connect(url, connect_timeout=10).close()
        except psycopg.Error as exc:
            pytest.fail(f"{REQUIRE_ENV}=1 but the database of {POSTGRES_ENV} cannot be "
                        f"reached: {str(exc).strip()}", pytrace=False)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set; to run the PostgreSQL tests set it to a "
                    "database they may create govsync_* tables in, e.g. "
                    "postgresql://postgres@127.0.0.1:5432/test")
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    harness: Harness
    if request.param == "sqlite":
        harness = SqliteHarness(str(tmp_path / "state.db"))
    else:
        harness = PostgresHarness(request.getfixturevalue("postgres_url"))
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture
def store(backend: Harness) -> StateStore:
    return backend.open()


@pytest.fixture
def ws(backend: Harness) -> str:
    return backend.workspace()


@pytest.fixture
def pg_schema(postgres_url: str) -> Iterator[tuple[str, str]]:
    """(a state URL whose tables live in a PostgreSQL schema of their own, the schema);
    the schema is dropped afterwards."""
    import uuid

    schema = f"govsync_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
        try:
            yield (postgres_url + ("&" if "?" in postgres_url else "?")
                   + f"options=-csearch_path%3D{schema}", schema)
        finally:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")
