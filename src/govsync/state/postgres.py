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

The tables, lineage and serial, the checks of each write and the records are
sql.py's, shared with SQLite; this module keeps what only PostgreSQL has.

psycopg is imported here only; ``open_store`` imports this module lazily.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus

from govsync.errors import (
    LockLostError,
    PlanKeyUnavailable,
    StateDamagedError,
    StateError,
    StateLockedError,
)
from govsync.redact import url as safe_url
from govsync.state.codec import NO_ANSWER_COLUMNS
from govsync.state.model import (
    AGENT_LEADER,
    Entry,
    LockHolder,
    Snapshot,
    leader_epoch,
    leadership_lost,
    lock_lost,
)
from govsync.state.sql import (
    ADDED_COLUMNS,
    POSTGRES,
    SqlStore,
    Tx,
    added_tables,
    tables,
    upgrades,
    values,
)
from govsync.state.sql import TABLES as NAMES
from govsync.state.tamper import GOVERNANCE_AUDIT, GOVERNANCE_TRIGGER

TABLES = tuple(POSTGRES.prefix + name for name in NAMES)
# What the read-only role may read: enough to plan, drift and list, not the plan keys.
# Reading the lock rows tells who holds a lock; locking one needs UPDATE, never granted.
READABLE_TABLES = (*TABLES, "govsync_agent", "govsync_lock_rows")

# Tables added since the first release, made by the first write of an older database.
ADDED_TABLES = added_tables(POSTGRES)

