"""The shared state store: PostgreSQL, for teams whose CI runs on many machines.

Four tables, created on first use in the first schema of the connection's
``search_path`` (choose another with ``?options=-csearch_path%3Dops``):

* ``govsync_workspaces`` one row per workspace: lineage, serial, fingerprint key
* ``govsync_objects``    one row per (workspace, address); spec and response JSONB
* ``govsync_locks``      who holds a workspace lock, for messages only
* ``govsync_history``    one JSONB record per apply

Every write is one transaction that also bumps the workspace serial.  It
bumps the serial *first*: the ``UPDATE`` takes the workspace row lock, so two
writers of one workspace queue there instead of deadlocking on object rows.

The workspace lock is a session-level advisory lock, one per workspace
(a 64-bit key derived from the workspace name, see ``lock_key``), taken on a
connection of its own that lives exactly as long as the store is open.
PostgreSQL releases it when that session ends, so a killed apply never blocks
the next one.  The lock session asks the server for TCP keepalives, so even
a machine that vanished without closing its socket loses the lock within
about a minute.  Session-level locks need a real session: a pooler in
transaction mode (PgBouncer ``pool_mode=transaction``) cannot carry them.

psycopg is imported here only; ``open_store`` imports this module lazily.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from typing import Any
from urllib.parse import unquote, urlsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

from govsync.errors import StateError, StateLockedError
from govsync.state.base import Entry, LockHolder, Snapshot, StateStore, now, safe_url

TABLES = ("govsync_workspaces", "govsync_objects", "govsync_locks", "govsync_history")

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS govsync_workspaces (
        name TEXT PRIMARY KEY,
        lineage TEXT NOT NULL,
        serial BIGINT NOT NULL DEFAULT 0,
        fingerprint_key BYTEA NOT NULL,
        created_at TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS govsync_objects (
        workspace TEXT NOT NULL REFERENCES govsync_workspaces (name) ON DELETE CASCADE,
        address TEXT NOT NULL,
        kind TEXT NOT NULL,
        object_id TEXT,
        status TEXT NOT NULL,
        spec JSONB,
        response JSONB,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (workspace, address)
    )""",
    """CREATE TABLE IF NOT EXISTS govsync_locks (
        workspace TEXT PRIMARY KEY,
        holder JSONB NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS govsync_history (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        workspace TEXT NOT NULL,
        at TIMESTAMPTZ NOT NULL DEFAULT now(),
        record JSONB NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS govsync_history_workspace ON govsync_history (workspace, id)",
)

# Serializes CREATE TABLE IF NOT EXISTS between processes: run concurrently,
# it can fail on the catalogs' unique indexes.  Any constant unlikely to be
# used by another application will do ("govsync" in ASCII).
SCHEMA_LOCK = 0x676F7673796E63

# For the lock session: the server probes an idle client after 30 s and
# drops it after 3 unanswered probes 10 s apart, releasing its locks.
LOCK_SESSION_SETTINGS = {
    "tcp_keepalives_idle": "30",
    "tcp_keepalives_interval": "10",
    "tcp_keepalives_count": "3",
}

CONNECT_DEFAULTS = {"connect_timeout": "10", "application_name": "govsync"}

POLL_SECONDS = 0.2

# Byte order, as SQLite sorts, whatever the database's collation.
C = 'COLLATE "C"'


def lock_key(workspace: str) -> int:
    """The advisory lock key of a workspace: the first 8 bytes of
    sha256("govsync:" + workspace) as a signed 64-bit integer."""
    digest = hashlib.sha256(f"govsync:{workspace}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PostgresStore(StateStore):
    """State in a PostgreSQL database shared by every machine that applies.

    ``url`` is a libpq URL (``postgresql://user:password@host:5432/db``).
    ``self.url`` keeps it with the password hidden, for messages.
    """

    def __init__(self, url: str) -> None:
        self.url = _display_url(url)
        self._conninfo = url
        self._secrets = _passwords(url)
        self._mutex = threading.RLock()  # one transaction at a time on self.db
        self._held: set[str] = set()
        self._lock_db: psycopg.Connection[Any] | None = None
        self.db = self._connect()
        try:
            with self._errors("cannot create the state tables"):
                self._create_tables()
        except BaseException:
            self.db.close()
            raise

    # -- connections and errors ---------------------------------------------------
    def _connect(self) -> psycopg.Connection[Any]:
        try:
            given = conninfo_to_dict(self._conninfo)
            extra = {k: v for k, v in CONNECT_DEFAULTS.items() if k not in given}
            return psycopg.connect(make_conninfo(self._conninfo, **extra), autocommit=True)
        except psycopg.Error as exc:
            raise StateError(
                f"cannot connect to the PostgreSQL state at {self.url}: "
                f"{self._scrub(str(exc).strip())}\n"
                "Check that the server is running and reachable from this machine, and "
                "that the host, port, database, user and password in --state / "
                "GOVSYNC_STATE are right."
            ) from exc

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Translate psycopg errors into StateError, without the password."""
        try:
            yield
        except psycopg.Error as exc:
            reason = self._scrub(str(exc).strip()) or type(exc).__name__
            raise StateError(f"{action} ({self.url}): {reason}") from exc

    @contextmanager
    def _transaction(self, action: str) -> Iterator[psycopg.Cursor[Any]]:
        with self._mutex, self._errors(action), self.db.transaction(), self.db.cursor() as cur:
            yield cur

    def _create_tables(self) -> None:
        # Once the tables exist, a role with only SELECT/INSERT/UPDATE/DELETE
        # grants can use them: no DDL is attempted.
        if self._tables_exist():
            return
        with self.db.transaction(), self.db.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            for statement in SCHEMA:
                cur.execute(statement)

    def _tables_exist(self) -> bool:
        row = self.db.execute(
            "SELECT " + ", ".join(f"to_regclass('{t}') IS NOT NULL" for t in TABLES)
        ).fetchone()
        return row is not None and all(row)

    def _lock_connection(self) -> psycopg.Connection[Any]:
        if self._lock_db is None or self._lock_db.closed:
            self._held.clear()  # a lost session took its locks with it
            conn = self._connect()
            try:
                with self._errors("cannot configure the lock session"):
                    settings = dict(LOCK_SESSION_SETTINGS)
                    if conn.info.server_version >= 140000:
                        # A server-wide idle timeout must not end the session
                        # (and the lock) in the middle of a long apply.
                        settings["idle_session_timeout"] = "0"
                    for name, value in settings.items():
                        conn.execute("SELECT set_config(%s, %s, false)", (name, value))
            except BaseException:
                conn.close()
                raise
            self._lock_db = conn
        return self._lock_db

    # -- read -------------------------------------------------------------------
    def snapshot(self, workspace: str, *, responses: bool = True) -> Snapshot:
        found = self._read(workspace, responses)
        if found is None:
            with self._transaction(f"cannot create workspace {workspace!r}") as cur:
                _ensure(cur, workspace)
            found = self._read(workspace, responses)
        assert found is not None
        return found

    def _read(self, workspace: str, responses: bool = True) -> Snapshot | None:
        """The workspace and its entries from one database snapshot (None if new)."""
        with self._transaction(f"cannot read workspace {workspace!r}") as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cur.execute(
                "SELECT lineage, serial, fingerprint_key FROM govsync_workspaces WHERE name = %s",
                (workspace,),
            )
            head = cur.fetchone()
            if head is None:
                return None
            cur.execute(
                "SELECT address, kind, object_id, status, spec,"
                f" {'response' if responses else 'NULL'}, updated_at"
                f" FROM govsync_objects WHERE workspace = %s ORDER BY address {C}",
                (workspace,),
            )
            rows = cur.fetchall()
        lineage, serial, key = head
        entries = {r[0]: Entry(*r) for r in rows}
        return Snapshot(workspace, lineage, int(serial), entries, bytes(key))

    def workspaces(self) -> list[str]:
        with self._transaction("cannot list workspaces") as cur:
            cur.execute(f"SELECT name FROM govsync_workspaces ORDER BY name {C}")
            return [r[0] for r in cur.fetchall()]

    def history(self, workspace: str, limit: int = 50) -> list[dict[str, Any]]:
        with self._transaction(f"cannot read the history of {workspace!r}") as cur:
            cur.execute(
                "SELECT record FROM govsync_history WHERE workspace = %s"
                " ORDER BY id DESC LIMIT %s",
                (workspace, limit),
            )
            return [r[0] for r in cur.fetchall()]

    # -- write ------------------------------------------------------------------
    @contextmanager
    def _write(self, workspace: str) -> Iterator[tuple[psycopg.Cursor[Any], list[int]]]:
        """One transaction that bumps the serial; yields the cursor and [new serial]."""
        with self._transaction(f"state write failed for workspace {workspace!r}") as cur:
            _ensure(cur, workspace)
            cur.execute(
                "UPDATE govsync_workspaces SET serial = serial + 1 WHERE name = %s"
                " RETURNING serial",
                (workspace,),
            )
            row = cur.fetchone()
            assert row is not None
            yield cur, [int(row[0])]

    def put(self, workspace: str, entry: Entry) -> int:
        with self._write(workspace) as (cur, serial):
            cur.execute(
                "INSERT INTO govsync_objects"
                " (workspace, address, kind, object_id, status, spec, response, updated_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (workspace, address) DO UPDATE SET kind = EXCLUDED.kind,"
                " object_id = EXCLUDED.object_id, status = EXCLUDED.status,"
                " spec = EXCLUDED.spec, response = EXCLUDED.response,"
                " updated_at = EXCLUDED.updated_at",
                _row(workspace, entry),
            )
        return serial[0]

    def remove(self, workspace: str, address: str) -> int:
        with self._write(workspace) as (cur, serial):
            cur.execute(
                "DELETE FROM govsync_objects WHERE workspace = %s AND address = %s",
                (workspace, address),
            )
        return serial[0]

    def replace_all(self, workspace: str, entries: list[Entry], lineage: str | None,
                    key: bytes | None) -> int:
        with self._write(workspace) as (cur, serial):
            cur.execute("DELETE FROM govsync_objects WHERE workspace = %s", (workspace,))
            if lineage:
                cur.execute("UPDATE govsync_workspaces SET lineage = %s WHERE name = %s",
                            (lineage, workspace))
            if key:
                cur.execute("UPDATE govsync_workspaces SET fingerprint_key = %s WHERE name = %s",
                            (key, workspace))
            if entries:
                cur.executemany(
                    "INSERT INTO govsync_objects (workspace, address, kind, object_id, status,"
                    " spec, response, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    [_row(workspace, e) for e in entries],
                )
        return serial[0]

    def add_history(self, workspace: str, record: dict[str, Any]) -> None:
        with self._transaction(f"cannot record history for {workspace!r}") as cur:
            cur.execute(
                "INSERT INTO govsync_history (workspace, record) VALUES (%s, %s)",
                (workspace, Jsonb(record)),
            )

    # -- lock -------------------------------------------------------------------
    def acquire(self, workspace: str, holder: LockHolder, timeout: float = 0.0) -> None:
        if workspace in self._held:
            return
        deadline = time.monotonic() + timeout
        while not self._try_lock(workspace):
            if time.monotonic() >= deadline:
                self._refuse(workspace)
            time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        try:
            # Replaces the row of a holder whose session has ended.
            with self._transaction(f"cannot record the lock of {workspace!r}") as cur:
                cur.execute(
                    "INSERT INTO govsync_locks (workspace, holder) VALUES (%s, %s)"
                    " ON CONFLICT (workspace) DO UPDATE SET holder = EXCLUDED.holder",
                    (workspace, Jsonb(holder.as_dict())),
                )
        except BaseException:
            with self._mutex, contextlib.suppress(StateError):
                self._unlock(workspace)
            raise

    def _try_lock(self, workspace: str) -> bool:
        with self._mutex, self._errors(f"cannot lock workspace {workspace!r}"):
            row = self._lock_connection().execute(
                "SELECT pg_try_advisory_lock(%s)", (lock_key(workspace),)
            ).fetchone()
            if row is None or not row[0]:
                return False
            self._held.add(workspace)
            return True

    def _refuse(self, workspace: str) -> None:
        current = self.holder(workspace)
        backend = self.lock_backend_pid(workspace)
        session = (
            f" (PostgreSQL session pid {backend}; if it hangs, an administrator can end it "
            f"with SELECT pg_terminate_backend({backend}))"
            if backend else ""
        )
        raise StateLockedError(
            f"workspace {workspace!r} is locked by {current or 'another process'}{session}; "
            "wait for it to finish or pass --lock-timeout to wait",
            current.as_dict() if current else None,
        )

    def release(self, workspace: str) -> None:
        with self._mutex:
            if workspace not in self._held:
                return
            try:
                with self._transaction(f"cannot clear the lock of {workspace!r}") as cur:
                    cur.execute("DELETE FROM govsync_locks WHERE workspace = %s", (workspace,))
            finally:
                self._unlock(workspace)

    def _unlock(self, workspace: str) -> None:
        self._held.discard(workspace)
        conn = self._lock_db
        if conn is None or conn.closed:
            return  # the session is gone, and its locks with it
        with self._errors(f"cannot unlock workspace {workspace!r}"):
            conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key(workspace),))

    def holder(self, workspace: str) -> LockHolder | None:
        with self._transaction(f"cannot read the lock of {workspace!r}") as cur:
            cur.execute("SELECT holder FROM govsync_locks WHERE workspace = %s", (workspace,))
            row = cur.fetchone()
        return _holder(row[0]) if row else None

    def force_unlock(self, workspace: str) -> LockHolder | None:
        """Delete the holder's row; returns who held it.

        This only clears the record.  The advisory lock itself belongs to the
        holder's database session and PostgreSQL releases it when that session
        ends: at once when the process exits or is killed, within about a
        minute (TCP keepalives) when its machine vanished.  A session that is
        still alive but hung keeps the lock; an administrator ends it with
        ``SELECT pg_terminate_backend(pid)``, pid from ``lock_backend_pid``
        (also named in the StateLockedError message).
        """
        with self._transaction(f"cannot unlock workspace {workspace!r}") as cur:
            cur.execute("DELETE FROM govsync_locks WHERE workspace = %s RETURNING holder",
                        (workspace,))
            row = cur.fetchone()
        return _holder(row[0]) if row else None

    def lock_backend_pid(self, workspace: str) -> int | None:
        """The server process id of the session holding the workspace lock, if any."""
        key = lock_key(workspace) & 0xFFFFFFFFFFFFFFFF
        with self._transaction(f"cannot read the lock of {workspace!r}") as cur:
            # A bigint advisory key shows in pg_locks as classid (high 32
            # bits) and objid (low 32 bits) with objsubid 1.
            cur.execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                " AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 1",
                (key >> 32, key & 0xFFFFFFFF),
            )
            row = cur.fetchone()
        return int(row[0]) if row else None

    def close(self) -> None:
        with self._mutex:
            for workspace in list(self._held):
                try:
                    self.release(workspace)
                except StateError:
                    # Closing the lock session below releases the lock; the
                    # holder row left behind is replaced by the next acquire.
                    self._held.discard(workspace)
            if self._lock_db is not None:
                self._lock_db.close()
            self.db.close()


