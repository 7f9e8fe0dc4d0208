"""The tables of the state, written once for every backend (the dialects' words as
data, ``Dialect``), and how a database made by an older govsync is brought up
to date.  A backend adds tables of its own (PostgreSQL its plan keys and lock
rows, SQLite the marks of its governance writes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from govsync.state.backend import Dialect

# The first release's tables: a database that has some of them but not all is damaged.
TABLES = ("workspaces", "objects", "locks", "history")


@dataclass(frozen=True)
class Table:
    name: str
    ddl: str


SCHEMA = (
    Table("workspaces", """CREATE TABLE IF NOT EXISTS {T}workspaces (
    name TEXT PRIMARY KEY,
    lineage TEXT NOT NULL,
    serial {INT} NOT NULL DEFAULT 0,
    fingerprint_key {BLOB} NOT NULL,
    created_at TEXT NOT NULL,
    lock_epoch {INT} NOT NULL DEFAULT 0,
    entry_count {INT} NOT NULL DEFAULT 0,
    endpoint TEXT,
    governance {JSON}
)"""),
    Table("objects", """CREATE TABLE IF NOT EXISTS {T}objects (
    workspace TEXT NOT NULL{REF},
    address TEXT NOT NULL,
    kind TEXT NOT NULL,
    object_id TEXT,
    status TEXT NOT NULL,
    spec {JSON},
    response {JSON},
    updated_at TEXT NOT NULL,
    PRIMARY KEY (workspace, address)
)"""),
    Table("locks", """CREATE TABLE IF NOT EXISTS {T}locks (
    workspace TEXT PRIMARY KEY,
    holder {JSON} NOT NULL
)"""),
    Table("history", """CREATE TABLE IF NOT EXISTS {T}history (
    {ID},
    workspace TEXT NOT NULL,
    at {AT},
    record {JSON} NOT NULL
)"""),
    # Added since the first release: made in an older database when it is opened (SQLite)
    # or by its first write (PostgreSQL).
    Table("applied_plans", """CREATE TABLE IF NOT EXISTS {T}applied_plans (
    workspace TEXT NOT NULL,
    plan_id TEXT NOT NULL,
    applied_at TEXT NOT NULL,
    PRIMARY KEY (workspace, plan_id)
)"""),
    # The agent's values of each workspace (StateStore.agent): pause, last cycle, leader...
    Table("agent", """CREATE TABLE IF NOT EXISTS {T}agent (
    workspace TEXT NOT NULL,
    name TEXT NOT NULL,
    value {JSON} NOT NULL,
    PRIMARY KEY (workspace, name)
)"""),
)


@dataclass(frozen=True)
class Column:
    """A column of the workspaces added since the first release."""

    name: str
    declaration: str
    fill: str = ""
    """What fills it in an older database, an expression over the workspace's row
    ("": its default); a read of a database not brought up to date yet reads it
    so (NULL where there is nothing to fill)."""

    @property
    def read_as(self) -> str:
        return self.fill or "NULL"


ADDED_COLUMNS = (
    Column("lock_epoch", "{INT} NOT NULL DEFAULT 0"),
    Column("entry_count", "{INT} NOT NULL DEFAULT 0",
           "(SELECT count(*) FROM {T}objects o WHERE o.workspace = {T}workspaces.name)"),
    Column("endpoint", "TEXT"),
    Column("governance", "{JSON}"),
)


def tables(own: Sequence[Table] = ()) -> list[Table]:
    """Every table of a backend whose own tables are ``own``, in the order they are made."""
    return [*SCHEMA, *own]


def added_tables(dialect: Dialect, own: Sequence[Table] = ()) -> dict[str, str]:
    """The tables added since the first release, by their name in the database: DDL."""
    return {dialect.prefix + t.name: dialect.sql(t.ddl)
            for t in tables(own) if t.name not in TABLES}


def upgrades(dialect: Dialect, columns: set[str]) -> list[str]:
    """The statements that add the columns missing from ``columns`` (the workspaces'),
    and fill them."""
    out: list[str] = []
    for column in ADDED_COLUMNS:
        if column.name not in columns:
            out.append(dialect.sql(f"ALTER TABLE {{T}}workspaces ADD COLUMN {column.name} "
                                   f"{column.declaration}"))
            if column.fill:
                out.append(dialect.sql(f"UPDATE {{T}}workspaces SET {column.name} = "
                                       f"{column.fill}"))
    return out
