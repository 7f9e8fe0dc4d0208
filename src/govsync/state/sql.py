"""The SQL layer both backends share, over a few primitives each provides.

As Terraform's ``states/remote`` asks a backend for Get, Put and a locker and
keeps lineage, serial and locking rules above them, ``SqlStore`` holds
everything that is the same in SQLite and PostgreSQL: the tables (written
once, the dialects' differences as data in ``Dialect``), one transaction
style (``_write``: a context manager yielding a ``Tx``), lineage and serial,
fencing, the lock and leader records, plan claims, agent values and cycles,
history and governance.

A backend provides (see the methods marked abstract): its transactions, the
workspace row as a write finds it (``_head``: serial, lock epoch, whether its
lock is alive), whether a lock or leadership it holds is still alive, and
its own locks (SQLite: ``flock``; PostgreSQL: a row locked by a session).
"""

from __future__ import annotations

import functools
import json
import secrets
import uuid
from abc import abstractmethod
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from govsync.errors import LockLostError, StateDamagedError, StateError
from govsync.state.codec import Malformed, entries_from_json_rows, json_object
from govsync.state.model import (
    AGENT_CYCLE,
    AGENT_LEADER,
    Entry,
    LockHolder,
    Snapshot,
    checked_status,
    dumps,
    leader_epoch,
    leader_record,
    leadership_lost,
    lock_lost,
    merged_cycle,
    now,
)
from govsync.state.store import StateStore


@dataclass(frozen=True)
class Dialect:
    """What differs between the backends' SQL, as data.

    Statements are written once with ``?`` for parameters and these marks:
    ``{T}`` the table prefix, ``{SEQ}`` the history's ordering column, ``{J}``
    a JSON column read as text, ``{FOR_UPDATE}`` a row lock on a read in a
    write, and in the tables' DDL ``{INT}``, ``{BLOB}``, ``{JSON}``, ``{ID}``,
    ``{AT}``, ``{REF}``."""

    name: str
    prefix: str
    param: str
    words: tuple[tuple[str, str], ...] = field(default=())

    def sql(self, template: str) -> str:
        return _translate(self, template)


@functools.lru_cache(maxsize=512)
def _translate(dialect: Dialect, template: str) -> str:
    text = template.replace("{T}", dialect.prefix)
    for mark, word in dialect.words:
        text = text.replace("{" + mark + "}", word)
    return text.replace("?", dialect.param)


SQLITE = Dialect("sqlite", "", "?", (
    ("SEQ", "seq"), ("J", ""), ("FOR_UPDATE", ""), ("INT", "INTEGER"), ("BLOB", "BLOB"),
    ("JSON", "TEXT"), ("ID", "seq INTEGER PRIMARY KEY AUTOINCREMENT"),
    ("AT", "TEXT NOT NULL"), ("REF", "")))
POSTGRES = Dialect("postgres", "govsync_", "%s", (
    ("SEQ", "id"), ("J", "::text"), ("FOR_UPDATE", " FOR UPDATE"), ("INT", "BIGINT"),
    ("BLOB", "BYTEA"), ("JSON", "JSONB"), ("ID", "id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"),
    ("AT", "TIMESTAMPTZ NOT NULL DEFAULT now()"),
    ("REF", " REFERENCES govsync_workspaces (name) ON DELETE CASCADE")))

# -- the tables: one list, each table once --------------------------------------------

# The first release's tables: a database that has some of them but not all is damaged.
TABLES = ("workspaces", "objects", "locks", "history")


@dataclass(frozen=True)
class Table:
    name: str
    ddl: str
    only: str = ""  # the one dialect that has it ("": both)


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
    # The agent's values of each workspace (Storage.agent): pause, last cycle, leader...
    Table("agent", """CREATE TABLE IF NOT EXISTS {T}agent (
    workspace TEXT NOT NULL,
    name TEXT NOT NULL,
    value {JSON} NOT NULL,
    PRIMARY KEY (workspace, name)
)"""),
    # SQLite keeps the plan key in a file of its own, beside the database.
    Table("plan_keys", """CREATE TABLE IF NOT EXISTS {T}plan_keys (
    workspace TEXT PRIMARY KEY,
    plan_key {BLOB} NOT NULL
)""", only="postgres"),
    # What a lock session locks (FOR UPDATE): the read-only role has no grant on it.
    Table("lock_rows", "CREATE TABLE IF NOT EXISTS {T}lock_rows (name TEXT PRIMARY KEY)",
          only="postgres"),
    # The marks of govsync's own governance writes (tamper.py; PostgreSQL sets a setting).
    Table("governance_writes", "CREATE TABLE IF NOT EXISTS {T}governance_writes "
          "(workspace TEXT)", only="sqlite"),
)

