"""What only the PostgreSQL backend has: its connection (the password never shown),
its sessions, its tables made by the first write (concurrently, in a schema of
their own, upgraded from an older release) and their types.  What every backend
does is contract.py's."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from contract import ALICE, BOB
from statekit import drop_workspaces, terminate, unique_workspace

from govsync.errors import StateError, StateLockedError
from govsync.state import APPLIED, Entry, StateStore, open_store
from govsync.state.postgres import PostgresBackend, PostgresStore


def backend_of(store: StateStore) -> PostgresBackend:
    assert isinstance(store.backend, PostgresBackend)
    return store.backend


# -- errors ---------------------------------------------------------------------------

def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("template", [
    "postgresql://govsync:Hunter2-s3cret@127.0.0.1:{port}/state",
    "postgres://govsync@127.0.0.1:{port}/state?password=Hunter2-s3cret&sslmode=disable",
])
def test_postgres_connection_failure_is_a_state_error_without_the_password(
        template: str) -> None:
    with pytest.raises(StateError) as caught:
        open_store(template.format(port=closed_port()))
    message = str(caught.value)
    assert "Hunter2-s3cret" not in message
    assert "127.0.0.1" in message and "Check that the server is running" in message
    assert caught.value.__cause__ is not None


# -- PostgreSQL only ----------------------------------------------------------------

def with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    user = parts.username or "postgres"
    host = parts.hostname or "127.0.0.1"
    netloc = f"{user}:{password}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


@pytest.mark.postgres
def test_postgres_store_url_and_errors_hide_the_password(postgres_url: str) -> None:
    url = with_password(postgres_url, "Hunter2-s3cret")
    with PostgresStore(url) as store:  # trust auth in tests: any password works
        assert "Hunter2-s3cret" not in store.url
        assert store.url.count("***") == 1
    missing = urlsplit(url)._replace(path=f"/no_such_db_{uuid.uuid4().hex[:8]}")
    with pytest.raises(StateError) as caught:
        PostgresStore(urlunsplit(missing))
    assert "Hunter2-s3cret" not in str(caught.value)
    assert "does not exist" in str(caught.value)


@pytest.mark.postgres
def test_postgres_lost_connection_is_a_state_error(postgres_url: str) -> None:
    ws = unique_workspace()
    store = PostgresStore(postgres_url)
    try:
        store.snapshot(ws)
        terminate(postgres_url, backend_of(store).db.info.backend_pid)
        with pytest.raises(StateError, match="cannot read workspace"):
            store.snapshot(ws)
    finally:
        store.close()
        drop_workspaces(postgres_url, [ws])


@pytest.mark.postgres
def test_postgres_lock_message_names_the_session(postgres_url: str) -> None:
    ws = unique_workspace()
    first, second = PostgresStore(postgres_url), PostgresStore(postgres_url)
    try:
        first.acquire(ws, ALICE)
        pid = backend_of(first).lock_backend_pid(ws)
        assert pid is not None and pid != backend_of(first).db.info.backend_pid  # its own
        with pytest.raises(StateLockedError, match=f"pg_terminate_backend\\({pid}\\)"):
            second.acquire(ws, BOB)
        first.release(ws)
        assert backend_of(first).lock_backend_pid(ws) is None
    finally:
        first.close()
        second.close()
        drop_workspaces(postgres_url, [ws])


# Each process waits for the same start time, then opens the store (creating
# the tables) and writes once.
CREATE_TABLES = """
import sys, time
from govsync.state import Entry
from govsync.state.postgres import PostgresStore
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # the point: all start at once
with PostgresStore(sys.argv[1]) as store:
    store.snapshot("concurrent")
    store.put("concurrent", Entry("Space/a", "Space", None, "applied"))
print("ok", flush=True)
"""


@pytest.mark.postgres
def test_postgres_creates_its_tables_concurrently(postgres_url: str,
                                                  pg_schema: tuple[str, str]) -> None:
    url, schema = pg_schema
    start = str(time.time() + 2.0)
    children = [subprocess.Popen([sys.executable, "-c", CREATE_TABLES, url, start],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True) for _ in range(6)]
    results = [child.communicate(timeout=60) for child in children]
    for child, (out, err) in zip(children, results, strict=True):
        assert child.returncode == 0 and out.strip() == "ok", err
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        tables = {r[0] for r in admin.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,))}
        assert tables == {"govsync_workspaces", "govsync_objects", "govsync_locks",
                          "govsync_history", "govsync_applied_plans", "govsync_plan_keys",
                          "govsync_agent", "govsync_lock_rows"}
        serial = admin.execute(f"SELECT serial FROM {schema}.govsync_workspaces").fetchall()
    assert serial == [(6,)]


@pytest.mark.postgres
def test_postgres_column_types(postgres_url: str) -> None:
    PostgresStore(postgres_url).close()  # tables exist
    with psycopg.connect(postgres_url) as conn:
        types: dict[str, str] = dict(conn.execute(
            "SELECT table_name || '.' || column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name LIKE 'govsync_%'").fetchall())
    assert types["govsync_objects.spec"] == "jsonb"
    assert types["govsync_objects.response"] == "jsonb"
    assert types["govsync_history.record"] == "jsonb"
    assert types["govsync_workspaces.fingerprint_key"] == "bytea"
    assert types["govsync_workspaces.serial"] == "bigint"
    assert {"govsync_history.id", "govsync_history.workspace", "govsync_history.at"} <= set(types)


def pg_sql(url: str, *statements: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement.encode())


@pytest.mark.postgres
def test_older_postgres_tables_are_migrated(postgres_url: str,
                                            pg_schema: tuple[str, str]) -> None:
    url, schema = pg_schema
    with open_store(url) as store:
        for name in "ab":
            store.put("prod", Entry(f"Space/{name}", "Space", name, APPLIED, {}))
    pg_sql(postgres_url, *(f"ALTER TABLE {schema}.govsync_workspaces DROP COLUMN {c}"
                           for c in ("lock_epoch", "entry_count", "endpoint")))
    with open_store(url) as store:
        snap = store.snapshot("prod")
        assert (len(snap.entries), snap.serial, snap.endpoint) == (2, 2, None)
        store.set_endpoint("prod", "https://x.example")
        assert store.snapshot("prod").endpoint == "https://x.example"


def test_postgresql_state_without_the_extra_is_one_line(tmp_path: Path) -> None:
    # Issue 11: a raw ModuleNotFoundError traceback before.
    blocker = tmp_path / "no_psycopg"
    blocker.mkdir()
    (blocker / "psycopg.py").write_text("raise ModuleNotFoundError('no psycopg', name='psycopg')\n")
    env = {**os.environ, "PYTHONPATH": str(blocker)}
    result = subprocess.run(
        [sys.executable, "-m", "govsync", "state", "list", "--state",
         "postgresql://u:secret@db.example/govsync"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "Error: postgresql://u:***@db.example/govsync needs PostgreSQL support, which is not "
        "installed: pip install 'govsync[postgres]'"]
