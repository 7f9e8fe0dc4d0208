"""What every backend implements: storage and locking of workspaces, as
Terraform's ``statemgr`` splits them.

``Storage`` reads and writes a workspace; ``Locker`` is the workspace lock;
``StateStore`` is both over one database.  Each write is its own
transaction.

Fencing: a store that holds a workspace's lock has a lock epoch (bumped by
every ``acquire`` of that workspace, by anyone).  Each of its writes checks,
in the write's own transaction, that the epoch is still its own and that its
lock is still alive; otherwise it raises ``LockLostError`` and writes
nothing.  So an apply that lost its lock can never record an intent, and
never sends a create whose intent is not recorded.  Before every other
request it sends, an apply asks ``fence``: a process paused while its lock
was taken (its session ended, another process took over) sends at most the
one request it was about to send when it was paused.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from typing import Any

from govsync.state.model import Entry, LockHolder, Snapshot, empty_snapshot


class Storage(ABC):
    """Reading and writing workspaces.  Plan uses ``snapshot`` only, without the lock.

    Every write is one transaction.  Writes made while this store holds the
    workspace lock are fenced (see the module docstring)."""

    url: str
    # A write waits on the network (PostgreSQL), so an apply makes its writes
    # on a worker thread and keeps sending meanwhile; an embedded store's
    # writes (SQLite: about 50 µs) are made in place.
    writes_wait: bool = False

    # -- read ---------------------------------------------------------------
    def snapshot(self, workspace: str, *, responses: bool = True,
                 create: bool = True) -> Snapshot:
        """Read a workspace (created empty, with lineage and key, on first use).

        ``create=False`` is a read that writes nothing: a workspace never
        written reads as empty (``empty_snapshot``) and is not made, as a
        state file that does not exist reads for a command that only reads.

        ``responses=False`` is a read for planning: it leaves the API's answers
        out (None) and the times of the writes ("").  A plan needs neither;
        parsing the answers is most of reading a large state, and the times
        are 7 MB at 100,000 entries.  Its entries are never written back.
        A damaged state is a StateError naming the problem."""
        found = self._read(workspace, responses)
        if found is None:
            if not create:
                return empty_snapshot(workspace)
            self._create(workspace)
            found = self._read(workspace, responses)
        assert found is not None
        return found

    @abstractmethod
    def _read(self, workspace: str, responses: bool) -> Snapshot | None:
        """The workspace and its entries from one consistent read (None if new)."""

    @abstractmethod
    def _create(self, workspace: str) -> None:
        """Make an empty workspace, with its lineage and key (nothing if it exists)."""

    @abstractmethod
    def history(self, workspace: str, limit: int = 50) -> list[dict[str, Any]]:
        """The workspace's apply records, newest first."""

    # -- write (each call one transaction) ----------------------------------
    def put(self, workspace: str, entry: Entry) -> int:
        """Insert or replace one entry; returns the new serial."""
        return self.put_many(workspace, (entry,))

    @abstractmethod
    def put_many(self, workspace: str, entries: Sequence[Entry]) -> int:
        """Insert or replace entries (distinct addresses) in one transaction, which
        bumps the serial once; returns the new serial."""

    @abstractmethod
    def remove(self, workspace: str, address: str) -> int:
        """Drop one entry; returns the new serial."""

    @abstractmethod
    def rename(self, workspace: str, old: str, new: str) -> int:
        """Re-address one entry in one transaction (a move); StateError if ``old`` is not
        there or ``new`` is.  Returns the new serial."""

    @abstractmethod
    def replace_all(self, workspace: str, entries: list[Entry], lineage: str | None,
                    key: bytes | None) -> int:
        """Replace a workspace's entries (state import-all); returns the new serial."""

    @abstractmethod
    def add_history(self, workspace: str, record: dict[str, Any]) -> None:
        """Append an apply record (not state: the serial stays)."""

    @abstractmethod
    def set_endpoint(self, workspace: str, endpoint: str) -> None:
        """Record the endpoint the workspace is applied against.

        Like history, this is not an entry: the serial stays, so a saved
        plan is not made stale by it."""

    @abstractmethod
    def set_governance(self, workspace: str, record: dict[str, Any] | None) -> None:
        """Record the workspace's governance (a JSON object; the serial stays)."""

    @abstractmethod
    def governed(self) -> dict[str, tuple[str | None, dict[str, Any]]]:
        """Every workspace that records its governance: the endpoint recorded with it
        (None: none yet) and the governance record (a JSON object), by name."""

    @abstractmethod
    def recorded_elsewhere(self, workspace: str, ids: Collection[str]
                           ) -> dict[str, tuple[str, str]]:
        """Which of ``ids`` another workspace of this state records: id -> (workspace,
        address).  An object belongs to one workspace (contract 7): no other imports,
        changes or deletes it."""

    @abstractmethod
    def agent(self, workspace: str) -> dict[str, Any]:
        """What the agent records of the workspace, by name (``pause``, ``cycle``,
        ``leader``, ``notifications``: each a JSON value); {} when nothing is."""

    @abstractmethod
    def set_agent(self, workspace: str, name: str, value: Any) -> None:
        """Record one of the agent's values (None: remove it), in one fenced
        transaction; the serial stays (it is not an entry)."""

    @abstractmethod
    def add_cycle(self, workspace: str, record: dict[str, Any]) -> None:
        """Keep an agent cycle's result: in the history, and as the agent's value
        ``cycle``, in one fenced transaction.  A record whose ``key`` equals that of
        the newest history record of the workspace is merged into it (``cycles``
        counted up, ``at`` moved on, ``since`` kept), so that a thousand equal
        cycles are one record, not a thousand; any other record is appended."""

    @abstractmethod
    def plan_applied(self, workspace: str, plan_id: str) -> str | None:
        """When the saved plan ``plan_id`` was applied to the workspace (None: never)."""

    @abstractmethod
    def unclaim_plan(self, workspace: str, plan_id: str) -> None:
        """Forget a claim of ``claim_plan``: for an apply that changed nothing at all, so
        that the same plan may be applied once more."""

    @abstractmethod
    def claim_plan(self, workspace: str, plan_id: str) -> str | None:
        """Mark a saved plan as applied, in one fenced transaction: None when this call
        claimed it, else when it was claimed before (a saved plan applies at most once)."""

    @abstractmethod
    def plan_key(self, workspace: str, *, create: bool = True) -> bytes:
        """The secret key that authenticates the workspace's saved plans, made on first use
        (``create=False``: PlanKeyUnavailable when there is none yet).

        It is kept apart from everything a reader of the state can read (the
        read-only role, ``state export``, a copy of the state database).
        PlanKeyUnavailable when this store's credentials may not read it."""