def _ensure(cur: psycopg.Cursor[Any], workspace: str) -> None:
    cur.execute(
        "INSERT INTO govsync_workspaces (name, lineage, serial, fingerprint_key, created_at)"
        " VALUES (%s, %s, 0, %s, %s) ON CONFLICT (name) DO NOTHING",
        (workspace, str(uuid.uuid4()), secrets.token_bytes(32), now()),
    )


def _row(workspace: str, e: Entry) -> tuple[Any, ...]:
    return (workspace, e.address, e.kind, e.id, e.status,
            Jsonb(e.spec) if e.spec is not None else None,
            Jsonb(e.response) if e.response is not None else None,
            e.updated_at or now())


def _holder(data: dict[str, Any]) -> LockHolder:
    # Tolerates rows written by another govsync version (extra or missing keys).
    return LockHolder(**{f.name: data.get(f.name, "") for f in fields(LockHolder)})


def _display_url(url: str) -> str:
    return re.sub(r"(?i)(password=)[^&]*", r"\1***", safe_url(url))


def _passwords(url: str) -> list[str]:
    """Every spelling of the URL's password(s), longest first, to scrub from messages."""
    found: set[str] = set()
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    if password:
        found |= {password, unquote(password)}
    for match in re.finditer(r"(?i)password=([^&]*)", url):
        found |= {match.group(1), unquote(match.group(1))}
    return sorted((s for s in found if len(s) >= 3), key=len, reverse=True)
