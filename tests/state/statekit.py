"""Helpers of the state store tests: a harness for each backend (contract.py's
``Harness``: how the contract suite opens stores and breaks things the
backend's own way), and cleanup (``drop_workspaces``, testkit's, is
re-exported for the tests).

On PostgreSQL, tests share one database (``GOVSYNC_TEST_POSTGRES``), so every
workspace a test uses has a unique name and its rows are dropped afterwards;
a test that damages the tables, or reads as the read-only role, gets a schema
(and a role) of its own (``fresh``).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from contract import BOB, Harness

from govsync.state import StateStore, open_store
from govsync.state.postgres import POSTGRES, READABLE_TABLES, PostgresBackend
from govsync.state.sqlite import SQLITE
from testkit import ReaderRole, drop_pg_workspaces, reader_role, until

POSTGRES_ENV = "GOVSYNC_TEST_POSTGRES"
# Set (to 1) where PostgreSQL should be there: its tests fail rather than skip.
REQUIRE_ENV = "GOVSYNC_REQUIRE_POSTGRES"
drop_workspaces = drop_pg_workspaces


def unique_workspace() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


class SqliteHarness(Harness):
    """A SQLite state file: a lost lock is its lock file removed."""

    name = "sqlite"
    lost_lock = "lock file"
    objects_table = "the objects table"
    racers = 20

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self._folders: list[tempfile.TemporaryDirectory[str]] = []

    def connect(self) -> StateStore:
        return open_store(self.url)

    def close(self) -> None:
        super().close()
        for folder in self._folders:
            folder.cleanup()

    def execute(self, template: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        db = sqlite3.connect(self.url)
        try:
            with db:
                return db.execute(SQLITE.sql(template), params).fetchall()
        finally:
            db.close()

    def _lock_file(self, workspace: str, leader: bool = False) -> Path:
        return Path(f"{self.url}.{workspace}.{'agent.' if leader else ''}lock")

    def lose(self, store: StateStore, workspace: str, *, leader: bool = False) -> None:
        self._lock_file(workspace, leader).unlink()

    def steal(self, first: StateStore, second: StateStore, workspace: str) -> None:
        """The lock file moved aside, the second store locks a new file, and the first
        store's file is moved back: its flocked file is again the file at the lock path."""
        path = self._lock_file(workspace)
        aside = path.with_name(path.name + ".aside")
        path.rename(aside)
        second.acquire(workspace, BOB)
        aside.rename(path)

    @contextlib.contextmanager
    def fresh(self) -> Iterator[SqliteHarness]:
        with tempfile.TemporaryDirectory() as folder:
            own = SqliteHarness(os.path.join(folder, "state.db"))
            try:
                yield own
            finally:
                own.close()

    def reader(self) -> StateStore:
        """A copy of the state file (what anyone who may read it can make), elsewhere."""
        self._folders.append(folder := tempfile.TemporaryDirectory())
        copy = os.path.join(folder.name, "copy.db")
        with contextlib.closing(sqlite3.connect(self.url)) as db, \
                contextlib.closing(sqlite3.connect(copy)) as target:
            db.backup(target)
        store = open_store(copy)
        self.stores.append(store)
        return store

    def readable(self) -> bytes:
        return b"".join(Path(f"{self.url}{suffix}").read_bytes()
                        for suffix in ("", "-wal", ".backup")
                        if Path(f"{self.url}{suffix}").exists())

    def history_times(self, workspace: str) -> list[str]:
        rows = self.execute("SELECT at FROM history WHERE workspace = ? ORDER BY seq DESC",
                            (workspace,))
        return [str(row[0]) for row in rows]


class PostgresHarness(Harness):
    """A PostgreSQL database shared by the tests (or a schema of a test's own): a lost
    lock is its session terminated."""

    name = "postgres"
    lost_lock = "PostgreSQL session holding it"
    objects_table = "govsync_objects"

    def __init__(self, url: str, role: ReaderRole | None = None) -> None:
        super().__init__()
        self.url = url
        self.role = role
        self.made: list[str] = []

    def connect(self) -> StateStore:
        return open_store(self.url)

    def workspace(self) -> str:
        name = super().workspace()
        self.made.append(name)
        return name

    def close(self) -> None:
        super().close()
        if self.made and self.role is None:
            drop_pg_workspaces(self.url, self.made)

    def execute(self, template: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            cur = conn.execute(POSTGRES.sql(template).encode(), params)
            return cur.fetchall() if cur.description else []

    def session_pid(self, store: StateStore, workspace: str, *, leader: bool = False) -> int:
        backend = store.backend
        assert isinstance(backend, PostgresBackend)
        pid = backend.lock_backend_pid(workspace, leader=leader)
        assert pid is not None
        return pid

    def lose(self, store: StateStore, workspace: str, *, leader: bool = False) -> None:
        terminate(self.url, self.session_pid(store, workspace, leader=leader))

    def steal(self, first: StateStore, second: StateStore, workspace: str) -> None:
        self.lose(first, workspace)
        second.acquire(workspace, BOB, timeout=10)

    @contextlib.contextmanager
    def fresh(self) -> Iterator[PostgresHarness]:
        with reader_role(self.url, "contract") as made:
            own = PostgresHarness(made.writer, made)
            try:
                yield own
            finally:
                own.close()

    def reader(self) -> StateStore:
        """A store as the read-only role, granted what `govsync state readonly-role`
        prints."""
        assert self.role is not None, "a reader needs a harness of its own (fresh)"
        env = {k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")}
        printed = subprocess.run([sys.executable, "-m", "govsync", "state", "readonly-role",
                                  self.role.role, "--state", self.role.writer], env=env,
                                 capture_output=True, text=True, check=True)
        self.role.grant(printed.stdout)
        store = open_store(self.role.reader)
        self.stores.append(store)
        return store

    def readable(self) -> bytes:
        assert self.role is not None
        found: list[bytes] = []
        with psycopg.connect(self.role.reader, autocommit=True) as conn:
            for table in READABLE_TABLES:
                found += [repr(row).encode() for row in
                          conn.execute(f'SELECT * FROM "{table}"')]  # noqa: S608
        return b"\n".join(found)

    def history_times(self, workspace: str) -> list[str]:
        rows = self.execute(
            "SELECT to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
            " FROM {T}history WHERE workspace = ? ORDER BY id DESC", (workspace,))
        return [str(row[0]) for row in rows]


def terminate(url: str, pid: int) -> None:
    """End a PostgreSQL session, and wait until it has ended (termination is
    asynchronous)."""
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        until(lambda: admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                                    (pid,)).fetchone() == (0,), f"session {pid} ended", 5,
              interval=0.05)