class Locker(ABC):
    """The per-workspace lock that apply and the state commands hold."""

    @abstractmethod
    def acquire(self, workspace: str, holder: LockHolder, timeout: float = 0.0) -> int:
        """Take the workspace lock or raise StateLockedError naming the holder.

        Returns the lock epoch this store now holds (a number that every
        acquire of the workspace increases).  Acquiring a workspace this
        store already holds returns its epoch again; it never re-takes a
        lock that was lost (writes then raise LockLostError)."""

    @abstractmethod
    def release(self, workspace: str) -> None:
        """Give the lock back (nothing happens if this store does not hold it).

        A lock that was lost meanwhile is not touched: its new holder keeps it."""

    @abstractmethod
    def fence(self, workspace: str) -> None:
        """Raise LockLostError unless this store still holds the workspace lock (and the
        agent's leadership of it, if it took that) with the epoch it took: what an
        apply asks before each request it sends.  Nothing when it holds neither."""

    @abstractmethod
    def running(self, workspace: str) -> LockHolder | None:
        """Who holds the workspace lock right now (None: nobody), without taking it.
        A holder that left no readable record is named ``unknown``."""

    @abstractmethod
    def holder(self, workspace: str) -> LockHolder | None:
        """Who holds, or last held without releasing, the workspace lock."""


class Leadership(ABC):
    """Which agent acts for a workspace (contract section 9): one at a time.

    Apart from the workspace lock: the leader takes that lock only while it
    applies, as a person's apply does, so a person still meets an ordinary
    lock.  Leadership is held as long as the store is open (PostgreSQL: a
    lock row of its own, locked by a session of its own; SQLite: a file
    lock), and ends with the process or its session, so another agent takes
    it over at its next try.  Every write of a store that leads the workspace is fenced by
    its leadership too (the epoch it took, and the lock still held)."""

    @abstractmethod
    def lead(self, workspace: str, holder: LockHolder) -> int | None:
        """Take the leadership of the workspace if nobody holds it (never waits):
        its epoch (one more than the last leader's), or None.  Records the holder
        as the agent's value ``leader``, with the previous leader (a take-over).
        Leading already: the epoch again, if the leadership is still held."""

    @abstractmethod
    def leads(self, workspace: str) -> bool:
        """Whether this store still holds the leadership it took (False once lost)."""

    @abstractmethod
    def resign(self, workspace: str) -> None:
        """Give the leadership back (nothing happens if this store does not hold it)."""


class StateStore(Storage, Locker, Leadership):
    """What every backend provides: storage and locking over one database."""

    @abstractmethod
    def close(self) -> None:
        """Release this store's locks and close its connections."""

    def readonly_grants(self, role: str) -> list[str] | None:
        """The statements that make ``role`` a reader of this state; None where the
        backend has no roles (a file's readers may read all of it)."""
        return None

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
