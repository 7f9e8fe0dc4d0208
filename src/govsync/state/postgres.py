"""The shared state store: PostgreSQL, for teams whose CI runs on many machines.

Six tables, created by the first write in the first schema of the
connection's ``search_path`` (choose another with
``?options=-csearch_path%3Dops``):

* ``govsync_workspaces``    one row per workspace: lineage, serial, fingerprint key,
                            lock epoch, entry count, endpoint, governance
* ``govsync_objects``       one row per (workspace, address); spec and response JSONB
* ``govsync_locks``         who holds a workspace lock, for messages only
* ``govsync_history``       one JSONB record per apply
* ``govsync_applied_plans`` the saved plans each workspace applied (each applies once)
* ``govsync_plan_keys``     the key that authenticates each workspace's saved plans
* ``govsync_agent``         the agent's values of each workspace (pause, last cycle,
                            leader, notifications sent)
* ``govsync_lock_rows``     one row per lock (a workspace's, an agent's leadership):
                            what a lock session locks

The read-only role (``readonly_grants``) may read the first four and the
agent's, and never the applied plans and plan keys: whoever can only read the state cannot forge a saved plan.

Every write is one transaction that also bumps the workspace serial.  It
bumps the serial *first*: the ``UPDATE`` takes the workspace row lock, so two
writers of one workspace queue there instead of deadlocking on object rows.

The workspace lock is a row of ``govsync_lock_rows`` locked ``FOR UPDATE`` by a
transaction kept open on a connection of its own (the lock session) for as
long as the lock is held.  Locking a row needs UPDATE on its table, which the
read-only role never has: a reader cannot hold a lock and so block writers
(an advisory lock, which any role may take, could).  PostgreSQL releases the
row when that session ends, so a killed apply never blocks the next one.  The
lock transaction writes nothing and holds no snapshot between statements, but
it has a transaction id: VACUUM keeps the row versions newer than it while it
is open (an apply's duration; an agent's leadership lasts as long as the
agent).  The lock session asks the server for TCP keepalives, so even
a machine that vanished without closing its socket loses the lock within
about a minute.  Session-level locks need a real session: a pooler in
transaction mode (PgBouncer ``pool_mode=transaction``) cannot carry them.

Fencing: ``acquire`` bumps the workspace's lock epoch once it has the lock
row.  Every write of a store holding the lock checks, in the write's
transaction and under the workspace row lock, that the epoch is still its own
and that its lock transaction is still in progress (``txid_status``).  Before
each request an apply asks the lock session itself (``fence``): one round trip
that fails at once when the session was ended.  A lock session that ended (killed, terminated by an
administrator, network gone) is never silently replaced: the store's writes
raise LockLostError until it is closed.

Everything else (the records, lineage and serial, the checks of each write,
the lock's rules) is store.py's, over this backend's primitives (backend.py).

psycopg is imported here only; ``open_store`` imports this module lazily.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus

from govsync.errors import PlanKeyUnavailable, StateDamagedError, StateError
from govsync.redact import url as safe_url
from govsync.state.backend import Dialect, Statement, Tx
from govsync.state.schema import ADDED_COLUMNS, Table, added_tables, tables
from govsync.state.schema import TABLES as NAMES
from govsync.state.schema import upgrades as column_upgrades
from govsync.state.store import StateStore
from govsync.state.tamper import GOVERNANCE_AUDIT, GOVERNANCE_TRIGGER

T = TypeVar("T")

# Upsert rows given as one array per column; xmax is 0 only on a row the
# statement inserted (not one it updated), which the entry count adds up.
_PUT_MANY = (
    "WITH written AS (INSERT INTO {T}objects"
    " (workspace, address, kind, object_id, status, spec, response, updated_at)"
    " SELECT ?, * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[],"
    " ?::jsonb[], ?::jsonb[], ?::text[])"
    " ON CONFLICT (workspace, address) DO UPDATE SET kind = EXCLUDED.kind,"
    " object_id = EXCLUDED.object_id, status = EXCLUDED.status,"
    " spec = EXCLUDED.spec, response = EXCLUDED.response,"
    " updated_at = EXCLUDED.updated_at"
    " RETURNING (xmax = 0) AS inserted)"
    " UPDATE {T}workspaces SET entry_count = entry_count"
    " + (SELECT count(*) FROM written WHERE inserted) WHERE name = ?")

POSTGRES = Dialect("postgres", "govsync_", "%s", (
    ("SEQ", "id"), ("J", "::text"), ("C", ' COLLATE "C"'), ("FOR_UPDATE", " FOR UPDATE"),
    ("INT", "BIGINT"), ("BLOB", "BYTEA"), ("JSON", "JSONB"),
    ("ID", "id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"),
    ("AT", "TIMESTAMPTZ NOT NULL DEFAULT now()"),
    ("REF", " REFERENCES govsync_workspaces (name) ON DELETE CASCADE")),
    returning=True, put_many=_PUT_MANY,
    # govsync's own governance write (tamper.py): a setting for the transaction.
    own_governance=("SELECT set_config('govsync.writing', ?, true)", ""))

OWN_TABLES = (
    # The plan keys: the read-only role has no grant on them.
    Table("plan_keys", """CREATE TABLE IF NOT EXISTS {T}plan_keys (
    workspace TEXT PRIMARY KEY,
    plan_key {BLOB} NOT NULL
)"""),
    # What a lock session locks (FOR UPDATE): the read-only role has no grant on it.
    Table("lock_rows", "CREATE TABLE IF NOT EXISTS {T}lock_rows (name TEXT PRIMARY KEY)"),
)

TABLES = tuple(POSTGRES.prefix + name for name in NAMES)
# What the read-only role may read: enough to plan, drift and list, not the plan keys.
# Reading the lock rows tells who holds a lock; locking one needs UPDATE, never granted.
READABLE_TABLES = (*TABLES, "govsync_agent", "govsync_lock_rows")

# Tables added since the first release, made by the first write of an older database.
ADDED_TABLES = added_tables(POSTGRES, OWN_TABLES)

SCHEMA = (
    *(POSTGRES.sql(t.ddl) for t in tables(OWN_TABLES)),
    "CREATE INDEX IF NOT EXISTS govsync_history_workspace ON govsync_history (workspace, id)",
)

# Serializes CREATE TABLE IF NOT EXISTS between processes: run concurrently,
# it can fail on the catalogs' unique indexes.  Any constant unlikely to be
# used by another application will do ("govsync" in ASCII).
SCHEMA_LOCK = 0x676F7673796E63

# For the lock session: the server probes an idle client after 30 s and
# drops it after 3 unanswered probes 10 s apart, releasing its locks.  A
# server-wide idle timeout must not end it (and the lock) in a long apply.
LOCK_SESSION_SETTINGS = {
    "tcp_keepalives_idle": "30",
    "tcp_keepalives_interval": "10",
    "tcp_keepalives_count": "3",
    "idle_in_transaction_session_timeout": "0",
}

CONNECT_DEFAULTS = {"connect_timeout": "10", "application_name": "govsync"}

# Whether a lock session's transaction (its id the parameter) still holds its row.
_ALIVE = "coalesce(txid_status(?) = 'in progress', false)"


@dataclass
class _Session:
    """A lock session: its connection, whose open transaction holds one lock row."""

    conn: psycopg.Connection[Any]
    xid: int  # its transaction's id: in progress while the row is locked
    pid: int  # its server process


class PostgresStore(StateStore):
    """The state in a PostgreSQL database shared by every machine that applies.

    ``url`` is a libpq URL (``postgresql://user:password@host:5432/db``)."""

    backend: PostgresBackend

    def __init__(self, url: str) -> None:
        super().__init__(PostgresBackend(url))


class PostgresBackend:
    """The shared backend (see the module's docstring).  ``self.url`` keeps the URL with
    the password hidden, for messages."""

    dialect = POSTGRES
    writes_wait = True

    def __init__(self, url: str) -> None:
        self.url = _display_url(url)
        self._conninfo = url
        self._secrets = _passwords(url)
        self._mutex = threading.RLock()  # one transaction at a time on self.db
        self.db = self._connect()
        try:
            with self._errors("cannot read the state tables"):
                self._schema = self._schema_found()
                if self._partial:
                    # One statement looks the tables up one by one, each in the catalogue
                    # as it is then: another process's creating them can commit between
                    # two lookups.  A new statement sees all of that commit, or none.
                    self._schema = self._schema_found()
                self._check_schema()
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
            # The server's first line says what; the rest is the statement and a caret.
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            reason = self._scrub(first) or type(exc).__name__
            raise StateError(f"{action} ({self.url}): {reason}") from exc

    # -- transactions ---------------------------------------------------------------
    def read(self, action: str, statements: Sequence[Statement],
             consume: Callable[..., T]) -> T:
        """One statement in autocommit, one round trip (a transaction around it would
        add a BEGIN and a COMMIT); several in one read-only transaction of one
        snapshot, sent whole (pipeline mode) and read once all the answers are in."""
        with self._mutex, self._errors(action):
            if len(statements) == 1:
                with self.db.cursor() as cur:
                    cur.execute(POSTGRES.sql(statements[0][0]), statements[0][1])
                    return consume(cur)
            with contextlib.ExitStack() as cursors:
                found = [cursors.enter_context(self.db.cursor()) for _ in statements]
                with self._pipelined():
                    self.db.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    for cur, (template, params) in zip(found, statements, strict=True):
                        cur.execute(POSTGRES.sql(template), params)
                    self.db.execute("COMMIT")
                return consume(*found)

    @contextmanager
    def write(self, action: str, *, workspace: str | None = None,
              pipelined: bool = False) -> Iterator[Tx]:
        """One transaction.  ``pipelined``: its statements go out without waiting
        for each answer (psycopg's pipeline mode), so it waits only where it
        reads a result; its BEGIN travels with the first statement and its
        COMMIT with the last.  (psycopg's ``transaction()`` in pipeline mode
        still waits for BEGIN, and for the statements before COMMIT.)"""
        self._ensure_schema()
        with self._mutex, self._errors(action):
            if not pipelined:
                with self.db.transaction(), self.db.cursor() as cur:
                    yield Tx(cur, POSTGRES)
                return
            with self._pipelined(), self.db.cursor() as cur:
                cur.execute("BEGIN")
                yield Tx(cur, POSTGRES)
                cur.execute("COMMIT")

    @contextmanager
    def _pipelined(self) -> Iterator[None]:
        """Pipeline mode, the transaction rolled back on the way out of an error."""
        try:
            with self.db.pipeline():
                yield
        except BaseException:
            if self.db.info.transaction_status != TransactionStatus.IDLE:
                with contextlib.suppress(psycopg.Error):
                    self.db.execute("ROLLBACK")
            raise

    def has(self, name: str) -> bool:
        missing = self._schema[1]
        return not self._fresh and name not in missing and POSTGRES.prefix + name not in missing

    # -- the tables ------------------------------------------------------------------
    @property
    def _fresh(self) -> bool:
        """No govsync table exists yet: reads find nothing, the first write makes them."""
        return not any(self._schema[0])

    @property
    def _partial(self) -> bool:
        """Some of the tables exist, not all."""
        return any(self._schema[0]) and not all(self._schema[0])

    def _check_schema(self) -> None:
        if self._partial:
            found = self._schema[0]
            missing = [t for t, there in zip(TABLES, found, strict=True) if not there]
            raise self.damaged(f"the table{'s' if len(missing) > 1 else ''} "
                                f"{', '.join(missing)} is missing while the others exist")

    def _ensure_schema(self) -> None:
        """Before a write: the tables made, or an older database brought up to date.

        Reads never do this: a command that only reads writes nothing, and a
        read-only role can read a database where nothing was applied yet.  Once
        the tables exist, a role with only SELECT/INSERT/UPDATE/DELETE grants can
        write: no DDL is attempted."""
        found, missing = self._schema
        if all(found) and not missing:
            return
        with self._mutex, self._errors("cannot create the state tables"):
            with self.db.transaction(), self.db.cursor() as cur:
                found, _ = self._schema_found()
                # Two writers bring a database up to date one after the other.  On a
                # lock of the tables once they exist: the read-only role cannot take
                # one that waits on this (an advisory lock, any role can).
                cur.execute("LOCK TABLE govsync_workspaces IN SHARE ROW EXCLUSIVE MODE"
                            if any(found) else "SELECT pg_advisory_xact_lock(%s)",
                            () if any(found) else (SCHEMA_LOCK,))
                found, _ = self._schema_found()
                if not any(found):
                    for statement in SCHEMA:
                        cur.execute(statement)
                _, missing = self._schema_found()
                for statement in column_upgrades(POSTGRES, {c.name for c in ADDED_COLUMNS} - missing):
                    cur.execute(statement)
                for table in sorted(missing & set(ADDED_TABLES)):
                    cur.execute(ADDED_TABLES[table])
                if GOVERNANCE_TRIGGER in missing:
                    for statement in GOVERNANCE_AUDIT:
                        cur.execute(statement)
            self._schema = self._schema_found()
            self._check_schema()

    def _schema_found(self) -> tuple[list[bool], set[str]]:
        """Which of TABLES exist, and which of ADDED_COLUMNS (of govsync_workspaces) and
        ADDED_TABLES are missing.  One round trip."""
        added = list(ADDED_TABLES)
        row = self.db.execute(
            "SELECT " + ", ".join(f"to_regclass('{t}') IS NOT NULL" for t in (*TABLES, *added))
            + ", ARRAY(SELECT column_name::text FROM information_schema.columns"
            " WHERE table_name = 'govsync_workspaces'"
            " AND table_schema = (SELECT n.nspname FROM pg_class c JOIN pg_namespace n"
            " ON n.oid = c.relnamespace WHERE c.oid = to_regclass('govsync_workspaces'))),"
            f" EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = '{GOVERNANCE_TRIGGER}'"
            " AND tgrelid = to_regclass('govsync_workspaces'))"
        ).fetchone()
        assert row is not None
        found = [bool(v) for v in row[:len(TABLES)]]
        added_found = row[len(TABLES):-2]
        missing = {c.name for c in ADDED_COLUMNS} - set(row[-2])
        missing |= set() if row[-1] else {GOVERNANCE_TRIGGER}
        missing |= {t for t, there in zip(added, added_found, strict=True) if not there}
        return found, missing

    def damaged(self, problem: str) -> StateDamagedError:
        return StateDamagedError(
            f"the PostgreSQL state at {self.url} is damaged: {problem}; nothing was changed. "
            "Restore the database from a backup, or load an export with "
            "`govsync state import-all`")

    # -- the lock: a row locked by a session of its own ---------------------------------
    def take(self, workspace: str, *, leader: bool = False) -> _Session | None:
        """Lock the row of the workspace's lock (or leadership) on a new lock session
        (None: another session has it)."""
        name = _row(workspace, leader)
        conn = self._connect()
        try:
            with self._errors(f"cannot lock {name!r}"):
                settings = dict(LOCK_SESSION_SETTINGS)
                if conn.info.server_version >= 140000:
                    settings["idle_session_timeout"] = "0"
                conn.execute("SELECT " + ", ".join(["set_config(%s, %s, false)"] * len(settings)),
                             [part for item in settings.items() for part in item])
                # The row made first, outside the lock session's transaction: a row
                # another session inserted and has not committed would hold this one up.
                conn.execute("INSERT INTO govsync_lock_rows (name) VALUES (%s)"
                             " ON CONFLICT (name) DO NOTHING", (name,))
                conn.execute("BEGIN")
                row = conn.execute("SELECT txid_current(), pg_backend_pid() FROM"
                                   " govsync_lock_rows WHERE name = %s FOR UPDATE SKIP LOCKED",
                                   (name,)).fetchone()
        except BaseException:
            conn.close()
            raise
        if row is None:
            conn.close()
            return None
        return _Session(conn, int(row[0]), int(row[1]))

    def let_go(self, handle: _Session) -> None:
        """End a lock session: its row unlocked once this returns (a ROLLBACK answered;
        a session already ended has nothing left to unlock)."""
        with contextlib.suppress(psycopg.Error):
            handle.conn.execute("ROLLBACK")
        handle.conn.close()

    def alive(self, handle: _Session) -> Statement:
        return _ALIVE, (handle.xid,)

    def ended(self, handle: _Session) -> str:
        return f"the PostgreSQL session holding it (pid {handle.pid}) ended"

    def ask(self, handle: _Session, template: str, params: Sequence[Any]) -> Any | None:
        """Asked of the lock session itself: ended, it fails at once."""
        try:
            return handle.conn.execute(POSTGRES.sql(template), params).fetchone()
        except psycopg.Error:
            return None

    def lock_session(self, workspace: str) -> str | None:
        backend = self.lock_backend_pid(workspace)
        if backend is None:
            return None
        return (f" (PostgreSQL session pid {backend}; if it hangs, stop that process first, "
                "then an administrator may end its session with SELECT "
                f"pg_terminate_backend({backend}): ended first, a process that is only paused "
                "would wake up still sending); wait for it to finish or pass --lock-timeout "
                "to wait")

    def lock_backend_pid(self, workspace: str, *, leader: bool = False) -> int | None:
        """The server process id of the session holding the workspace lock (``leader``:
        the agent's leadership of it), if any."""
        if not self.has("lock_rows"):
            return None
        # The row's xmax is the id of the transaction that locked it; while that
        # transaction is open, its session holds a lock on that id.
        try:
            row = self.read(
                f"cannot read the lock of {workspace!r}",
                [("SELECT l.pid FROM govsync_lock_rows r JOIN pg_locks l ON l.locktype ="
                  " 'transactionid' AND l.transactionid = r.xmax AND l.mode ="
                  " 'ExclusiveLock' AND l.granted WHERE r.name = ?", (_row(workspace, leader),))],
                lambda rows: rows.fetchone())
        except StateError as exc:
            # A reader granted before this table was: it plans without knowing.
            if isinstance(exc.__cause__, psycopg.errors.InsufficientPrivilege):
                return None
            raise
        return int(row[0]) if row else None

    # -- the key vault: a table the read-only role may not read ------------------------
    def plan_key(self, workspace: str, *, create: bool = True) -> bytes:
        action = f"cannot read the plan key of workspace {workspace!r}"
        try:
            if not self.has("plan_keys"):
                if not create:
                    raise PlanKeyUnavailable(f"{action}: there is none yet")
                self._ensure_schema()
            if create:
                statement: Statement = (
                    "WITH made AS (INSERT INTO govsync_plan_keys (workspace, plan_key)"
                    " VALUES (?, ?) ON CONFLICT (workspace) DO NOTHING RETURNING"
                    " plan_key) SELECT plan_key FROM made UNION ALL SELECT plan_key FROM"
                    " govsync_plan_keys WHERE workspace = ?",
                    (workspace, secrets.token_bytes(32), workspace))
            else:
                statement = ("SELECT plan_key FROM govsync_plan_keys WHERE workspace = ?",
                             (workspace,))
            row = self.read(action, [statement], lambda rows: rows.fetchone())
        except StateError as exc:
            if isinstance(exc.__cause__, psycopg.errors.InsufficientPrivilege):
                raise PlanKeyUnavailable(
                    f"{action}: this role may not read it ({self.url}); a read-only role "
                    "saves plans for review only") from None
            raise
        if row is None:
            raise (PlanKeyUnavailable(f"{action}: there is none yet") if not create
                   else StateError(f"{action}: it was not made"))
        return bytes(row[0])

    def readonly_grants(self, role: str) -> list[str]:
        """The statements that make ``role`` a reader of this state: it may read what
        plan, drift, show and the state listings read, and nothing else (never the plan
        keys, never a write).  The tables are made first, so the grants have something
        to name."""
        self._ensure_schema()
        with self._mutex, self._errors("cannot read the state's schema"):
            row = self.db.execute(
                "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE c.oid = to_regclass('govsync_workspaces')").fetchone()
            assert row is not None
            schema, who = sql.Identifier(row[0]), sql.Identifier(role)
            tables = sql.SQL(", ").join(sql.Identifier(row[0], t) for t in READABLE_TABLES)
            statements = [
                sql.SQL("REVOKE ALL ON {} FROM {}").format(
                    sql.SQL(", ").join(sql.Identifier(row[0], t)
                                       for t in (*TABLES, *ADDED_TABLES)), who),
                sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, who),
                sql.SQL("GRANT SELECT ON {} TO {}").format(tables, who),
            ]
            return [s.as_string(self.db) + ";" for s in statements]

    def close(self) -> None:
        with self._mutex:
            self.db.close()


def _row(workspace: str, leader: bool) -> str:
    """The name of the lock row of a workspace's lock, or of the agent's leadership of it
    (no workspace name has a colon, so no workspace's lock is a leadership's)."""
    return f"agent:{workspace}" if leader else workspace


def _display_url(url: str) -> str:
    return re.sub(r"(?i)(password=)[^&\s]*", r"\1***", safe_url(url))


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
