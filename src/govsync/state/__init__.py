"""The state: what govsync has applied, per workspace and address.

The face of the package: what the rest of govsync uses.  One concern per
module inside:

=============  ===============================================================
``records``    entries, their statuses, snapshots of a workspace, lock holders
``store``      ``StateStore``: every operation of the state, written once over
               a backend (snapshots, writes, records, the lock, leadership,
               fencing)
``backend``    ``Backend``: what a backend provides (transactions, a lock
               primitive, a key vault), and the SQL dialect it speaks
``schema``     the tables, written once, and their upgrades
``codec``      stored rows to entries, every value checked
``writer``     ``GroupWriter``: a workspace's writes committed in groups
``export``     the document of ``state export`` and ``state import-all``
``tamper``     the triggers that record a change of the governance record
               made outside govsync
``keyfile``    a plan key kept in a file of its own (SQLite's key vault)
``sqlite``     the embedded backend (one file): its file checks, backup, flocks
``postgres``   the shared backend (imported only for a ``postgresql://`` URL):
               its connection, schema and lock sessions
=============  ===============================================================

A new backend implements ``Backend`` and passes tests/state/contract.py, the
suite both backends run.
"""

from __future__ import annotations

import os

from govsync import redact
from govsync.errors import StateError
from govsync.files import SCHEME, sqlite_path
from govsync.state.backend import Backend
from govsync.state.records import (
    APPLIED,
    PENDING,
    UNCERTAIN,
    Entry,
    EntryStatus,
    LockHolder,
    Snapshot,
    empty_snapshot,
    now,
)
from govsync.state.store import StateStore

__all__ = [
    "APPLIED",
    "PENDING",
    "UNCERTAIN",
    "Backend",
    "Entry",
    "EntryStatus",
    "LockHolder",
    "Snapshot",
    "StateStore",
    "empty_snapshot",
    "exists",
    "now",
    "open_store",
    "sqlite_path",
]

def open_store(url: str) -> StateStore:
    """A store for ``url``: a SQLite path (default, or ``sqlite:///path``) or
    ``postgresql://...``.  Any other ``scheme://`` is a StateError."""
    scheme = SCHEME.match(url)
    name = scheme.group(1).lower() if scheme else ""
    if name in ("postgresql", "postgres"):
        try:
            # psycopg: imported only for a state that needs it (and its extra).
            from govsync.state.postgres import PostgresStore
        except ModuleNotFoundError as exc:
            if exc.name not in ("psycopg", "psycopg_binary", "psycopg_c"):
                raise
            raise StateError(
                f"{redact.url(url)} needs PostgreSQL support, which is not installed: "
                "pip install 'govsync[postgres]'") from None
        return PostgresStore(url)
    if name not in ("", "sqlite"):
        raise StateError(
            f"unsupported state URL {redact.url(url)}: the scheme {name!r} is not a state "
            "backend; use a SQLite file path (e.g. .govsync/state.db, or sqlite:///path) "
            "or postgresql://user@host/database")
    path = sqlite_path(url)
    assert path is not None
    # sqlite3 and logging (8 ms): where a state is opened, not where none exists yet.
    from govsync.state.sqlite import SqliteStore

    return SqliteStore(path)


def exists(url: str) -> bool:
    """Whether there is a state at ``url`` to read (a server backend always has one)."""
    path = sqlite_path(url)
    return path is None or os.path.lexists(path)
