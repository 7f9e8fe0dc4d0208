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
``<db>.plan-key``, a file only its owner may read (mode 0600, keyfile.py), so
a copy of the state (or of its backup), or ``state export``, gives nobody the
means to forge a plan.  The state files themselves are made 0600 too: they hold the
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

Everything else (the records, lineage and serial, the checks of each write,
the lock's rules) is store.py's, over this backend's primitives (backend.py).
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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from govsync.errors import StateDamagedError, StateError
from govsync.files import PRIVATE_MODE
from govsync.state.backend import Dialect, Statement, Tx
from govsync.state.keyfile import read_or_make_key
from govsync.state.schema import TABLES, Table, added_tables, tables, upgrades
from govsync.state.store import StateStore
from govsync.state.tamper import SQLITE_GOVERNANCE_AUDIT

log = logging.getLogger(__name__)
T = TypeVar("T")

SQLITE = Dialect("sqlite", "", "?", (
    ("SEQ", "seq"), ("J", ""), ("C", ""), ("FOR_UPDATE", ""), ("INT", "INTEGER"),
    ("BLOB", "BLOB"), ("JSON", "TEXT"), ("ID", "seq INTEGER PRIMARY KEY AUTOINCREMENT"),
    ("AT", "TEXT NOT NULL"), ("REF", "")),
    # The marks of govsync's own governance writes (tamper.py): SQLite has no session
    # settings, so a row of its own table, removed again in the same transaction.
    own_governance=("INSERT INTO governance_writes VALUES (?)",
                    "DELETE FROM governance_writes WHERE workspace = ?"))

OWN_TABLES = (Table("governance_writes",
                    "CREATE TABLE IF NOT EXISTS governance_writes (workspace TEXT)"),)

# Tables (and the trigger) added since the first release: made in an older file when it
# is opened.
ADDED = {**added_tables(SQLITE, OWN_TABLES), "governance_audit": SQLITE_GOVERNANCE_AUDIT}
SCHEMA = ";\n".join([SQLITE.sql(t.ddl) for t in tables(OWN_TABLES)]
                    + [SQLITE_GOVERNANCE_AUDIT]) + ";\n"


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
class _Flock:
    """A flock this backend holds (a workspace lock, or an agent's leadership)."""

    fd: int
    path: str


class SqliteStore(StateStore):
    """The state in one SQLite file at ``path``."""

    backend: SqliteBackend

    def __init__(self, path: str) -> None:
        super().__init__(SqliteBackend(path))


class SqliteBackend:
    """The embedded backend (see the module's docstring)."""

    dialect = SQLITE
    writes_wait = False

    def __init__(self, path: str) -> None:
        self.url = path
        self.path = path
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
                os.chmod(tmp, PRIVATE_MODE)  # its -wal and -shm files take the same mode
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
            raise self.damaged("it is not a regular file")
        if info.st_size == 0:
            raise self.damaged("it is empty (0 bytes)")

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
            raise self.damaged(
                f"it is truncated ({size} of {page_size * pages} bytes; SQLite: {result})")

    def _check_tables(self) -> None:
        found = {r[0] for r in self.db.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')")}
        missing = [t for t in TABLES if t not in found]
        if missing:
            raise self.damaged(f"it has no {', '.join(missing)} table"
                                f"{'s' if len(missing) > 1 else ''}")
        columns = {r[1] for r in self.db.execute("PRAGMA table_info(workspaces)")}
        if not upgrades(SQLITE, columns) and set(ADDED) <= found:
            return
        self._copy_to(self.path + ".before-upgrade")
        with self._mutex, self._errors("cannot upgrade the state database"):
            self.db.execute("BEGIN IMMEDIATE")
            try:
                columns = {r[1] for r in self.db.execute("PRAGMA table_info(workspaces)")}
                for statement in (*upgrades(SQLITE, columns), *ADDED.values()):
                    self.db.execute(statement)
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def damaged(self, problem: str) -> StateDamagedError:
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
                raise self.damaged(str(exc)) from exc
            raise StateError(f"{action} ({self.path}): {exc}") from exc
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError) as exc:
            raise StateError(f"{action} ({self.path}): {exc}") from exc
        except sqlite3.DatabaseError as exc:  # malformed, not a database, ...
            problem = str(exc)
            if problem == "file is not a database":
                problem = "it is not a SQLite database (or its header is damaged)"
            elif problem == "database disk image is malformed":
                problem = f"it is truncated or corrupt (SQLite: {problem})"
            raise self.damaged(problem) from exc
        except sqlite3.Error as exc:
            raise StateError(f"{action} ({self.path}): {exc}") from exc

    def _copy_to(self, target_path: str) -> None:
        """A consistent copy of the state file at ``target_path`` (mode 0600, atomic),
        made while no other process can write (a write lock held on the side)."""
        tmp = f"{target_path}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        _remove_leftovers(target_path)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
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

    def _mirror_write(self, tx: Tx, workspace: str) -> None:
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

    # -- transactions ---------------------------------------------------------------
    def read(self, action: str, statements: Sequence[Statement],
             consume: Callable[..., T]) -> T:
        with self._mutex, self._errors(action):
            if len(statements) == 1:  # one statement reads one snapshot by itself
                return consume(self.db.execute(SQLITE.sql(statements[0][0]), statements[0][1]))
            self.db.execute("BEGIN")
            try:
                found = consume(*(self.db.execute(SQLITE.sql(template), params)
                                  for template, params in statements))
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            return found

    @contextmanager
    def write(self, action: str, *, workspace: str | None = None,
              pipelined: bool = False) -> Iterator[Tx]:
        self._start_mirror()
        with self._mutex, self._errors(action):
            self.db.execute("BEGIN IMMEDIATE")
            try:
                # A workspace's write keeps its statements, for the backup.
                tx = Tx(self.db, SQLITE, keep=workspace is not None)
                yield tx
                if workspace is not None:
                    self._mirror_write(tx, workspace)
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def has(self, name: str) -> bool:
        return True  # a file is made whole, and brought up to date when it is opened

    # -- the lock: a flock on a file of its own ----------------------------------------
    def _lock_path(self, workspace: str, leader: bool = False) -> str:
        return f"{self.path}.{workspace}.{'agent.' if leader else ''}lock"

    def take(self, workspace: str, *, leader: bool = False) -> _Flock | None:
        path = self._lock_path(workspace, leader)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_MODE)
        except OSError as exc:
            raise StateError(f"cannot open the lock file {path}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if _still_there(fd, path):
                return _Flock(fd, path)
        except BlockingIOError:
            pass
        except BaseException:
            os.close(fd)
            raise
        # Held by another, or removed between open and flock (the next try locks the new
        # file): closing it gives back whatever this descriptor had.
        os.close(fd)
        return None

    def let_go(self, handle: _Flock) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(handle.fd, fcntl.LOCK_UN)
        with contextlib.suppress(OSError):
            os.close(handle.fd)  # the flock goes with the descriptor

    def alive(self, handle: _Flock) -> Statement:
        return "?", (int(_still_there(handle.fd, handle.path)),)

    def ended(self, handle: _Flock) -> str:
        return f"the lock file {handle.path} was removed"

    def ask(self, handle: _Flock, template: str, params: Sequence[Any]) -> Any | None:
        return self.read(f"cannot read the lock file {handle.path}", [(template, params)],
                         lambda rows: rows.fetchone())

    def lock_session(self, workspace: str) -> str | None:
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
                return ("; wait for it to finish, pass --lock-timeout to wait, or run "
                        "`govsync state unlock` if it is gone")
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    # -- the key vault ---------------------------------------------------------------
    def plan_key(self, workspace: str, *, create: bool = True) -> bytes:
        """The state file's plan key (one for all its workspaces; the MAC covers the
        workspace), in ``<db>.plan-key``, made on first use."""
        return read_or_make_key(self.path + ".plan-key", create=create)

    def readonly_grants(self, role: str) -> None:
        return None  # a file's readers may read all of it

    def close(self) -> None:
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
