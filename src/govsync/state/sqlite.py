"""The embedded state store: one SQLite file (``.govsync/state.db``).

Writes are single transactions in WAL mode, so a process killed at any
moment leaves the file at the last committed write.

A new file is made only where none exists, complete (tables, WAL mode)
under a temporary name and then linked into place, so no process ever sees
a half-made state.  An existing file is checked when opened and on every
read: empty, truncated, not SQLite, missing tables, an entry count that does
not match the rows, or malformed rows are a StateDamagedError, never a new
empty state.

``<db>.backup`` is a second copy kept in step with the first: before its
first write a store copies the file there (SQLite's online backup), and then
makes every write in both, the copy's inside the main file's write
transaction (so no other writer, and no other store's copy, comes between).
It is never behind a write that was acted on: restoring it, as the message
of a damaged state advises, can make an entry look uncertain, never lose
one, so it never leads to an object created twice.  An upgrade that adds
columns or tables first keeps the file as it was in ``<db>.before-upgrade``.

The key that authenticates saved plans is not in the database: it is
``<db>.plan-key``, a file only its owner may read (mode 0600), so a copy of
the state (or of its backup), or ``state export``, gives nobody the means to
forge a plan.  The state files themselves are made 0600 too: they hold the
key of secrets' fingerprints.

The workspace lock is an OS file lock (``flock``) on ``<db>.<workspace>.lock``:
the kernel releases it when the holding process dies, so a crashed apply
never blocks the next one.  The lock is only ever taken or given back inside
a write transaction of the database, which also records the holder (in the
``locks`` table) and bumps the workspace's lock epoch.  So whoever finds the
flock taken, looking inside such a transaction too, always finds the
holder's record.  A record whose flock is free is a leftover of a killed
process and is simply replaced.

Fencing: a write of a store holding the lock checks, in its transaction,
that the epoch is still its own and that its flocked file is still the file
at the lock path (a removed lock file is a lost lock: anyone may now create
a new one and lock that).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import sqlite3
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from govsync.errors import (
    LockLostError,
    PlanKeyUnavailable,
    StateDamagedError,
    StateError,
    StateLockedError,
)
from govsync.state.codec import (
    NO_ANSWER_COLUMNS,
    Malformed,
    entries_from_json_rows,
    json_object,
)
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
from govsync.state.tamper import SQLITE_GOVERNANCE_AUDIT

log = logging.getLogger(__name__)

TABLES = ("workspaces", "objects", "locks", "history")
# Tables (and triggers) added since the first release: made in an older file when
# it is opened.
ADDED_TABLES = {
    "applied_plans": """CREATE TABLE IF NOT EXISTS applied_plans (
    workspace TEXT NOT NULL,
    plan_id TEXT NOT NULL,
    applied_at TEXT NOT NULL,
    PRIMARY KEY (workspace, plan_id)
)""",
    # The agent's values of each workspace (Storage.agent): pause, last cycle, leader...
    "agent": """CREATE TABLE IF NOT EXISTS agent (
    workspace TEXT NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (workspace, name)
)""",
    "governance_writes": "CREATE TABLE IF NOT EXISTS governance_writes (workspace TEXT)",
    "governance_audit": SQLITE_GOVERNANCE_AUDIT,
}

SCHEMA = """
CREATE TABLE IF NOT EXISTS workspaces (
    name TEXT PRIMARY KEY,
    lineage TEXT NOT NULL,
    serial INTEGER NOT NULL DEFAULT 0,
    fingerprint_key BLOB NOT NULL,
    created_at TEXT NOT NULL,
    lock_epoch INTEGER NOT NULL DEFAULT 0,
    entry_count INTEGER NOT NULL DEFAULT 0,
    endpoint TEXT,
    governance TEXT
);
CREATE TABLE IF NOT EXISTS objects (
    workspace TEXT NOT NULL,
    address TEXT NOT NULL,
    kind TEXT NOT NULL,
    object_id TEXT,
    status TEXT NOT NULL,
    spec TEXT,
    response TEXT,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (workspace, address)
);
CREATE TABLE IF NOT EXISTS locks (
    workspace TEXT PRIMARY KEY,
    holder TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace TEXT NOT NULL,
    at TEXT NOT NULL,
    record TEXT NOT NULL
);
""" + ";\n".join(ADDED_TABLES.values()) + ";\n"

# Columns added since the first release, with what fills them in an older file.
ADDED_COLUMNS = (
    ("lock_epoch", "INTEGER NOT NULL DEFAULT 0", None),
    ("entry_count", "INTEGER NOT NULL DEFAULT 0",
     "UPDATE workspaces SET entry_count ="
     " (SELECT count(*) FROM objects WHERE objects.workspace = workspaces.name)"),
    ("endpoint", "TEXT", None),
    ("governance", "TEXT", None),
)

# Only the owner may read a state file: it holds the key of secrets' fingerprints.
FILE_MODE = 0o600
PLAN_KEY_BYTES = 32

POLL_SECONDS = 0.2


def _still_there(fd: int, path: str) -> bool:
    """Whether ``path`` is still the file open as ``fd``: not removed, nor replaced by
    another (a lock held on a file no longer there locks nothing)."""
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_ino, mine.st_dev) == (there.st_ino, there.st_dev)


@dataclass
class _Lock:
    fd: int
    epoch: int


class SqliteStore(StateStore):
    def __init__(self, path: str) -> None:
        self.url = path
        self.path = path
        self._locks: dict[str, _Lock] = {}
        self._leading: dict[str, _Lock] = {}  # the agent's leaderships (Leadership)
        self._mutex = threading.RLock()  # one transaction at a time on self.db
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        except OSError as exc:
            raise StateError(f"cannot open state database {path}: {exc}") from exc
        self._created = self._create_if_missing()
        # The backup kept in step with every write (see the module's docstring).
        self._mirror: sqlite3.Connection | None = None
        self._mirror_file: tuple[int, int] | None = None  # its (st_dev, st_ino)
        self._mirroring = False  # started by this store's first write
        if not self._created:
            self._check_file()
        try:
            self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StateError(f"cannot open state database {path}: {exc}") from exc
        try:
            with self._errors("cannot open state database"):
                self.db.execute("PRAGMA journal_mode=WAL")
                # NORMAL in WAL mode: a killed process never loses a commit; only
                # an OS crash or power loss may drop the last few.
                self.db.execute("PRAGMA synchronous=NORMAL")
                self.db.execute("PRAGMA busy_timeout=10000")
                if not self._created:
                    self._check_size()
                self._check_tables()
        except BaseException:
            self.db.close()
            raise

    # -- opening -----------------------------------------------------------------
    def _create_if_missing(self) -> bool:
        """Make a new state file if none exists; whether this store made it."""
        if os.path.lexists(self.path):
            return False
        tmp = f"{self.path}.new-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            db = sqlite3.connect(tmp, isolation_level=None)
            try:
                os.chmod(tmp, FILE_MODE)  # its -wal and -shm files take the same mode
                db.execute("PRAGMA journal_mode=WAL")
                db.executescript(SCHEMA)
            finally:
                db.close()
            try:
                os.link(tmp, self.path)  # fails if another process made it first
            except FileExistsError:
                return False
            return True
        except (OSError, sqlite3.Error) as exc:
            raise StateError(f"cannot create state database {self.path}: {exc}") from exc
        finally:
            for leftover in (tmp, tmp + "-wal", tmp + "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)

    def _check_file(self) -> None:
        """Refuse what is not a regular, non-empty file before SQLite opens it.

        The file is only stat-ed here, never opened: closing a descriptor of
        a SQLite file drops every POSIX lock this process holds on it,
        including those of other connections (other stores, in-process)."""
        try:
            info = os.stat(self.path)
        except OSError as exc:
            raise StateError(f"cannot open state database {self.path}: {exc}") from exc
        if not stat.S_ISREG(info.st_mode):
            raise self._damaged("it is not a regular file")
        if info.st_size == 0:
            raise self._damaged("it is empty (0 bytes)")

    def _check_size(self) -> None:
        """Refuse a file shorter than its header says (a truncated copy)."""
        try:
            size = os.stat(self.path).st_size
            wal = os.stat(self.path + "-wal").st_size if os.path.exists(self.path + "-wal") else 0
        except OSError:
            return  # the checks of each read still apply
        page_size = self.db.execute("PRAGMA page_size").fetchone()[0]
        pages = self.db.execute("PRAGMA page_count").fetchone()[0]
        if wal or size >= page_size * pages:
            return  # with a live WAL the main file may be shorter: not a sign
        try:
            result = self.db.execute("PRAGMA quick_check(1)").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            result = str(exc)
        if result != "ok":
            raise self._damaged(
                f"it is truncated ({size} of {page_size * pages} bytes; SQLite: {result})")

    def _check_tables(self) -> None:
        found = {r[0] for r in self.db.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')")}
        missing = [t for t in TABLES if t not in found]
        if missing:
            raise self._damaged(f"it has no {', '.join(missing)} table"
                                f"{'s' if len(missing) > 1 else ''}")
        columns = {r[1] for r in self.db.execute("PRAGMA table_info(workspaces)")}
        if all(name in columns for name, _, _ in ADDED_COLUMNS) and set(ADDED_TABLES) <= found:
            return
        self._copy_to(self.path + ".before-upgrade")
        with self._mutex:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                columns = {r[1] for r in self.db.execute("PRAGMA table_info(workspaces)")}
                for name, declaration, fill in ADDED_COLUMNS:
                    if name not in columns:
                        self.db.execute(f"ALTER TABLE workspaces ADD COLUMN {name} {declaration}")
                        if fill:
                            self.db.execute(fill)
                for statement in ADDED_TABLES.values():
                    self.db.execute(statement)
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def _damaged(self, problem: str) -> StateDamagedError:
        backup = self.path + ".backup"
        if os.path.exists(backup):
            restore = (f"restore it from {backup} (a copy kept in step with every write: "
                       "restoring it never creates an object twice)")
        else:
            restore = "restore it from a backup"
        return StateDamagedError(
            f"the state file {self.path} is damaged: {problem}; nothing was changed. "
            f"{restore[0].upper()}{restore[1:]}, or move it away and load an export with "
            "`govsync state import-all`")

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """sqlite3 errors as StateError; a damaged file as StateDamagedError."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            if str(exc).startswith(("no such table", "no such column")):
                raise self._damaged(str(exc)) from exc
            raise StateError(f"{action} ({self.path}): {exc}") from exc
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError) as exc:
            raise StateError(f"{action} ({self.path}): {exc}") from exc
        except sqlite3.DatabaseError as exc:  # malformed, not a database, ...
            problem = str(exc)
            if problem == "file is not a database":
                problem = "it is not a SQLite database (or its header is damaged)"
            elif problem == "database disk image is malformed":
                problem = f"it is truncated or corrupt (SQLite: {problem})"
            raise self._damaged(problem) from exc
        except sqlite3.Error as exc:
            raise StateError(f"{action} ({self.path}): {exc}") from exc

    def _copy_to(self, target_path: str) -> None:
        """A consistent copy of the state file at ``target_path`` (mode 0600, atomic),
        made while no other process can write (a write lock held on the side)."""
        tmp = f"{target_path}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        _remove_leftovers(target_path)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            os.close(fd)
            guard = sqlite3.connect(self.path, isolation_level=None, timeout=10)
            try:
                guard.execute("BEGIN IMMEDIATE")  # every other writer waits for the copy
                target = sqlite3.connect(tmp)
                try:
                    with self._mutex:
                        self.db.backup(target)
                finally:
                    target.close()
                os.replace(tmp, target_path)
            finally:
                guard.close()
        except (OSError, sqlite3.Error) as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise StateError(f"cannot copy the state to {target_path}: {exc}; nothing was "
                             "written") from exc

    def _start_mirror(self) -> None:
        """Before this store's first write: the backup made anew, then kept in step."""
        if self._mirroring:
            return
        self._mirroring = True
        self._copy_to(self.path + ".backup")

    def _mirror_connection(self) -> sqlite3.Connection | None:
        """The backup's connection, opened again when another store made the file anew."""
        backup = self.path + ".backup"
        try:
            info = os.stat(backup)
        except FileNotFoundError:
            self._close_mirror()
            return None  # removed (by a failed mirror write, or by hand): nothing to keep
        here = (info.st_dev, info.st_ino)
        if self._mirror is None or self._mirror_file != here:
            self._close_mirror()
            self._mirror = sqlite3.connect(backup, isolation_level=None,
                                           check_same_thread=False, timeout=10)
            self._mirror.execute("PRAGMA journal_mode=WAL")
            self._mirror.execute("PRAGMA synchronous=NORMAL")
            self._mirror_file = here
        return self._mirror

    def _close_mirror(self) -> None:
        if self._mirror is not None:
            with contextlib.suppress(sqlite3.Error):
                self._mirror.close()
        self._mirror, self._mirror_file = None, None

    def _mirror_write(self, db: sqlite3.Connection, workspace: str,
                      body: Callable[[sqlite3.Connection], object]) -> None:
        """Inside the main write transaction: the same write in the backup, with the
        workspace's row as the main file now has it.  A backup that cannot follow is
        removed (a stale copy would be worse than none: it could lose entries)."""
        backup = self.path + ".backup"
        try:
            mirror = self._mirror_connection()
            if mirror is None:
                return
            row = db.execute("SELECT * FROM workspaces WHERE name = ?", (workspace,)).fetchone()
            mirror.execute("BEGIN IMMEDIATE")
            try:
                body(mirror)
                if row is not None:
                    mirror.execute(f"INSERT OR REPLACE INTO workspaces VALUES "
                                   f"({', '.join('?' * len(row))})", row)
                mirror.execute("COMMIT")
            except BaseException:
                mirror.execute("ROLLBACK")
                raise
        except (OSError, sqlite3.Error, StateError) as exc:
            self._close_mirror()
            with contextlib.suppress(OSError):
                os.unlink(backup)
            log.warning("the backup %s could not follow a write and was removed (%s); "
                        "the next write makes it again", backup, exc)
            self._mirroring = False

    # -- transactions ---------------------------------------------------------------
    @contextmanager
    def _transaction(self, action: str, *, write: bool) -> Iterator[sqlite3.Connection]:
        with self._mutex, self._errors(action):
            self.db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield self.db
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def _write(self, workspace: str, body: Callable[[sqlite3.Connection], object], *,
               bump: bool = True) -> int:
        """One fenced write transaction, made in the backup too; bumps the serial
        (unless not ``bump``) and returns it."""
        self._start_mirror()
        with self._transaction(f"state write failed for workspace {workspace!r}",
                               write=True) as db:
            if not self._fence(db, workspace):
                _ensure(db, workspace)
            self._fence_leadership(db, workspace)
            body(db)
            if bump:
                db.execute("UPDATE workspaces SET serial = serial + 1 WHERE name = ?",
                           (workspace,))
            row = db.execute("SELECT serial FROM workspaces WHERE name = ?",
                             (workspace,)).fetchone()
            self._mirror_write(db, workspace, body)
            return int(row[0])

    def _fence(self, db: sqlite3.Connection, workspace: str) -> bool:
        """Inside a write transaction: refuse if this store lost a lock it held.
        True when it holds the lock (and so the workspace's row exists)."""
        lock = self._locks.get(workspace)
        if lock is None:
            return False
        row = db.execute("SELECT lock_epoch FROM workspaces WHERE name = ?",
                         (workspace,)).fetchone()
        if row is None or row[0] != lock.epoch:
            current = self._read_holder(db, workspace)
            raise LockLostError(lock_lost(
                workspace, f"taken by {current}" if current else "another process took it"))
        if not _still_there(lock.fd, self._lock_path(workspace)):
            raise LockLostError(lock_lost(
                workspace, f"the lock file {self._lock_path(workspace)} was removed"))
        return True

    def fence(self, workspace: str) -> None:
        if workspace in self._locks or workspace in self._leading:
            with self._transaction(f"cannot read the lock of {workspace!r}", write=False) as db:
                self._fence(db, workspace)
                self._fence_leadership(db, workspace)

    def _fence_leadership(self, db: sqlite3.Connection, workspace: str) -> None:
        """Inside a write transaction: refuse if this store lost a leadership it held."""
        lead = self._leading.get(workspace)
        if lead is None:
            return
        why = self._leadership_lost(db, workspace, lead)
        if why:
            raise LockLostError(leadership_lost(workspace, why))

    def _leadership_lost(self, db: sqlite3.Connection, workspace: str, lead: _Lock) -> str:
        """Why this store no longer leads the workspace ('' while it does)."""
        row = db.execute("SELECT value FROM agent WHERE workspace = ? AND name = ?",
                         (workspace, AGENT_LEADER)).fetchone()
        recorded = _json(row[0]) if row else None
        if leader_epoch(recorded) != lead.epoch:
            return "another agent took it over"
        if not _still_there(lead.fd, self._lead_path(workspace)):
            return f"its lock file {self._lead_path(workspace)} was removed"
        return ""

    # -- read --------------------------------------------------------------------
    def _create(self, workspace: str) -> None:
        self._write(workspace, lambda db: None, bump=False)

    def _read(self, workspace: str, responses: bool) -> Snapshot | None:
        with self._transaction(f"cannot read state {self.path}", write=False) as db:
            head = db.execute(
                "SELECT lineage, serial, fingerprint_key, entry_count, endpoint, governance"
                " FROM workspaces WHERE name = ?", (workspace,)).fetchone()
            if head is None:
                return None
            lineage, serial, key, count, endpoint, governance = head
            try:
                if not isinstance(lineage, str) or not lineage:
                    raise Malformed(f"its lineage is {lineage!r}")
                if not isinstance(serial, int):
                    raise Malformed(f"its serial is {serial!r}, not a number")
                if not isinstance(key, bytes) or not key:
                    raise Malformed("its fingerprint key is not bytes")
                if endpoint is not None and not isinstance(endpoint, str):
                    raise Malformed(f"its endpoint is {endpoint!r}")
                recorded = json_object(governance, "governance")
                # Parsed row by row as the cursor yields them, inside the read
                # transaction: never every row's text at once.
                entries = entries_from_json_rows(db.execute(
                    "SELECT address, kind, object_id, status, spec,"
                    f" {'response, updated_at' if responses else NO_ANSWER_COLUMNS}"
                    " FROM objects WHERE workspace = ? ORDER BY address",
                    (workspace,),
                ))
                if count != len(entries):
                    raise Malformed(f"it records {count} entries but the objects table holds "
                                    f"{len(entries)}")
            except Malformed as exc:
                raise self._damaged(f"workspace {workspace!r}: {exc}") from None
        return Snapshot(workspace, lineage, serial, entries, key, endpoint, recorded)

    def history(self, workspace: str, limit: int = 50) -> list[dict[str, Any]]:
        with self._transaction(f"cannot read the history of {workspace!r}", write=False) as db:
            rows = db.execute(
                "SELECT record FROM history WHERE workspace = ? ORDER BY seq DESC LIMIT ?",
                (workspace, limit),
            ).fetchall()
        try:
            return [json.loads(r[0]) for r in rows]
        except (TypeError, ValueError):
            raise self._damaged(f"a history record of workspace {workspace!r} is not "
                                "JSON") from None

    # -- write -------------------------------------------------------------------
    def put_many(self, workspace: str, entries: Sequence[Entry]) -> int:
        rows = [_values(workspace, entry) for entry in entries]

        def body(db: sqlite3.Connection) -> None:
            new = 0
            for values in rows:
                new += db.execute("SELECT 1 FROM objects WHERE workspace = ? AND address = ?",
                                  (workspace, values[1])).fetchone() is None
                db.execute(
                    "INSERT OR REPLACE INTO objects"
                    " (workspace, address, kind, object_id, status, spec, response, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", values)
            if new:
                db.execute("UPDATE workspaces SET entry_count = entry_count + ?"
                           " WHERE name = ?", (new, workspace))

        return self._write(workspace, body)

    def remove(self, workspace: str, address: str) -> int:
        def body(db: sqlite3.Connection) -> None:
            gone = db.execute("DELETE FROM objects WHERE workspace = ? AND address = ?",
                              (workspace, address)).rowcount
            db.execute("UPDATE workspaces SET entry_count = entry_count - ? WHERE name = ?",
                       (gone, workspace))

        return self._write(workspace, body)

    def rename(self, workspace: str, old: str, new: str) -> int:
        def body(db: sqlite3.Connection) -> None:
            if db.execute("SELECT 1 FROM objects WHERE workspace = ? AND address = ?",
                          (workspace, new)).fetchone() is not None:
                raise StateError(f"cannot move {old} to {new}: {new} is already in state")
            moved = db.execute("UPDATE objects SET address = ?, updated_at = ?"
                               " WHERE workspace = ? AND address = ?",
                               (new, now(), workspace, old)).rowcount
            if moved != 1:
                raise StateError(f"cannot move {old} to {new}: {old} is not in state")

        return self._write(workspace, body)

    def replace_all(self, workspace: str, entries: list[Entry], lineage: str | None,
                    key: bytes | None) -> int:
        rows = [_values(workspace, e) for e in entries]

        def body(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM objects WHERE workspace = ?", (workspace,))
            if lineage:
                db.execute("UPDATE workspaces SET lineage = ? WHERE name = ?",
                           (lineage, workspace))
            if key:
                db.execute("UPDATE workspaces SET fingerprint_key = ? WHERE name = ?",
                           (key, workspace))
            db.executemany(
                "INSERT INTO objects (workspace, address, kind, object_id, status, spec,"
                " response, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            db.execute("UPDATE workspaces SET entry_count = ? WHERE name = ?",
                       (len(rows), workspace))

        return self._write(workspace, body)

    def add_history(self, workspace: str, record: dict[str, Any]) -> None:
        self._write(workspace, lambda db: db.execute(
            "INSERT INTO history (workspace, at, record) VALUES (?, ?, ?)",
            (workspace, now(), dumps(record))), bump=False)

    def set_endpoint(self, workspace: str, endpoint: str) -> None:
        self._write(workspace, lambda db: db.execute(
            "UPDATE workspaces SET endpoint = ? WHERE name = ?", (endpoint, workspace)),
            bump=False)

    def set_governance(self, workspace: str, record: dict[str, Any] | None) -> None:
        text = dumps(record) if record is not None else None

        def body(db: sqlite3.Connection) -> None:  # govsync's own: its trigger records nothing
            db.execute("INSERT INTO governance_writes VALUES (?)", (workspace,))
            db.execute("UPDATE workspaces SET governance = ? WHERE name = ?", (text, workspace))
            db.execute("DELETE FROM governance_writes WHERE workspace = ?", (workspace,))
        self._write(workspace, body, bump=False)

    def governed(self) -> dict[str, tuple[str | None, dict[str, Any]]]:
        with self._transaction(f"cannot read state {self.path}", write=False) as db:
            rows = db.execute("SELECT name, endpoint, governance FROM workspaces"
                              " WHERE governance IS NOT NULL").fetchall()
        try:
            return {str(name): (endpoint, json_object(record, "governance") or {})
                    for name, endpoint, record in rows}
        except Malformed as exc:
            raise self._damaged(f"a workspace's governance: {exc}") from None

    def agent(self, workspace: str) -> dict[str, Any]:
        with self._transaction(f"cannot read the agent's records of {workspace!r}",
                               write=False) as db:
            rows = db.execute("SELECT name, value FROM agent WHERE workspace = ?",
                              (workspace,)).fetchall()
        try:
            return {str(name): json.loads(value) for name, value in rows}
        except (TypeError, ValueError):
            raise self._damaged(f"a record of the agent of workspace {workspace!r} is not "
                                "JSON") from None

    def set_agent(self, workspace: str, name: str, value: Any) -> None:
        text = dumps(value) if value is not None else None

        def body(db: sqlite3.Connection) -> None:
            if text is None:
                db.execute("DELETE FROM agent WHERE workspace = ? AND name = ?",
                           (workspace, name))
            else:
                db.execute("INSERT OR REPLACE INTO agent (workspace, name, value)"
                           " VALUES (?, ?, ?)", (workspace, name, text))

        self._write(workspace, body, bump=False)

    def add_cycle(self, workspace: str, record: dict[str, Any]) -> None:
        at = str(record.get("at") or now())

        def body(db: sqlite3.Connection) -> None:
            row = db.execute("SELECT seq, record FROM history WHERE workspace = ?"
                             " ORDER BY seq DESC LIMIT 1", (workspace,)).fetchone()
            merged = merged_cycle(_json(row[1]) if row else None, record)
            if merged is not None:
                db.execute("UPDATE history SET at = ?, record = ? WHERE seq = ?",
                           (at, dumps(merged), row[0]))
            else:
                db.execute("INSERT INTO history (workspace, at, record) VALUES (?, ?, ?)",
                           (workspace, at, dumps(record)))
            db.execute("INSERT OR REPLACE INTO agent (workspace, name, value) VALUES (?, ?, ?)",
                       (workspace, AGENT_CYCLE, dumps(merged or record)))

        self._write(workspace, body, bump=False)

    def plan_applied(self, workspace: str, plan_id: str) -> str | None:
        with self._transaction("cannot read the applied plans", write=False) as db:
            row = db.execute("SELECT applied_at FROM applied_plans WHERE workspace = ? AND"
                             " plan_id = ?", (workspace, plan_id)).fetchone()
        return str(row[0]) if row else None

    def unclaim_plan(self, workspace: str, plan_id: str) -> None:
        self._write(workspace, lambda db: db.execute(
            "DELETE FROM applied_plans WHERE workspace = ? AND plan_id = ?",
            (workspace, plan_id)), bump=False)

    def claim_plan(self, workspace: str, plan_id: str) -> str | None:
        before: list[str] = []

        def body(db: sqlite3.Connection) -> None:
            row = db.execute("SELECT applied_at FROM applied_plans WHERE workspace = ? AND"
                             " plan_id = ?", (workspace, plan_id)).fetchone()
            if row is not None:
                before.append(str(row[0]))
            else:
                db.execute("INSERT INTO applied_plans (workspace, plan_id, applied_at)"
                           " VALUES (?, ?, ?)", (workspace, plan_id, now()))

        self._write(workspace, body, bump=False)
        return before[0] if before else None

    def plan_key(self, workspace: str, *, create: bool = True) -> bytes:
        """The state file's plan key (one for all its workspaces; the MAC covers the
        workspace), in ``<db>.plan-key``, made on first use."""
        return read_or_make_key(self.path + ".plan-key", create=create)

    # -- lock --------------------------------------------------------------------
    def _lock_path(self, workspace: str) -> str:
        return f"{self.path}.{workspace}.lock"

    def acquire(self, workspace: str, holder: LockHolder, timeout: float = 0.0) -> int:
        with self._mutex:
            if workspace in self._locks:  # held, or lost: a lost lock is never re-taken
                return self._locks[workspace].epoch
        self._start_mirror()
        deadline = time.monotonic() + timeout
        while True:
            taken, current = self._try_lock(workspace, holder)
            if taken is not None:
                self._locks[workspace] = taken
                return taken.epoch
            if time.monotonic() >= deadline:
                raise StateLockedError(
                    f"workspace {workspace!r} is locked by "
                    f"{current or 'another process'}; wait for it to finish, pass "
                    "--lock-timeout to wait, or run `govsync state unlock` if it is gone",
                    current.as_dict() if current else None,
                )
            time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))

    def _try_lock(self, workspace: str,
                  holder: LockHolder) -> tuple[_Lock | None, LockHolder | None]:
        """One attempt: (the lock, None) or (None, who holds it)."""
        path = self._lock_path(workspace)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StateError(f"cannot open the lock file {path}: {exc}") from exc
        try:
            # The flock is tried inside a write transaction: whoever holds it
            # wrote its record in the transaction that took it.
            with self._transaction(f"cannot lock workspace {workspace!r}", write=True) as db:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    fd = -1
                    return None, self._read_holder(db, workspace)
                try:
                    if not _still_there(fd, path):
                        raise FileNotFoundError(path)
                    _ensure(db, workspace)
                    db.execute("UPDATE workspaces SET lock_epoch = lock_epoch + 1"
                               " WHERE name = ?", (workspace,))
                    epoch = int(db.execute("SELECT lock_epoch FROM workspaces WHERE name = ?",
                                           (workspace,)).fetchone()[0])
                    db.execute("INSERT OR REPLACE INTO locks (workspace, holder) VALUES (?, ?)",
                               (workspace, dumps(holder.as_dict())))
                except FileNotFoundError:
                    # The file was removed between open and flock: try the new one.
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    os.close(fd)
                    fd = -1
                    return None, None
                except BaseException:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    raise
            return _Lock(fd, epoch), None
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise

    def release(self, workspace: str) -> None:
        with self._mutex:
            lock = self._locks.pop(workspace, None)
            if lock is None:
                return
            try:
                with self._transaction(f"cannot unlock workspace {workspace!r}",
                                       write=True) as db:
                    # Only our own record: a lock lost meanwhile is someone else's now.
                    db.execute(
                        "DELETE FROM locks WHERE workspace = ? AND"
                        " (SELECT lock_epoch FROM workspaces WHERE name = ?) = ?",
                        (workspace, workspace, lock.epoch))
                    # Given back inside the transaction: nobody sees a free
                    # record with the flock still taken.
                    fcntl.flock(lock.fd, fcntl.LOCK_UN)
            finally:
                os.close(lock.fd)

    def running(self, workspace: str) -> LockHolder | None:
        if workspace in self._locks:
            return None  # ours
        try:
            fd = os.open(self._lock_path(workspace), os.O_RDONLY)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateError(f"cannot read the lock of {workspace!r}: {exc.strerror}") from exc
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return self.holder(workspace) or LockHolder.unknown()
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def holder(self, workspace: str) -> LockHolder | None:
        with self._transaction(f"cannot read the lock of {workspace!r}", write=False) as db:
            return self._read_holder(db, workspace)

    @staticmethod
    def _read_holder(db: sqlite3.Connection, workspace: str) -> LockHolder | None:
        row = db.execute("SELECT holder FROM locks WHERE workspace = ?", (workspace,)).fetchone()
        if row is None:
            return None
        try:
            return LockHolder.from_dict(json.loads(row[0]))
        except (TypeError, ValueError, AttributeError):
            return None  # an unreadable record names nobody; the lock still holds

    # -- the agent's leadership ----------------------------------------------------
    def _lead_path(self, workspace: str) -> str:
        return f"{self.path}.{workspace}.agent.lock"

    def lead(self, workspace: str, holder: LockHolder) -> int | None:
        with self._mutex:
            if workspace in self._leading:
                return self._leading[workspace].epoch if self.leads(workspace) else None
        path = self._lead_path(workspace)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StateError(f"cannot open the lock file {path}: {exc}") from exc
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
            if not _still_there(fd, path):
                os.close(fd)  # removed meanwhile: the next try locks the new file
                return None
            epochs: list[int] = []

            def body(db: sqlite3.Connection) -> None:
                row = db.execute("SELECT value FROM agent WHERE workspace = ? AND name = ?",
                                 (workspace, AGENT_LEADER)).fetchone()
                previous = _json(row[0]) if row else None
                epochs.append(leader_epoch(previous) + 1)
                db.execute("INSERT OR REPLACE INTO agent (workspace, name, value)"
                           " VALUES (?, ?, ?)", (workspace, AGENT_LEADER,
                                                 dumps(leader_record(holder, epochs[0],
                                                                     previous))))

            self._write(workspace, body, bump=False)
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing it gives the flock back
            raise
        with self._mutex:
            self._leading[workspace] = _Lock(fd, epochs[0])
        return epochs[0]

    def leads(self, workspace: str) -> bool:
        lead = self._leading.get(workspace)
        if lead is None:
            return False
        with self._transaction(f"cannot read the agent's records of {workspace!r}",
                               write=False) as db:
            return not self._leadership_lost(db, workspace, lead)

    def resign(self, workspace: str) -> None:
        with self._mutex:
            lead = self._leading.pop(workspace, None)
        if lead is not None:
            with contextlib.suppress(OSError):
                os.close(lead.fd)  # the flock goes with the descriptor

    def close(self) -> None:
        for workspace in list(self._leading):
            self.resign(workspace)
        try:
            for workspace in list(self._locks):
                # On failure the fd is closed anyway: the kernel releases the flock.
                with contextlib.suppress(StateError):
                    self.release(workspace)
        finally:
            self._close_mirror()
            self.db.close()


