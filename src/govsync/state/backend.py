"""What a state backend provides: the few primitives ``StateStore`` is written over.

As Terraform's ``states/remote`` asks a backend for Get, Put, Delete and a
locker and keeps lineage, serial and the locking rules above them, a backend
here provides three things and nothing of the domain:

* **transactions** in its SQL dialect: a consistent read of a few statements
  (``read``), a write transaction (``write``), which of the tables and columns
  added since the first release its database has yet (``has``), and the words
  of a damaged state (``damaged``);
* **a lock primitive with fencing**: take a named lock without waiting
  (``take``: a workspace's lock, or an agent's leadership of it), give it back
  (``let_go``), whether a lock it took is still held, as an SQL expression the
  fencing statements carry (``alive``), why one ended (``ended``), one
  statement asked where a lock is best checked (``ask``), and whether anyone
  holds a workspace's lock right now (``lock_session``);
* **the key vault** for saved plans' keys, which readers of the state cannot
  read (``plan_key``), and the grants that make a role such a reader
  (``readonly_grants``).

Statements are written once, with ``?`` for parameters and the marks of
``Dialect`` for what differs.  Snapshots, entries, governance, history, plan
claims, the agent's records, the lock and leader records and every fencing
check live once, in store.py; the tables in schema.py.  tests/state/contract.py
is the suite every backend runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from govsync.errors import StateDamagedError

T = TypeVar("T")

# A statement in the shared SQL and its parameters.
Statement = tuple[str, Sequence[Any]]


@dataclass(frozen=True)
class Dialect:
    """What differs between the backends' SQL, as data.

    Statements are written once with ``?`` for parameters and these marks:
    ``{T}`` the table prefix, ``{SEQ}`` the history's ordering column, ``{J}``
    a JSON column read as text, ``{C}`` byte order (as SQLite sorts) after an
    ORDER BY, ``{FOR_UPDATE}`` a row lock on a read in a write, and in the
    tables' DDL ``{INT}``, ``{BLOB}``, ``{JSON}``, ``{ID}``, ``{AT}``, ``{REF}``."""

    name: str
    prefix: str
    param: str
    words: tuple[tuple[str, str], ...] = field(default=())
    returning: bool = False
    """Whether an UPDATE may return what it wrote (``RETURNING``)."""
    put_many: str = ""
    """One statement that writes many entries at once, or "" (then one at a time):
    its parameters are the workspace, the entries' seven columns after it, one
    array each, and the workspace again; it keeps the entry count too."""
    own_governance: tuple[str, str] = ("", "")
    """What marks a write of the governance record as govsync's own (tamper.py):
    a statement before the write and one after it ("": none), each given the
    workspace."""

    def sql(self, template: str) -> str:
        return _translate(self, template)


@functools.lru_cache(maxsize=512)
def _translate(dialect: Dialect, template: str) -> str:
    text = template.replace("{T}", dialect.prefix)
    for mark, word in dialect.words:
        text = text.replace("{" + mark + "}", word)
    return text.replace("?", dialect.param)


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


class Backend(Protocol):
    """A state backend: transactions, a lock primitive with fencing, a key vault.

    A lock is named by its workspace; ``leader=True`` names the agent's
    leadership of the workspace instead.  What ``take`` returns (a *handle*:
    SQLite's locked file, PostgreSQL's lock session) is the backend's own; the
    store keeps it with the epoch it took and gives it back to the methods
    below."""

    url: str
    """Where the state is, for messages (no password)."""
    dialect: Dialect
    writes_wait: bool
    """Whether a write waits on the network (PostgreSQL): an apply then makes its
    writes on a worker thread and keeps sending meanwhile; an embedded store's
    writes (SQLite: about 50 µs) are made in place."""

    # -- transactions ------------------------------------------------------------------
    def read(self, action: str, statements: Sequence[Statement],
             consume: Callable[..., T]) -> T:
        """Run ``statements`` on one consistent view of the state and give their
        results (one cursor each) to ``consume``, where they can be read: SQLite
        inside the transaction, PostgreSQL once the transaction, sent whole, is
        back.  Database errors are StateError naming ``action``."""
        ...

    def write(self, action: str, *, workspace: str | None = None,
              pipelined: bool = False) -> AbstractContextManager[Tx]:
        """One write transaction (the tables made or brought up to date first).

        ``workspace``: the workspace whose state it writes (None: only lock records),
        so that SQLite keeps its backup in step.  ``pipelined``: its statements may
        go out without waiting for each answer (PostgreSQL), so it waits only
        where it reads a result."""
        ...

    def has(self, name: str) -> bool:
        """Whether the database has the table or workspace column ``name`` (one added
        since the first release) yet: a database of an older govsync gets it with
        its first write, and reads find nothing there meanwhile."""
        ...

    def damaged(self, problem: str) -> StateDamagedError:
        """The error of a damaged state: ``problem``, and how to restore it."""
        ...

    # -- the lock primitive ---------------------------------------------------------
    def take(self, workspace: str, *, leader: bool = False) -> Any | None:
        """Take the lock without waiting: its handle, or None when someone holds it.
        Held until ``let_go``, or until the process or its session ends."""
        ...

    def let_go(self, handle: Any) -> None:
        """Give a lock back: free once this returns."""
        ...

    def alive(self, handle: Any) -> Statement:
        """An SQL expression, with its parameters, that is true while the lock is still
        held: a fencing statement carries it, so a write checks its lock in its own
        transaction (PostgreSQL: the lock session's transaction in progress; SQLite:
        the locked file still the lock file, looked at as the statement is made)."""
        ...

    def ended(self, handle: Any) -> str:
        """Why a lock that is no longer held ended, for a LockLostError."""
        ...

    def ask(self, handle: Any, template: str, params: Sequence[Any]) -> Any | None:
        """One statement's row, asked where the lock is best checked (PostgreSQL: on its
        own session, which fails at once once ended): None when that session ended."""
        ...

    def lock_session(self, workspace: str) -> str | None:
        """Whether anyone holds the workspace's lock right now (None: nobody), and what a
        refusal says after the holder's name: how to wait, and where the backend can
        name the session holding it (PostgreSQL), how to end that."""
        ...

    # -- the key vault ----------------------------------------------------------------
    def plan_key(self, workspace: str, *, create: bool = True) -> bytes:
        """The secret key that authenticates the workspace's saved plans, made on first
        use (``create=False``: PlanKeyUnavailable when there is none yet), kept
        apart from everything a reader of the state can read (the read-only role,
        ``state export``, a copy of the state database).  PlanKeyUnavailable when
        these credentials may not read it."""
        ...

    def readonly_grants(self, role: str) -> list[str] | None:
        """The statements that make ``role`` a reader of this state (never of the plan
        keys, never a writer); None where the backend has no roles."""
        ...

    def close(self) -> None:
        """Close the connections (the store has given its locks back)."""
        ...
