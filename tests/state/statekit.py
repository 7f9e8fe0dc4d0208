"""Helpers of the state store tests: a backend to open stores on, and cleanup
(``drop_workspaces``, testkit's, is re-exported for the tests).

On PostgreSQL, tests share one database (``GOVSYNC_TEST_POSTGRES``), so every
workspace a test uses has a unique name and its rows are dropped afterwards.
"""

from __future__ import annotations

import sqlite3
import uuid
from dataclasses import dataclass, field

import psycopg

from govsync.state import StateStore, open_store
from testkit import drop_pg_workspaces

POSTGRES_ENV = "GOVSYNC_TEST_POSTGRES"
# Set (to 1) where PostgreSQL should be there: its tests fail rather than skip.
REQUIRE_ENV = "GOVSYNC_REQUIRE_POSTGRES"
drop_workspaces = drop_pg_workspaces


def unique_workspace() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


@dataclass
class Backend:
    """One state database: open as many stores on it as a test needs."""

    name: str
    url: str
    stores: list[StateStore] = field(default_factory=list)
    made: list[str] = field(default_factory=list)

    def open(self) -> StateStore:
        store = open_store(self.url)
        self.stores.append(store)
        return store

    def workspace(self) -> str:
        name = unique_workspace()
        self.made.append(name)
        return name

    def close(self) -> None:
        for store in self.stores:
            store.close()
        if self.name == "postgres" and self.made:
            drop_pg_workspaces(self.url, self.made)


def history_times(backend: Backend, workspace: str) -> list[str]:
    """The time column of the workspace's history rows, newest first, as UTC text
    (``2025-01-01T00:00:00.000000Z``): what no read of a store shows, so read by SQL."""
    if backend.name == "sqlite":
        db = sqlite3.connect(backend.url)
        try:
            rows = db.execute("SELECT at FROM history WHERE workspace = ? ORDER BY seq DESC",
                              (workspace,)).fetchall()
        finally:
            db.close()
    else:
        with psycopg.connect(backend.url, autocommit=True) as db:
            rows = db.execute(
                "SELECT to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
                " FROM govsync_history WHERE workspace = %s ORDER BY id DESC",
                (workspace,)).fetchall()
    return [str(row[0]) for row in rows]
