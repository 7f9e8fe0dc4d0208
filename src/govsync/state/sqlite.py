"""The embedded state store: one SQLite file (``.govsync/state.db``).

Writes are single transactions in WAL mode, so a process killed at any
moment leaves the file at the last committed write.  The workspace lock is
an OS file lock (``flock``) on ``<db>.<workspace>.lock``: the kernel releases
it when the holding process dies, so a crashed apply never blocks the next
one.  The holder's details are kept in the ``locks`` table for messages;
a row whose flock is free is a leftover and is simply replaced.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import sqlite3
import time
import uuid
from typing import Any

from govsync.errors import StateError, StateLockedError
from govsync.state.base import Entry, LockHolder, Snapshot, StateStore, dumps, now

SCHEMA = """
CREATE TABLE IF NOT EXISTS workspaces (
    name TEXT PRIMARY KEY,
    lineage TEXT NOT NULL,
    serial INTEGER NOT NULL DEFAULT 0,
    fingerprint_key BLOB NOT NULL,
    created_at TEXT NOT NULL
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
"""


class SqliteStore(StateStore):
    def __init__(self, path: str) -> None:
        self.url = path
        self.path = path
        self._locks: dict[str, int] = {}
        directory = os.path.dirname(os.path.abspath(path))
        try:
            os.makedirs(directory, exist_ok=True)
            self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a killed process never loses a commit; only
            # an OS crash or power loss may drop the last few.
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA busy_timeout=10000")
            self.db.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise StateError(f"cannot open state database {path}: {exc}") from exc

    # -- helpers ---------------------------------------------------------------
    def _tx(self, sql_calls: list[tuple[str, tuple[Any, ...]]], workspace: str) -> int:
        """Run statements in one transaction and bump the workspace serial."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self._ensure(workspace)
                for sql, args in sql_calls:
                    self.db.execute(sql, args)
                self.db.execute(
                    "UPDATE workspaces SET serial = serial + 1 WHERE name = ?", (workspace,)
                )
                serial = self.db.execute(
                    "SELECT serial FROM workspaces WHERE name = ?", (workspace,)
                ).fetchone()[0]
                self.db.execute("COMMIT")
                return int(serial)
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StateError(f"state write failed ({self.path}): {exc}") from exc

    def _ensure(self, workspace: str) -> None:
        self.db.execute(
            "INSERT OR IGNORE INTO workspaces (name, lineage, serial, fingerprint_key, created_at)"
            " VALUES (?, ?, 0, ?, ?)",
            (workspace, str(uuid.uuid4()), secrets.token_bytes(32), now()),
        )

    # -- read --------------------------------------------------------------------
    def snapshot(self, workspace: str, *, responses: bool = True) -> Snapshot:
        try:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self._ensure(workspace)
                lineage, serial, key = self.db.execute(
                    "SELECT lineage, serial, fingerprint_key FROM workspaces WHERE name = ?",
                    (workspace,),
                ).fetchone()
                rows = self.db.execute(
                    "SELECT address, kind, object_id, status, spec,"
                    f" {'response' if responses else 'NULL'}, updated_at"
                    " FROM objects WHERE workspace = ? ORDER BY address",
                    (workspace,),
                ).fetchall()
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StateError(f"cannot read state {self.path}: {exc}") from exc
        loads = json.loads
        entries = {
            r[0]: Entry(r[0], r[1], r[2], r[3], loads(r[4]) if r[4] else None,
                        loads(r[5]) if r[5] else None, r[6])
            for r in rows
        }
        return Snapshot(workspace, lineage, int(serial), entries, bytes(key))

    def workspaces(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT name FROM workspaces ORDER BY name")]

    def history(self, workspace: str, limit: int = 50) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT record FROM history WHERE workspace = ? ORDER BY seq DESC LIMIT ?",
            (workspace, limit),
        ).fetchall()
        return [json.loads(r[0]) for r in rows]

    # -- write -------------------------------------------------------------------
    def put(self, workspace: str, entry: Entry) -> int:
        return self._tx([(
            "INSERT OR REPLACE INTO objects"
            " (workspace, address, kind, object_id, status, spec, response, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (workspace, entry.address, entry.kind, entry.id, entry.status,
             dumps(entry.spec) if entry.spec is not None else None,
             dumps(entry.response) if entry.response is not None else None,
             entry.updated_at or now()),
        )], workspace)

    def remove(self, workspace: str, address: str) -> int:
        return self._tx(
            [("DELETE FROM objects WHERE workspace = ? AND address = ?", (workspace, address))],
            workspace,
        )

    def replace_all(self, workspace: str, entries: list[Entry], lineage: str | None,
                    key: bytes | None) -> int:
        calls: list[tuple[str, tuple[Any, ...]]] = [
            ("DELETE FROM objects WHERE workspace = ?", (workspace,)),
        ]
        if lineage:
            calls.append(("UPDATE workspaces SET lineage = ? WHERE name = ?", (lineage, workspace)))
        if key:
            calls.append(("UPDATE workspaces SET fingerprint_key = ? WHERE name = ?", (key, workspace)))
        for e in entries:
            calls.append((
                "INSERT INTO objects (workspace, address, kind, object_id, status, spec, response,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (workspace, e.address, e.kind, e.id, e.status,
                 dumps(e.spec) if e.spec is not None else None,
                 dumps(e.response) if e.response is not None else None, e.updated_at or now()),
            ))
        return self._tx(calls, workspace)

    def add_history(self, workspace: str, record: dict[str, Any]) -> None:
        try:
            self.db.execute(
                "INSERT INTO history (workspace, at, record) VALUES (?, ?, ?)",
                (workspace, now(), dumps(record)),
            )
        except sqlite3.Error as exc:
            raise StateError(f"state write failed ({self.path}): {exc}") from exc

    # -- lock --------------------------------------------------------------------
    def _lock_path(self, workspace: str) -> str:
        return f"{self.path}.{workspace}.lock"

    def acquire(self, workspace: str, holder: LockHolder, timeout: float = 0.0) -> None:
        if workspace in self._locks:
            return
        fd = os.open(self._lock_path(workspace), os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    current = self.holder(workspace)
                    raise StateLockedError(
                        f"workspace {workspace!r} is locked by "
                        f"{current or 'another process'}; wait for it to finish, pass "
                        "--lock-timeout to wait, or run `govsync state unlock` if it is gone",
                        current.as_dict() if current else None,
                    ) from None
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        self._locks[workspace] = fd
        self.db.execute(
            "INSERT OR REPLACE INTO locks (workspace, holder) VALUES (?, ?)",
            (workspace, dumps(holder.as_dict())),
        )

    def release(self, workspace: str) -> None:
        fd = self._locks.pop(workspace, None)
        if fd is None:
            return
        try:
            self.db.execute("DELETE FROM locks WHERE workspace = ?", (workspace,))
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def holder(self, workspace: str) -> LockHolder | None:
        row = self.db.execute("SELECT holder FROM locks WHERE workspace = ?", (workspace,)).fetchone()
        return LockHolder(**json.loads(row[0])) if row else None

    def force_unlock(self, workspace: str) -> LockHolder | None:
        previous = self.holder(workspace)
        self.db.execute("DELETE FROM locks WHERE workspace = ?", (workspace,))
        return previous

    def close(self) -> None:
        for workspace in list(self._locks):
            self.release(workspace)
        self.db.close()