# Columns of the workspaces added since the first release, with what fills them in an
# older database.
ADDED_COLUMNS = (
    ("lock_epoch", "{INT} NOT NULL DEFAULT 0", None),
    ("entry_count", "{INT} NOT NULL DEFAULT 0",
     "UPDATE {T}workspaces SET entry_count = (SELECT count(*) FROM {T}objects o"
     " WHERE o.workspace = {T}workspaces.name)"),
    ("endpoint", "TEXT", None),
    ("governance", "{JSON}", None),
)


def tables(dialect: Dialect) -> list[Table]:
    """The dialect's tables, in the order they are made."""
    return [t for t in SCHEMA if t.only in ("", dialect.name)]


def added_tables(dialect: Dialect) -> dict[str, str]:
    """The tables added since the first release, by their name in the database: DDL."""
    return {dialect.prefix + t.name: dialect.sql(t.ddl)
            for t in tables(dialect) if t.name not in TABLES}


def upgrades(dialect: Dialect, columns: set[str]) -> list[str]:
    """The statements that add the columns missing from ``columns`` (the workspaces'),
    and fill them."""
    out: list[str] = []
    for name, declaration, fill in ADDED_COLUMNS:
        if name not in columns:
            out.append(dialect.sql(f"ALTER TABLE {{T}}workspaces ADD COLUMN {name} "
                                   f"{declaration}"))
            if fill:
                out.append(dialect.sql(fill))
    return out


# -- transactions ------------------------------------------------------------------------

class Cursor(Protocol):
    """What both drivers' cursors offer (sqlite3's ``Connection.execute`` returns one)."""

    rowcount: int

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Any: ...


class Tx:
    """One transaction: statements in the shared SQL, run on the backend's cursor.

    ``serial`` is the workspace's serial once a write has bumped (or read) it.
    ``writes`` keeps every statement that changed something, when the backend asks
    (SQLite replays them in its backup)."""

    def __init__(self, cursor: Connection, dialect: Dialect, *, keep: bool = False) -> None:
        self.cursor = cursor
        self.dialect = dialect
        self.serial = 0
        self.writes: list[tuple[str, Sequence[Any]]] | None = [] if keep else None

    def run(self, template: str, params: Sequence[Any] = ()) -> Cursor:
        sql = self.dialect.sql(template)
        if self.writes is not None and not sql.startswith("SELECT"):
            self.writes.append((sql, params))
        result: Cursor = self.cursor.execute(sql, params)
        return result

    def one(self, template: str, params: Sequence[Any] = ()) -> Any:
        return self.run(template, params).fetchone()

    def all(self, template: str, params: Sequence[Any] = ()) -> list[Any]:
        return self.run(template, params).fetchall()