SCHEMA = (
    *(POSTGRES.sql(t.ddl) for t in tables(POSTGRES)),
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

POLL_SECONDS = 0.2

# How long a loser of a lock race waits for the winner's holder record.
HOLDER_WAIT_SECONDS = 1.0

# Byte order, as SQLite sorts, whatever the database's collation.
C = 'COLLATE "C"'


def lead_row(workspace: str) -> str:
    """The lock row of the agent's leadership of a workspace (no workspace name has a
    colon, so no workspace's lock is this one)."""
    return f"agent:{workspace}"


@dataclass
class _Session:
    """A lock session: its connection, whose open transaction holds one lock row."""

    conn: psycopg.Connection[Any]
    xid: int  # its transaction's id: in progress while the row is locked
    pid: int  # its server process


@dataclass
class _Lock:
    epoch: int
    session: _Session

    @property
    def session_pid(self) -> int:
        return self.session.pid


class PostgresStore(SqlStore):
    """State in a PostgreSQL database shared by every machine that applies.

    ``url`` is a libpq URL (``postgresql://user:password@host:5432/db``).
    ``self.url`` keeps it with the password hidden, for messages.
    """

    dialect = POSTGRES
    writes_wait = True

    def __init__(self, url: str) -> None:
        self.url = _display_url(url)
        self._conninfo = url
        self._secrets = _passwords(url)
        self._mutex = threading.RLock()  # one transaction at a time on self.db
        self._locks: dict[str, _Lock] = {}
        self._leading: dict[str, _Lock] = {}  # the agent's leaderships (Leadership)
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

    # -- the primitives of SqlStore ------------------------------------------------
    @contextmanager
    def _transaction(self, action: str, *, write: bool = True,
                     pipelined: bool = False) -> Iterator[Tx]:
        """One transaction.  ``pipelined``: its statements go out without waiting
        for each answer (psycopg's pipeline mode), so it waits only where it
        reads a result; its BEGIN travels with the first statement and its
        COMMIT with the last.  (psycopg's ``transaction()`` in pipeline mode
        still waits for BEGIN, and for the statements before COMMIT.)"""
        with self._mutex, self._errors(action):
            if not pipelined:
                with self.db.transaction(), self.db.cursor() as cur:
                    yield Tx(cur, POSTGRES)
                return
            try:
                with self.db.pipeline(), self.db.cursor() as cur:
                    cur.execute("BEGIN")
                    yield Tx(cur, POSTGRES)
                    cur.execute("COMMIT")
            except BaseException:
                if self.db.info.transaction_status != TransactionStatus.IDLE:
                    with contextlib.suppress(psycopg.Error):
                        self.db.execute("ROLLBACK")
                raise

    @contextmanager
    def _reading(self, action: str) -> Iterator[Tx]:
        """One statement in autocommit, one round trip (a transaction around it would
        add a BEGIN and a COMMIT)."""
        with self._mutex, self._errors(action), self.db.cursor() as cur:
            yield Tx(cur, POSTGRES)

    def _readable(self, table: str) -> bool:
        if self._fresh:
            return False
        if table == "governance":
            return not {"endpoint", "governance"} & self._schema[1]
        return POSTGRES.prefix + table not in self._schema[1]

    def _before_write(self) -> None:
        self._ensure_schema()

    def _head(self, tx: Tx, workspace: str, bump: bool,
              lock: _Lock | None) -> tuple[int, int, bool] | None:
        # Either statement takes the workspace row lock first (see above).  Holding
        # the lock, the same round trip asks whether the lock transaction is still in
        # progress (the fence; one round trip, not three).
        alive = "true" if lock is None else _ALIVE
        xid = () if lock is None else (lock.session.xid,)
        if bump:
            row = tx.one("UPDATE {T}workspaces SET serial = serial + 1 WHERE name = ?"
                         f" RETURNING serial, lock_epoch, {alive}", (workspace, *xid))
        else:
            row = tx.one(f"SELECT serial, lock_epoch, {alive} FROM {{T}}workspaces"
                         " WHERE name = ? FOR UPDATE", (*xid, workspace))
        return None if row is None else (int(row[0]), int(row[1]), bool(row[2]))

    def _alive(self, tx: Tx, held: _Lock) -> bool:
        return bool(tx.one(f"SELECT {_ALIVE}", (held.session.xid,))[0])

    def _ended(self, held: _Lock) -> str:
        return f"the PostgreSQL session holding it (pid {held.session_pid}) ended"

    def _mark_governance(self, tx: Tx, workspace: str, done: bool) -> None:
        if not done:
            tx.run("SELECT set_config('govsync.writing', ?, true)", (workspace,))

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
            raise self._damaged(f"the table{'s' if len(missing) > 1 else ''} "
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
                for statement in upgrades(POSTGRES, {c for c, _, _ in ADDED_COLUMNS} - missing):
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
        missing = {name for name, _, _ in ADDED_COLUMNS} - set(row[-2])
        missing |= set() if row[-1] else {GOVERNANCE_TRIGGER}
        missing |= {t for t, there in zip(added, added_found, strict=True) if not there}
        return found, missing

    def _damaged(self, problem: str) -> StateDamagedError:
        return StateDamagedError(
            f"the PostgreSQL state at {self.url} is damaged: {problem}; nothing was changed. "
            "Restore the database from a backup, or load an export with "
            "`govsync state import-all`")

    # -- lock sessions -----------------------------------------------------------------
    def _take(self, name: str) -> _Session | None:
        """Lock the row ``name`` on a new lock session (None: another session has it)."""
        with self._mutex, self._errors(f"cannot lock {name!r}"):
            self.db.execute("INSERT INTO govsync_lock_rows (name) VALUES (%s)"
                            " ON CONFLICT (name) DO NOTHING", (name,))
        conn = self._connect()
        try:
            with self._errors(f"cannot lock {name!r}"):
                settings = dict(LOCK_SESSION_SETTINGS)
                if conn.info.server_version >= 140000:
                    settings["idle_session_timeout"] = "0"
                conn.execute("SELECT " + ", ".join(["set_config(%s, %s, false)"] * len(settings)),
                             [part for item in settings.items() for part in item])
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

    @staticmethod
    def _let_go(session: _Session) -> None:
        """End a lock session: its row unlocked once this returns (a ROLLBACK answered;
        a session already ended has nothing left to unlock)."""
        with contextlib.suppress(psycopg.Error):
            session.conn.execute("ROLLBACK")
        session.conn.close()


    # -- read and write --------------------------------------------------------------
    def _read(self, workspace: str, responses: bool) -> Snapshot | None:
        """The workspace and its entries from one database snapshot (None if new).

        One round trip: BEGIN, both SELECTs and COMMIT go out together (pipeline
        mode) and the answers are read once they are all in."""
        if self._fresh:
            return None
        # An older database not yet brought up to date (its first write does that):
        # a missing column reads as what that write would fill it with.
        missing = self._schema[1]
        columns = ", ".join(
            {"entry_count": "(SELECT count(*) FROM govsync_objects o WHERE o.workspace = name)"
             }.get(c, "NULL") if c in missing else c
            for c in ("entry_count", "endpoint", "governance"))
        action = f"cannot read workspace {workspace!r}"
        with self._mutex, self._errors(action), self.db.cursor() as head, \
                self.db.cursor() as rows:
            with self._transaction(action, write=False, pipelined=True) as tx:
                tx.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                head.execute(f"SELECT lineage, serial, fingerprint_key, {columns}"
                             " FROM govsync_workspaces WHERE name = %s", (workspace,))
                # The JSONB columns as text, parsed as SQLite's are (faster than
                # psycopg's loader), the specs then kept as text.
                rows.execute(
                    "SELECT address, kind, object_id, status, spec::text,"
                    f" {'response::text, updated_at' if responses else NO_ANSWER_COLUMNS}"
                    f" FROM govsync_objects WHERE workspace = %s ORDER BY address {C}",
                    (workspace,),
                )
            return self._snapshot(workspace, head.fetchone(), rows)

    def put_many(self, workspace: str, entries: Sequence[Entry]) -> int:
        # The last entry of an address holds (one statement cannot upsert a row twice).
        rows = list({e.address: values(workspace, e) for e in entries}.values())
        columns = [[row[i] for row in rows] for i in range(1, 8)]  # all but the workspace
        # Two round trips whatever the number of entries: BEGIN with the serial
        # and the fence, then every row, the entry count and COMMIT.  A write
        # costs its round trips, not its rows: at 2 ms to the database this is
        # 4 ms where a statement at a time was 18 ms.
        with self._write(workspace, pipelined=True) as tx:
            tx.run(_PUT_MANY, (workspace, *columns, workspace))
        return tx.serial

    def plan_key(self, workspace: str, *, create: bool = True) -> bytes:
        action = f"cannot read the plan key of workspace {workspace!r}"
        try:
            if not self._readable("plan_keys"):
                if not create:
                    raise PlanKeyUnavailable(f"{action}: there is none yet")
                self._ensure_schema()
            with self._reading(action) as tx:
                if create:
                    row = tx.one(
                        "WITH made AS (INSERT INTO govsync_plan_keys (workspace, plan_key)"
                        " VALUES (?, ?) ON CONFLICT (workspace) DO NOTHING RETURNING"
                        " plan_key) SELECT plan_key FROM made UNION ALL SELECT plan_key FROM"
                        " govsync_plan_keys WHERE workspace = ?",
                        (workspace, secrets.token_bytes(32), workspace))
                else:
                    row = tx.one("SELECT plan_key FROM govsync_plan_keys WHERE"
                                 " workspace = ?", (workspace,))
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
        from psycopg import sql

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

    # -- lock -------------------------------------------------------------------
    def acquire(self, workspace: str, holder: LockHolder, timeout: float = 0.0) -> int:
        with self._mutex:
            if workspace in self._locks:  # held, or lost: a lost lock is never re-taken
                return self._locks[workspace].epoch
        self._ensure_schema()
        deadline = time.monotonic() + timeout
        while (session := self._take(workspace)) is None:
            if time.monotonic() >= deadline:
                self._refuse(workspace)  # or back: given back meanwhile, one more try
                continue
            time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        action = f"cannot record the lock of {workspace!r}"
        try:
            # Replaces the row of a holder whose session has ended.  One round
            # trip: the transaction goes out whole, and the new epoch is read
            # once it has committed.
            with self._mutex, self._errors(action), self.db.cursor() as epoch:
                with self._transaction(action, pipelined=True) as tx:
                    self._record_lock(tx, workspace, holder)
                    epoch.execute("SELECT lock_epoch FROM govsync_workspaces WHERE name = %s",
                                  (workspace,))
                row = epoch.fetchone()
                assert row is not None
                self._locks[workspace] = _Lock(int(row[0]), session)
        except BaseException:
            self._locks.pop(workspace, None)
            self._let_go(session)
            raise
        return self._locks[workspace].epoch

    def _refuse(self, workspace: str) -> None:
        """Raise StateLockedError naming the holder; return if the lock is free again."""
        # The winner of a race records itself just after taking the lock.
        deadline = time.monotonic() + HOLDER_WAIT_SECONDS
        while (current := self.holder(workspace)) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        backend = self.lock_backend_pid(workspace)
        if current is None and backend is None:
            return  # its holder gave it back while this one looked
        session = (
            f" (PostgreSQL session pid {backend}; if it hangs, stop that process first, "
            "then an administrator may end its session with SELECT "
            f"pg_terminate_backend({backend}): ended first, a process that is only paused "
            "would wake up still sending)"
            if backend else ""
        )
        raise StateLockedError(
            f"workspace {workspace!r} is locked by {current or 'another process'}{session}; "
            "wait for it to finish or pass --lock-timeout to wait",
            current.as_dict() if current else None,
        )

    def release(self, workspace: str) -> None:
        with self._mutex:
            lock = self._locks.pop(workspace, None)
            if lock is None:
                return
            try:
                # One statement, in autocommit: one round trip.
                with self._reading(f"cannot clear the lock of {workspace!r}") as tx:
                    tx.run(self._CLEAR_LOCK, (workspace, workspace, lock.epoch))
            finally:
                self._let_go(lock.session)

    def fence(self, workspace: str) -> None:
        lock = self._locks.get(workspace)
        lead = self._leading.get(workspace)
        if lock is None and lead is None:
            return
        session = lock.session if lock is not None else lead.session  # type: ignore[union-attr]
        # Asked of the lock session itself: ended, it fails at once.
        try:
            row = session.conn.execute(POSTGRES.sql(
                "SELECT (SELECT lock_epoch FROM {T}workspaces WHERE name = ?),"
                " (SELECT value FROM {T}agent WHERE workspace = ? AND name = ?),"
                f" {_ALIVE}"), (workspace, workspace, AGENT_LEADER,
                                lead.session.xid if lead else 0)).fetchone()
        except psycopg.Error:
            row = None
        if lock is not None:
            if row is None:
                raise LockLostError(lock_lost(workspace, self._ended(lock)))
            if row[0] != lock.epoch:
                current = self.holder(workspace)
                raise LockLostError(lock_lost(
                    workspace, f"taken by {current}" if current else "another process took it"))
        if lead is not None:
            if row is None or not row[2]:
                raise LockLostError(leadership_lost(workspace, self._ended(lead)))
            if leader_epoch(row[1]) != lead.epoch:
                raise LockLostError(leadership_lost(workspace, "another agent took it over"))

    def running(self, workspace: str) -> LockHolder | None:
        if workspace in self._locks:
            return None  # ours
        if self.lock_backend_pid(workspace) is None:
            return None
        return self.holder(workspace) or LockHolder.unknown()

    def lock_backend_pid(self, workspace: str) -> int | None:
        """The server process id of the session holding the workspace lock, if any."""
        if not self._readable("lock_rows"):
            return None
        # The row's xmax is the id of the transaction that locked it; while that
        # transaction is open, its session holds a lock on that id.
        try:
            with self._reading(f"cannot read the lock of {workspace!r}") as tx:
                row = tx.one(
                    "SELECT l.pid FROM govsync_lock_rows r JOIN pg_locks l ON l.locktype ="
                    " 'transactionid' AND l.transactionid = r.xmax AND l.mode ="
                    " 'ExclusiveLock' AND l.granted WHERE r.name = ?", (workspace,))
        except StateError as exc:
            # A reader granted before this table was: it plans without knowing.
            if isinstance(exc.__cause__, psycopg.errors.InsufficientPrivilege):
                return None
            raise
        return int(row[0]) if row else None

    # -- the agent's leadership ---------------------------------------------------
    def lead(self, workspace: str, holder: LockHolder) -> int | None:
        with self._mutex:
            if workspace in self._leading:
                return self._leading[workspace].epoch if self.leads(workspace) else None
        self._ensure_schema()
        session = self._take(lead_row(workspace))
        if session is None:
            return None
        try:
            epoch = self._record_leader(workspace, holder)
        except BaseException:
            self._let_go(session)
            raise
        with self._mutex:
            self._leading[workspace] = _Lock(epoch, session)
        return epoch

    def resign(self, workspace: str) -> None:
        with self._mutex:
            lead = self._leading.pop(workspace, None)
            if lead is not None:
                self._let_go(lead.session)

    def close(self) -> None:
        with self._mutex:
            for workspace in list(self._leading):
                self.resign(workspace)
            for workspace in list(self._locks):
                try:
                    self.release(workspace)
                except StateError:
                    # Its lock session is closed anyway, which releases the lock; the
                    # holder row left behind is replaced by the next acquire.
                    self._locks.pop(workspace, None)
            self.db.close()


# Whether a lock session's transaction (its id the parameter) still holds its row.
_ALIVE = "coalesce(txid_status(?) = 'in progress', false)"

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