def _remove_leftovers(target_path: str) -> None:
    """Copies (``<target>.tmp-PID-*``) left by a process killed while it made one:
    each holds the fingerprint key, so none is left lying about."""
    folder = os.path.dirname(os.path.abspath(target_path))
    prefix = os.path.basename(target_path) + ".tmp-"
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            if not name.startswith(prefix):
                continue
            pid = name[len(prefix):].split("-", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, name))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_or_make_key(path: str, *, create: bool = True) -> bytes:
    """A secret key kept in its own file (hex, mode 0600), made on first use.

    A key file that others may read is refused (as ssh refuses such a private
    key); one that cannot be read is PlanKeyUnavailable."""
    for _ in range(3):
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            if not create:
                raise PlanKeyUnavailable(f"there is no plan key {path} yet") from None
            _make_key(path)
            continue
        except PermissionError as exc:
            raise PlanKeyUnavailable(f"cannot read the plan key {path}: {exc.strerror}") from exc
        except OSError as exc:
            raise StateError(f"cannot read the plan key {path}: {exc.strerror}") from exc
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise StateError(f"the plan key {path} is not a regular file: remove it "
                                 "(saved plans made before must then be made again)")
            if info.st_mode & 0o077:
                raise StateError(
                    f"the plan key {path} may be read by others (mode "
                    f"{stat.S_IMODE(info.st_mode):04o}): whoever reads it can forge saved "
                    f"plans; run `chmod 600 {path}`, or remove it to make a new key")
            text = fh.read(4 * PLAN_KEY_BYTES + 2)
        try:
            key = bytes.fromhex(text.decode("ascii").strip())
        except (UnicodeDecodeError, ValueError):
            key = b""
        if len(key) != PLAN_KEY_BYTES:
            raise StateError(f"the plan key {path} is malformed (not {PLAN_KEY_BYTES} bytes "
                             "in hex): remove it to make a new one (saved plans made before "
                             "must then be made again)")
        return key
    raise StateError(f"cannot make the plan key {path}")


def _make_key(path: str) -> None:
    """Write a new random key to ``path`` unless one appeared meanwhile (atomic)."""
    tmp = f"{path}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secrets.token_hex(PLAN_KEY_BYTES) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)  # the first process to make one wins
    except PermissionError as exc:
        raise PlanKeyUnavailable(f"cannot make the plan key {path}: {exc.strerror}") from exc
    except OSError as exc:
        raise StateError(f"cannot make the plan key {path}: {exc.strerror}") from exc
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _json(text: Any) -> Any:
    """A stored JSON text, or None when it is not JSON (a damaged record names nobody)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def _ensure(db: sqlite3.Connection, workspace: str) -> None:
    db.execute(
        "INSERT OR IGNORE INTO workspaces (name, lineage, serial, fingerprint_key, created_at)"
        " VALUES (?, ?, 0, ?, ?)",
        (workspace, str(uuid.uuid4()), secrets.token_bytes(32), now()),
    )


def _values(workspace: str, e: Entry) -> tuple[Any, ...]:
    status = checked_status(e)
    return (workspace, e.address, e.kind, e.id, status.value,
            e.spec_text(),
            dumps(e.response) if e.response is not None else None,
            e.updated_at or now())
