"""Helpers of the state store tests: a backend to open stores on, and cleanup.

On PostgreSQL, tests share one database (``GOVSYNC_TEST_POSTGRES``), so every
workspace a test uses has a unique name and its rows are dropped afterwards.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from govsync.state.base import StateStore, open_store

POSTGRES_ENV = "GOVSYNC_TEST_POSTGRES"


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
            drop_workspaces(self.url, self.made)


def drop_workspaces(url: str, names: list[str]) -> None:
    """Delete every row of these workspaces from a PostgreSQL state database."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('govsync_workspaces')").fetchone() == (None,):
            return
        with conn.transaction():
            for table, column in (("govsync_history", "workspace"), ("govsync_locks", "workspace"),
                                  ("govsync_objects", "workspace"), ("govsync_workspaces", "name")):
                conn.execute(f"DELETE FROM {table} WHERE {column} = ANY(%s)", (names,))