def loads(text: Any) -> Any:
    """A stored JSON text, or None when it is not JSON (a damaged record names nobody)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def read_holder(data: Any) -> LockHolder | None:
    try:
        return LockHolder.from_dict(loads(data))
    except (TypeError, ValueError, AttributeError):
        return None  # an unreadable record names nobody; the lock still holds


def values(workspace: str, e: Entry) -> tuple[Any, ...]:
    """An entry as a row of the objects table (JSON as text: PostgreSQL casts it)."""
    status = checked_status(e)
    return (workspace, e.address, e.kind, e.id, status.value, e.spec_text(),
            dumps(e.response) if e.response is not None else None, e.updated_at or now())


_UPSERT_AGENT = ("INSERT INTO {T}agent (workspace, name, value) VALUES (?, ?, ?)"
                 " ON CONFLICT (workspace, name) DO UPDATE SET value = excluded.value")


class SqlStore(StateStore):
    """Storage, fencing and the lock and leader records over a backend's primitives."""

    dialect: Dialect
    # The workspace locks and the agent's leaderships this store took: the backend's
    # records of them, each with the ``epoch`` it took.
    _locks: dict[str, Any]
    _leading: dict[str, Any]

    # -- the backend's primitives ---------------------------------------------------
    @abstractmethod
    def _transaction(self, action: str, *, write: bool,
                     pipelined: bool = False) -> AbstractContextManager[Tx]:
        """One transaction; its database errors as StateError naming ``action``."""

    def _reading(self, action: str) -> AbstractContextManager[Tx]:
        """A read of one statement (PostgreSQL: without BEGIN and COMMIT)."""
        return self._transaction(action, write=False)

    def _readable(self, table: str) -> bool:
        """Whether the table exists to be read (PostgreSQL: made by the first write)."""
        return True

    def _before_write(self) -> None:
        """What a write needs first (SQLite: the backup; PostgreSQL: the tables)."""

    @abstractmethod
    def _head(self, tx: Tx, workspace: str, bump: bool,
              lock: Any) -> tuple[int, int, bool] | None:
        """In a write, under the workspace's row lock: (serial, lock epoch, whether
        ``lock`` is alive), the serial bumped first if ``bump``; None: no row."""

    @abstractmethod
    def _alive(self, tx: Tx, held: Any) -> bool:
        """Whether a lock or leadership this store holds is still alive."""

    @abstractmethod
    def _ended(self, held: Any) -> str:
        """Why a lock or leadership that is no longer alive ended."""

    def _after_write(self, tx: Tx, workspace: str) -> None:
        """Inside the write's transaction, after its statements (SQLite: the backup)."""

    def _mark_governance(self, tx: Tx, workspace: str, done: bool) -> None:
        """Mark a governance write as govsync's own (tamper.py), before and after it."""

    @abstractmethod
    def _damaged(self, problem: str) -> StateDamagedError: ...

    # -- writes: one fenced transaction each ------------------------------------------
    @contextmanager
    def _write(self, workspace: str, *, bump: bool = True,
               pipelined: bool = False) -> Iterator[Tx]:
        """One fenced write transaction; bumps the serial (unless not ``bump``) into
        ``tx.serial``."""
        self._before_write()
        with self._transaction(f"state write failed for workspace {workspace!r}",
                               write=True, pipelined=pipelined) as tx:
            lock = self._locks.get(workspace)
            if lock is None:
                _ensure(tx, workspace)
            head = self._head(tx, workspace, bump, lock)
            if head is None:  # the row is made before the lock is taken: someone removed it
                raise LockLostError(lock_lost(
                    workspace, "its workspace record was removed from the state"))
            tx.serial = head[0]
            if lock is not None:
                self._check_lock(tx, workspace, lock, head[1], head[2])
            self._check_leadership(tx, workspace)
            yield tx
            self._after_write(tx, workspace)

    def _check_lock(self, tx: Tx, workspace: str, lock: Any, epoch: int, alive: bool) -> None:
        """Refuse if this store lost the lock it held (the epoch and liveness now)."""
        if epoch != lock.epoch:
            current = self._read_holder(tx, workspace)
            raise LockLostError(lock_lost(
                workspace, f"taken by {current}" if current else "another process took it"))
        if not alive:
            raise LockLostError(lock_lost(workspace, self._ended(lock)))

    def _check_leadership(self, tx: Tx, workspace: str) -> None:
        lead = self._leading.get(workspace)
        why = self._leadership_lost(tx, workspace, lead) if lead is not None else ""
        if why:
            raise LockLostError(leadership_lost(workspace, why))

    def _leadership_lost(self, tx: Tx, workspace: str, lead: Any) -> str:
        """Why this store no longer leads the workspace ('' while it does)."""
        row = tx.one("SELECT value{J} FROM {T}agent WHERE workspace = ? AND name = ?",
                     (workspace, AGENT_LEADER))
        if leader_epoch(loads(row[0]) if row else None) != lead.epoch:
            return "another agent took it over"
        return "" if self._alive(tx, lead) else self._ended(lead)

    def _create(self, workspace: str) -> None:
        with self._write(workspace, bump=False):
            pass

    def put_many(self, workspace: str, entries: Sequence[Entry]) -> int:
        rows = [values(workspace, entry) for entry in entries]
        with self._write(workspace) as tx:
            new = 0
            for row in rows:
                new += tx.one("SELECT 1 FROM {T}objects WHERE workspace = ? AND address = ?",
                              (workspace, row[1])) is None
                tx.run("INSERT INTO {T}objects (workspace, address, kind, object_id, status,"
                       " spec, response, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                       " ON CONFLICT (workspace, address) DO UPDATE SET kind = excluded.kind,"
                       " object_id = excluded.object_id, status = excluded.status,"
                       " spec = excluded.spec, response = excluded.response,"
                       " updated_at = excluded.updated_at", row)
            if new:
                tx.run("UPDATE {T}workspaces SET entry_count = entry_count + ? WHERE name = ?",
                       (new, workspace))
        return tx.serial

    def remove(self, workspace: str, address: str) -> int:
        with self._write(workspace) as tx:
            gone = tx.run("DELETE FROM {T}objects WHERE workspace = ? AND address = ?",
                          (workspace, address)).rowcount
            tx.run("UPDATE {T}workspaces SET entry_count = entry_count - ? WHERE name = ?",
                   (gone, workspace))
        return tx.serial

    def rename(self, workspace: str, old: str, new: str) -> int:
        with self._write(workspace) as tx:
            if tx.one("SELECT 1 FROM {T}objects WHERE workspace = ? AND address = ?",
                      (workspace, new)) is not None:
                raise StateError(f"cannot move {old} to {new}: {new} is already in state")
            moved = tx.run("UPDATE {T}objects SET address = ?, updated_at = ?"
                           " WHERE workspace = ? AND address = ?",
                           (new, now(), workspace, old)).rowcount
            if moved != 1:
                raise StateError(f"cannot move {old} to {new}: {old} is not in state")
        return tx.serial

    def replace_all(self, workspace: str, entries: list[Entry], lineage: str | None,
                    key: bytes | None) -> int:
        rows = [values(workspace, e) for e in entries]
        with self._write(workspace) as tx:
            tx.run("DELETE FROM {T}objects WHERE workspace = ?", (workspace,))
            if lineage:
                tx.run("UPDATE {T}workspaces SET lineage = ? WHERE name = ?",
                       (lineage, workspace))
            if key:
                tx.run("UPDATE {T}workspaces SET fingerprint_key = ? WHERE name = ?",
                       (key, workspace))
            for row in rows:
                tx.run("INSERT INTO {T}objects (workspace, address, kind, object_id, status,"
                       " spec, response, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
            tx.run("UPDATE {T}workspaces SET entry_count = ? WHERE name = ?",
                   (len(rows), workspace))
        return tx.serial

    def add_history(self, workspace: str, record: dict[str, Any]) -> None:
        with self._write(workspace, bump=False) as tx:
            tx.run("INSERT INTO {T}history (workspace, at, record) VALUES (?, ?, ?)",
                   (workspace, now(), dumps(record)))

    def set_endpoint(self, workspace: str, endpoint: str) -> None:
        with self._write(workspace, bump=False) as tx:
            tx.run("UPDATE {T}workspaces SET endpoint = ? WHERE name = ?", (endpoint, workspace))

    def set_governance(self, workspace: str, record: dict[str, Any] | None) -> None:
        with self._write(workspace, bump=False) as tx:
            self._mark_governance(tx, workspace, False)  # govsync's own: no audit record
            tx.run("UPDATE {T}workspaces SET governance = ? WHERE name = ?",
                   (dumps(record) if record is not None else None, workspace))
            self._mark_governance(tx, workspace, True)

    def set_agent(self, workspace: str, name: str, value: Any) -> None:
        with self._write(workspace, bump=False) as tx:
            if value is None:
                tx.run("DELETE FROM {T}agent WHERE workspace = ? AND name = ?", (workspace, name))
            else:
                tx.run(_UPSERT_AGENT, (workspace, name, dumps(value)))

    def add_cycle(self, workspace: str, record: dict[str, Any]) -> None:
        # The history's time is the record's own (a merged record's newest cycle's).
        at = str(record.get("at") or now())
        with self._write(workspace, bump=False) as tx:
            # Under the workspace row lock (_write): no other writer comes between.
            row = tx.one("SELECT {SEQ}, record{J} FROM {T}history WHERE workspace = ?"
                         " ORDER BY {SEQ} DESC LIMIT 1", (workspace,))
            merged = merged_cycle(loads(row[1]) if row else None, record)
            if merged is not None:
                tx.run("UPDATE {T}history SET at = ?, record = ? WHERE {SEQ} = ?",
                       (at, dumps(merged), row[0]))
            else:
                tx.run("INSERT INTO {T}history (workspace, at, record) VALUES (?, ?, ?)",
                       (workspace, at, dumps(record)))
            tx.run(_UPSERT_AGENT, (workspace, AGENT_CYCLE, dumps(merged or record)))

    def unclaim_plan(self, workspace: str, plan_id: str) -> None:
        with self._write(workspace, bump=False) as tx:
            tx.run("DELETE FROM {T}applied_plans WHERE workspace = ? AND plan_id = ?",
                   (workspace, plan_id))

    def claim_plan(self, workspace: str, plan_id: str) -> str | None:
        with self._write(workspace, bump=False) as tx:
            if tx.run("INSERT INTO {T}applied_plans (workspace, plan_id, applied_at)"
                      " VALUES (?, ?, ?) ON CONFLICT (workspace, plan_id) DO NOTHING",
                      (workspace, plan_id, now())).rowcount == 1:
                return None
            row = tx.one("SELECT applied_at FROM {T}applied_plans WHERE workspace = ? AND"
                         " plan_id = ?", (workspace, plan_id))
        return str(row[0]) if row else "?"

    # -- reads -----------------------------------------------------------------------
    def _snapshot(self, workspace: str, head: Any, rows: Any) -> Snapshot | None:
        """A workspace's row and its entries' rows, every value checked."""
        if head is None:
            return None
        lineage, serial, key, count, endpoint, governance = head
        try:
            if not isinstance(lineage, str) or not lineage:
                raise Malformed(f"its lineage is {lineage!r}")
            if not isinstance(serial, int):
                raise Malformed(f"its serial is {serial!r}, not a number")
            if not isinstance(key, bytes | memoryview) or not key:
                raise Malformed("its fingerprint key is not bytes")
            if endpoint is not None and not isinstance(endpoint, str):
                raise Malformed(f"its endpoint is {endpoint!r}")
            recorded = json_object(governance, "governance")
            # Parsed row by row as the cursor yields them: never every row's text at once.
            entries = entries_from_json_rows(rows)
            if count != len(entries):
                table = f"{self.dialect.prefix}objects" if self.dialect.prefix else \
                    "the objects table"
                raise Malformed(f"it records {count} entries but {table} holds {len(entries)}")
        except Malformed as exc:
            raise self._damaged(f"workspace {workspace!r}: {exc}") from None
        return Snapshot(workspace, lineage, serial, entries, bytes(key), endpoint, recorded)

    def history(self, workspace: str, limit: int = 50) -> list[dict[str, Any]]:
        if not self._readable("history"):
            return []
        with self._reading(f"cannot read the history of {workspace!r}") as tx:
            rows = tx.all("SELECT record{J} FROM {T}history WHERE workspace = ?"
                          " ORDER BY {SEQ} DESC LIMIT ?", (workspace, limit))
        try:
            return [json.loads(r[0]) for r in rows]
        except (TypeError, ValueError):
            raise self._damaged(f"a history record of workspace {workspace!r} is not "
                                "JSON") from None

    def governed(self) -> dict[str, tuple[str | None, dict[str, Any]]]:
        if not self._readable("governance"):
            return {}
        with self._reading("cannot read the workspaces' governance") as tx:
            rows = tx.all("SELECT name, endpoint, governance{J} FROM {T}workspaces"
                          " WHERE governance IS NOT NULL")
        try:
            return {str(name): (endpoint, json_object(record, "governance") or {})
                    for name, endpoint, record in rows}
        except Malformed as exc:
            raise self._damaged(f"a workspace's governance: {exc}") from None

    def recorded_elsewhere(self, workspace: str, ids: Collection[str]
                           ) -> dict[str, tuple[str, str]]:
        wanted = sorted({i for i in ids if i})
        out: dict[str, tuple[str, str]] = {}
        with self._reading("cannot read which workspaces record these objects") as tx:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start:start + 500]
                marks = ", ".join("?" for _ in chunk)
                for name, address, object_id in tx.all(
                        "SELECT workspace, address, object_id FROM {T}objects WHERE "
                        f"workspace <> ? AND object_id IN ({marks})", (workspace, *chunk)):
                    out.setdefault(str(object_id), (str(name), str(address)))
        return out

    def agent(self, workspace: str) -> dict[str, Any]:
        if not self._readable("agent"):
            return {}
        with self._reading(f"cannot read the agent's records of {workspace!r}") as tx:
            rows = tx.all("SELECT name, value{J} FROM {T}agent WHERE workspace = ?",
                          (workspace,))
        try:
            return {str(name): json.loads(value) for name, value in rows}
        except (TypeError, ValueError):
            raise self._damaged(f"a record of the agent of workspace {workspace!r} is not "
                                "JSON") from None

    def plan_applied(self, workspace: str, plan_id: str) -> str | None:
        if not self._readable("applied_plans"):
            return None
        with self._reading("cannot read the applied plans") as tx:
            row = tx.one("SELECT applied_at FROM {T}applied_plans WHERE workspace = ? AND"
                         " plan_id = ?", (workspace, plan_id))
        return str(row[0]) if row else None

    # -- the lock and leader records ----------------------------------------------------
    def holder(self, workspace: str) -> LockHolder | None:
        if not self._readable("locks"):
            return None
        with self._reading(f"cannot read the lock of {workspace!r}") as tx:
            return self._read_holder(tx, workspace)

    @staticmethod
    def _read_holder(tx: Tx, workspace: str) -> LockHolder | None:
        row = tx.one("SELECT holder{J} FROM {T}locks WHERE workspace = ?", (workspace,))
        return read_holder(row[0]) if row else None

    @staticmethod
    def _record_lock(tx: Tx, workspace: str, holder: LockHolder) -> None:
        """Who holds the workspace lock, with the lock epoch bumped (the row made first)."""
        _ensure(tx, workspace)
        tx.run("UPDATE {T}workspaces SET lock_epoch = lock_epoch + 1 WHERE name = ?",
               (workspace,))
        tx.run("INSERT INTO {T}locks (workspace, holder) VALUES (?, ?) ON CONFLICT"
               " (workspace) DO UPDATE SET holder = excluded.holder",
               (workspace, dumps(holder.as_dict())))

    # Only this store's own record: a lock lost meanwhile is someone else's now.
    _CLEAR_LOCK = ("DELETE FROM {T}locks WHERE workspace = ? AND"
                   " (SELECT lock_epoch FROM {T}workspaces WHERE name = ?) = ?")

    def _record_leader(self, workspace: str, holder: LockHolder) -> int:
        """Record the store's new leadership of the workspace (its lock taken): its epoch,
        one more than the last leader's."""
        with self._write(workspace, bump=False) as tx:
            row = tx.one("SELECT value{J} FROM {T}agent WHERE workspace = ? AND name = ?"
                         "{FOR_UPDATE}", (workspace, AGENT_LEADER))
            previous = loads(row[0]) if row else None
            epoch = leader_epoch(previous) + 1
            tx.run(_UPSERT_AGENT, (workspace, AGENT_LEADER,
                                   dumps(leader_record(holder, epoch, previous))))
        return epoch

    def leads(self, workspace: str) -> bool:
        lead = self._leading.get(workspace)
        if lead is None:
            return False
        with self._transaction(f"cannot read the agent's records of {workspace!r}",
                               write=False) as tx:
            return not self._leadership_lost(tx, workspace, lead)


def _ensure(tx: Tx, workspace: str) -> None:
    """Make the workspace's row (lineage and fingerprint key) unless it exists."""
    tx.run("INSERT INTO {T}workspaces (name, lineage, serial, fingerprint_key, created_at)"
           " VALUES (?, ?, 0, ?, ?) ON CONFLICT (name) DO NOTHING",
           (workspace, str(uuid.uuid4()), secrets.token_bytes(32), now()))
