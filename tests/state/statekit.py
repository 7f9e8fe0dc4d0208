"""Helpers of the state store tests: a backend to open stores on, and cleanup
(``drop_workspaces``, testkit's, is re-exported for the tests).

On PostgreSQL, tests share one database (``GOVSYNC_TEST_POSTGRES``), so every
workspace a test uses has a unique name and its rows are dropped afterwards.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from govsync.state import StateStore, open_store
from testkit import drop_pg_workspaces

POSTGRES_ENV = "GOVSYNC_TEST_POSTGRES"
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
