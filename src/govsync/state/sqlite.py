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
makes every write in both: the write's statements run again in the copy,
inside the main file's write transaction (so no other writer, and no other
store's copy, comes between).
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

The tables, lineage and serial, the checks of each write and the records are
sql.py's, shared with PostgreSQL; this module keeps what only SQLite has.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import secrets
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from govsync.errors import PlanKeyUnavailable, StateDamagedError, StateError, StateLockedError
from govsync.state.codec import NO_ANSWER_COLUMNS
from govsync.state.model import LockHolder, Snapshot
from govsync.state.sql import (
    SQLITE,
    TABLES,
    SqlStore,
    Tx,
    added_tables,
    tables,
    upgrades,
)
from govsync.state.tamper import SQLITE_GOVERNANCE_AUDIT

log = logging.getLogger(__name__)

# Tables (and the trigger) added since the first release: made in an older file when it
# is opened.
ADDED = {**added_tables(SQLITE), "governance_audit": SQLITE_GOVERNANCE_AUDIT}
SCHEMA = ";\n".join([SQLITE.sql(t.ddl) for t in tables(SQLITE)]
                    + [SQLITE_GOVERNANCE_AUDIT]) + ";\n"

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
    """A flock this store holds (a workspace lock, or an agent's leadership)."""

    fd: int
    epoch: int
    path: str


class SqliteStore(SqlStore):
    dialect = SQLITE

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
        if not upgrades(SQLITE, columns) and set(ADDED) <= found:
            return
        self._copy_to(self.path + ".before-upgrade")
        with self._transaction("cannot upgrade the state database", write=True) as tx:
            columns = {r[1] for r in self.db.execute("PRAGMA table_info(workspaces)")}
            for statement in (*upgrades(SQLITE, columns), *ADDED.values()):
                tx.cursor.execute(statement, ())

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

    def _after_write(self, tx: Tx, workspace: str) -> None:
        """Inside the main write transaction: the same write in the backup (its
        statements again), with the workspace's row as the main file now has it.  A backup that cannot follow is
        removed (a stale copy would be worse than none: it could lose entries)."""
        backup = self.path + ".backup"
        try:
            mirror = self._mirror_connection()
            if mirror is None:
                return
            row = self.db.execute("SELECT * FROM workspaces WHERE name = ?",
                                  (workspace,)).fetchone()
            mirror.execute("BEGIN IMMEDIATE")
            try:
                for statement, params in tx.writes or ():
                    mirror.execute(statement, params)
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

    # -- the primitives of SqlStore ------------------------------------------------
    @contextmanager
    def _transaction(self, action: str, *, write: bool,
                     pipelined: bool = False) -> Iterator[Tx]:
        with self._mutex, self._errors(action):
            self.db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                # A write keeps its statements, for the backup (_after_write).
                yield Tx(self.db, SQLITE, keep=write)
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def _before_write(self) -> None:
        self._start_mirror()

    def _head(self, tx: Tx, workspace: str, bump: bool,
              lock: _Lock | None) -> tuple[int, int, bool] | None:
        if bump:
            tx.run("UPDATE {T}workspaces SET serial = serial + 1 WHERE name = ?", (workspace,))
        row = tx.one("SELECT serial, lock_epoch FROM {T}workspaces WHERE name = ?",
                     (workspace,))
        if row is None:
            return None
        return int(row[0]), int(row[1]), lock is None or self._alive(tx, lock)

    def _alive(self, tx: Tx, held: _Lock) -> bool:
        return _still_there(held.fd, held.path)

    def _ended(self, held: _Lock) -> str:
        return f"the lock file {held.path} was removed"

    def _mark_governance(self, tx: Tx, workspace: str, done: bool) -> None:
        tx.run("DELETE FROM {T}governance_writes WHERE workspace = ?" if done
               else "INSERT INTO {T}governance_writes VALUES (?)", (workspace,))

    def fence(self, workspace: str) -> None:
        lock = self._locks.get(workspace)
        if lock is None and workspace not in self._leading:
            return
        with self._transaction(f"cannot read the lock of {workspace!r}", write=False) as tx:
            if lock is not None:
                row = tx.one("SELECT lock_epoch FROM {T}workspaces WHERE name = ?",
                             (workspace,))
                self._check_lock(tx, workspace, lock, row[0] if row else -1,
                                 self._alive(tx, lock))
            self._check_leadership(tx, workspace)

    # -- read --------------------------------------------------------------------
    def _read(self, workspace: str, responses: bool) -> Snapshot | None:
        with self._transaction(f"cannot read state {self.path}", write=False) as tx:
            head = tx.one("SELECT lineage, serial, fingerprint_key, entry_count, endpoint,"
                          " governance FROM workspaces WHERE name = ?", (workspace,))
            return self._snapshot(workspace, head, tx.run(
                "SELECT address, kind, object_id, status, spec,"
                f" {'response, updated_at' if responses else NO_ANSWER_COLUMNS}"
                " FROM objects WHERE workspace = ? ORDER BY address", (workspace,)))

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
                return int(self._locks[workspace].epoch)
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
        fd = _open_lock(path)
        try:
            # The flock is tried inside a write transaction: whoever holds it
            # wrote its record in the transaction that took it.
            with self._transaction(f"cannot lock workspace {workspace!r}", write=True) as tx:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    fd = -1
                    return None, self._read_holder(tx, workspace)
                try:
                    if not _still_there(fd, path):
                        raise FileNotFoundError(path)
                    self._record_lock(tx, workspace, holder)
                    epoch = int(tx.one("SELECT lock_epoch FROM workspaces WHERE name = ?",
                                       (workspace,))[0])
                except FileNotFoundError:
                    # The file was removed between open and flock: try the new one.
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    os.close(fd)
                    fd = -1
                    return None, None
                except BaseException:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    raise
            return _Lock(fd, epoch, path), None
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
                                       write=True) as tx:
                    tx.run(self._CLEAR_LOCK, (workspace, workspace, lock.epoch))
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

    # -- the agent's leadership ----------------------------------------------------
    def _lead_path(self, workspace: str) -> str:
        return f"{self.path}.{workspace}.agent.lock"

    def lead(self, workspace: str, holder: LockHolder) -> int | None:
        with self._mutex:
            if workspace in self._leading:
                return self._leading[workspace].epoch if self.leads(workspace) else None
        path = self._lead_path(workspace)
        fd = _open_lock(path)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
            if not _still_there(fd, path):
                os.close(fd)  # removed meanwhile: the next try locks the new file
                return None
            epoch = self._record_leader(workspace, holder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing it gives the flock back
            raise
        with self._mutex:
            self._leading[workspace] = _Lock(fd, epoch, path)
        return epoch

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


def _open_lock(path: str) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StateError(f"cannot open the lock file {path}: {exc}") from exc


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
