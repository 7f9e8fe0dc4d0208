"""The state's operations, written once over a backend's primitives (backend.py).

``StateStore`` reads and writes workspaces (snapshots, entries, lineage and
serial, the endpoint and governance records, history, plan claims, the
agent's records), holds the workspace lock (as Terraform's ``statemgr``
splits storage from locking, the lock is the backend's primitive and the
rules around it are here) and the agent's leadership of a workspace.  Each
write is its own transaction.  A backend provides transactions, a lock
primitive and a key vault; every rule below is the same on each of them.

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

import json
import os
import threading
import time
import uuid
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from govsync.errors import LockLostError, StateError, StateLockedError
from govsync.state.backend import Backend, Statement, Tx
from govsync.state.codec import (
    NO_ANSWER_COLUMNS,
    Malformed,
    entry_row,
    holder_from_json,
    json_object,
    loads,
    snapshot_from_rows,
)
from govsync.state.records import (
    AGENT_CYCLE,
    AGENT_LEADER,
    Entry,
    LockHolder,
    Snapshot,
    dumps,
    empty_snapshot,
    leader_epoch,
    leader_record,
    leadership_lost,
    lock_lost,
    merged_cycle,
    now,
)
from govsync.state.schema import ADDED_COLUMNS

POLL_SECONDS = 0.2

# How long a loser of a lock race waits for the winner's holder record (the winner
# records itself just after taking the lock).
HOLDER_WAIT_SECONDS = 1.0

_SNAPSHOT_COLUMNS = ("entry_count", "endpoint", "governance")

_UPSERT_AGENT = ("INSERT INTO {T}agent (workspace, name, value) VALUES (?, ?, ?)"
                 " ON CONFLICT (workspace, name) DO UPDATE SET value = excluded.value")

# Only this store's own record: a lock lost meanwhile is someone else's now.
_CLEAR_LOCK = ("DELETE FROM {T}locks WHERE workspace = ? AND"
               " (SELECT lock_epoch FROM {T}workspaces WHERE name = ?) = ?")


@dataclass
class Held:
    """A lock this store took (a workspace's, or the agent's leadership of one): the
    backend's handle of it and the epoch it took."""

    handle: Any
    epoch: int


class StateStore:
    """What govsync keeps of its workspaces, over one backend (``open_store`` picks it).

    Plan uses ``snapshot`` only, without the lock.  Every write is one
    transaction; writes made while this store holds the workspace lock, or
    leads the workspace, are fenced (see the module docstring)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.url = backend.url
        self.writes_wait = backend.writes_wait
        self._mutex = threading.RLock()  # guards the two tables below
        self._locks: dict[str, Held] = {}
        self._leading: dict[str, Held] = {}

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- read ----------------------------------------------------------------------
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
            with self._write(workspace, bump=False):
                pass
            found = self._read(workspace, responses)
        assert found is not None
        return found

    def _read(self, workspace: str, responses: bool) -> Snapshot | None:
        """The workspace and its entries from one consistent read (None if new)."""
        if not self.backend.has("workspaces"):
            return None
        # A database not brought up to date yet (its first write does that): a
        # missing column reads as what that write will fill it with.
        columns = ", ".join(c.name if self.backend.has(c.name) else c.read_as
                            for c in ADDED_COLUMNS if c.name in _SNAPSHOT_COLUMNS)
        head = f"SELECT lineage, serial, fingerprint_key, {columns} FROM {{T}}workspaces " \
               "WHERE name = ?"
        # The JSON as text, parsed by codec.py (the specs then kept as text).
        rows = ("SELECT address, kind, object_id, status, spec{J}, "
                f"{'response{J}, updated_at' if responses else NO_ANSWER_COLUMNS}"
                " FROM {T}objects WHERE workspace = ? ORDER BY address{C}")
        return self.backend.read(
            f"cannot read workspace {workspace!r}", [(head, (workspace,)), (rows, (workspace,))],
            lambda found, entries: self._snapshot(workspace, found.fetchone(), entries))

    def _snapshot(self, workspace: str, head: Any, rows: Any) -> Snapshot | None:
        prefix = self.backend.dialect.prefix
        try:
            return snapshot_from_rows(workspace, head, rows,
                                      f"{prefix}objects" if prefix else "the objects table")
        except Malformed as exc:
            raise self.backend.damaged(f"workspace {workspace!r}: {exc}") from None

    def _one(self, action: str, template: str, params: Sequence[Any] = ()) -> Any:
        return self.backend.read(action, [(template, params)], lambda rows: rows.fetchone())

    def _all(self, action: str, template: str, params: Sequence[Any] = ()) -> list[Any]:
        return self.backend.read(action, [(template, params)], lambda rows: rows.fetchall())

    def history(self, workspace: str, limit: int = 50) -> list[dict[str, Any]]:
        """The workspace's apply records, newest first."""
        if not self.backend.has("history"):
            return []
        rows = self._all(f"cannot read the history of {workspace!r}",
                         "SELECT record{J} FROM {T}history WHERE workspace = ?"
                         " ORDER BY {SEQ} DESC LIMIT ?", (workspace, limit))
        try:
            return [json.loads(r[0]) for r in rows]
        except (TypeError, ValueError):
            raise self.backend.damaged(f"a history record of workspace {workspace!r} is not "
                                       "JSON") from None

    def governed(self) -> dict[str, tuple[str | None, dict[str, Any]]]:
        """Every workspace that records its governance: the endpoint recorded with it
        (None: none yet) and the governance record (a JSON object), by name."""
        if not (self.backend.has("endpoint") and self.backend.has("governance")):
            return {}
        rows = self._all("cannot read the workspaces' governance",
                         "SELECT name, endpoint, governance{J} FROM {T}workspaces"
                         " WHERE governance IS NOT NULL")
        try:
            return {str(name): (endpoint, json_object(record, "governance") or {})
                    for name, endpoint, record in rows}
        except Malformed as exc:
            raise self.backend.damaged(f"a workspace's governance: {exc}") from None

    def recorded_elsewhere(self, workspace: str, ids: Collection[str]
                           ) -> dict[str, tuple[str, str]]:
        """Which of ``ids`` another workspace of this state records: id -> (workspace,
        address).  An object belongs to one workspace (contract 7): no other imports,
        changes or deletes it."""
        wanted = sorted({i for i in ids if i})
        statements: list[Statement] = []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            statements.append(("SELECT workspace, address, object_id FROM {T}objects WHERE"
                               f" workspace <> ? AND object_id IN ({', '.join('?' * len(chunk))})",
                               (workspace, *chunk)))
        out: dict[str, tuple[str, str]] = {}
        if not statements or not self.backend.has("workspaces"):
            return out

        def found(*results: Any) -> None:
            for rows in results:
                for name, address, object_id in rows.fetchall():
                    out.setdefault(str(object_id), (str(name), str(address)))

        self.backend.read("cannot read which workspaces record these objects", statements,
                          found)
        return out

    def agent(self, workspace: str) -> dict[str, Any]:
        """What the agent records of the workspace, by name (``pause``, ``cycle``,
        ``leader``, ``notifications``: each a JSON value); {} when nothing is."""
        if not self.backend.has("agent"):
            return {}
        rows = self._all(f"cannot read the agent's records of {workspace!r}",
                         "SELECT name, value{J} FROM {T}agent WHERE workspace = ?",
                         (workspace,))
        try:
            return {str(name): json.loads(value) for name, value in rows}
        except (TypeError, ValueError):
            raise self.backend.damaged(f"a record of the agent of workspace {workspace!r} "
                                       "is not JSON") from None

    def plan_applied(self, workspace: str, plan_id: str) -> str | None:
        """When the saved plan ``plan_id`` was applied to the workspace (None: never)."""
        if not self.backend.has("applied_plans"):
            return None
        row = self._one("cannot read the applied plans",
                        "SELECT applied_at FROM {T}applied_plans WHERE workspace = ? AND"
                        " plan_id = ?", (workspace, plan_id))
        return str(row[0]) if row else None

    def plan_key(self, workspace: str, *, create: bool = True) -> bytes:
        """The secret key that authenticates the workspace's saved plans (the backend's
        key vault: see ``Backend.plan_key``)."""
        return self.backend.plan_key(workspace, create=create)

    def readonly_grants(self, role: str) -> list[str] | None:
        """The statements that make ``role`` a reader of this state; None where the
        backend has no roles (a file's readers may read all of it)."""
        return self.backend.readonly_grants(role)

    # -- writes: one fenced transaction each ------------------------------------------
    @contextmanager
    def _write(self, workspace: str, *, bump: bool = True,
               pipelined: bool = False) -> Iterator[Tx]:
        """One fenced write transaction; bumps the serial (unless not ``bump``) into
        ``tx.serial``."""
        with self.backend.write(f"state write failed for workspace {workspace!r}",
                                workspace=workspace, pipelined=pipelined) as tx:
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

    def _head(self, tx: Tx, workspace: str, bump: bool,
              lock: Held | None) -> tuple[int, int, bool] | None:
        """In a write, under the workspace's row lock: (serial, lock epoch, whether
        ``lock`` is alive), the serial bumped first if ``bump``; None: no row.  The
        statement that takes the row lock asks the rest (one round trip, not three)."""
        alive, params = self.backend.alive(lock.handle) if lock is not None else ("1", ())
        if bump and self.backend.dialect.returning:
            row = tx.one("UPDATE {T}workspaces SET serial = serial + 1 WHERE name = ?"
                         f" RETURNING serial, lock_epoch, {alive}", (workspace, *params))
        else:
            if bump:
                tx.run("UPDATE {T}workspaces SET serial = serial + 1 WHERE name = ?",
                       (workspace,))
            row = tx.one(f"SELECT serial, lock_epoch, {alive} FROM {{T}}workspaces"
                         " WHERE name = ?{FOR_UPDATE}", (*params, workspace))
        return None if row is None else (int(row[0]), int(row[1]), bool(row[2]))

    def _check_lock(self, tx: Tx, workspace: str, lock: Held, epoch: Any, alive: bool) -> None:
        """Refuse if this store lost the lock it held (the epoch and liveness now)."""
        if epoch != lock.epoch:
            current = _read_holder(tx, workspace)
            raise LockLostError(lock_lost(
                workspace, f"taken by {current}" if current else "another process took it"))
        if not alive:
            raise LockLostError(lock_lost(workspace, self.backend.ended(lock.handle)))

    def _check_leadership(self, tx: Tx, workspace: str) -> None:
        lead = self._leading.get(workspace)
        if lead is not None:
            why = self._leadership_lost(tx.one(*self._leader(workspace, lead)), lead)
            if why:
                raise LockLostError(leadership_lost(workspace, why))

    def _leader(self, workspace: str, lead: Held) -> Statement:
        """The recorded leader and whether this store's leadership is alive."""
        alive, params = self.backend.alive(lead.handle)
        return (f"SELECT (SELECT value{{J}} FROM {{T}}agent WHERE workspace = ? AND name = ?),"
                f" {alive}", (workspace, AGENT_LEADER, *params))

    def _leadership_lost(self, row: Any, lead: Held) -> str:
        """Why this store no longer leads the workspace ('' while it does)."""
        if row is None or leader_epoch(loads(row[0])) != lead.epoch:
            return "another agent took it over"
        return "" if row[1] else self.backend.ended(lead.handle)

    def put(self, workspace: str, entry: Entry) -> int:
        """Insert or replace one entry; returns the new serial."""
        return self.put_many(workspace, (entry,))

    def put_many(self, workspace: str, entries: Sequence[Entry]) -> int:
        """Insert or replace entries in one transaction, which bumps the serial once (the
        last entry of an address holds); returns the new serial."""
        rows = [entry_row(workspace, entry) for entry in entries]
        many = self.backend.dialect.put_many
        if many:
            # One statement whatever the number of entries: a write costs its round
            # trips, not its rows (at 2 ms to PostgreSQL, 4 ms where a statement at a
            # time was 18 ms).  One statement cannot upsert a row twice.
            rows = list({row[1]: row for row in rows}.values())
            columns = [[row[i] for row in rows] for i in range(1, 8)]
            with self._write(workspace, pipelined=True) as tx:
                tx.run(many, (workspace, *columns, workspace))
            return tx.serial
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
        """Drop one entry; returns the new serial."""
        with self._write(workspace) as tx:
            gone = tx.run("DELETE FROM {T}objects WHERE workspace = ? AND address = ?",
                          (workspace, address)).rowcount
            tx.run("UPDATE {T}workspaces SET entry_count = entry_count - ? WHERE name = ?",
                   (gone, workspace))
        return tx.serial

    def rename(self, workspace: str, old: str, new: str) -> int:
        """Re-address one entry in one transaction (a move); StateError if ``old`` is not
        there or ``new`` is.  Returns the new serial."""
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
        """Replace a workspace's entries (state import-all); returns the new serial."""
        rows = [entry_row(workspace, e) for e in entries]
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
        """Append an apply record (not state: the serial stays)."""
        with self._write(workspace, bump=False) as tx:
            tx.run("INSERT INTO {T}history (workspace, at, record) VALUES (?, ?, ?)",
                   (workspace, now(), dumps(record)))

    def set_endpoint(self, workspace: str, endpoint: str) -> None:
        """Record the endpoint the workspace is applied against.

        Like history, this is not an entry: the serial stays, so a saved
        plan is not made stale by it."""
        with self._write(workspace, bump=False) as tx:
            tx.run("UPDATE {T}workspaces SET endpoint = ? WHERE name = ?", (endpoint, workspace))

    def set_governance(self, workspace: str, record: dict[str, Any] | None) -> None:
        """Record the workspace's governance (a JSON object; the serial stays), marked
        as govsync's own write: the tamper trigger records nothing of it."""
        before, after = self.backend.dialect.own_governance
        with self._write(workspace, bump=False) as tx:
            if before:
                tx.run(before, (workspace,))
            tx.run("UPDATE {T}workspaces SET governance = ? WHERE name = ?",
                   (dumps(record) if record is not None else None, workspace))
            if after:
                tx.run(after, (workspace,))

    def set_agent(self, workspace: str, name: str, value: Any) -> None:
        """Record one of the agent's values (None: remove it), in one fenced
        transaction; the serial stays (it is not an entry)."""
        with self._write(workspace, bump=False) as tx:
            if value is None:
                tx.run("DELETE FROM {T}agent WHERE workspace = ? AND name = ?", (workspace, name))
            else:
                tx.run(_UPSERT_AGENT, (workspace, name, dumps(value)))

    def add_cycle(self, workspace: str, record: dict[str, Any]) -> None:
        """Keep an agent cycle's result: in the history, and as the agent's value
        ``cycle``, in one fenced transaction.  A record whose ``key`` equals that of
        the newest history record of the workspace is merged into it (``cycles``
        counted up, ``at`` moved on, ``since`` kept), so that a thousand equal
        cycles are one record, not a thousand; any other record is appended."""
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

    def claim_plan(self, workspace: str, plan_id: str) -> str | None:
        """Mark a saved plan as applied, in one fenced transaction: None when this call
        claimed it, else when it was claimed before (a saved plan applies at most once)."""
        with self._write(workspace, bump=False) as tx:
            if tx.run("INSERT INTO {T}applied_plans (workspace, plan_id, applied_at)"
                      " VALUES (?, ?, ?) ON CONFLICT (workspace, plan_id) DO NOTHING",
                      (workspace, plan_id, now())).rowcount == 1:
                return None
            row = tx.one("SELECT applied_at FROM {T}applied_plans WHERE workspace = ? AND"
                         " plan_id = ?", (workspace, plan_id))
        return str(row[0]) if row else "?"

    def unclaim_plan(self, workspace: str, plan_id: str) -> None:
        """Forget a claim of ``claim_plan``: for an apply that changed nothing at all, so
        that the same plan may be applied once more."""
        with self._write(workspace, bump=False) as tx:
            tx.run("DELETE FROM {T}applied_plans WHERE workspace = ? AND plan_id = ?",
                   (workspace, plan_id))

    # -- the workspace lock ---------------------------------------------------------
    def acquire(self, workspace: str, holder: LockHolder, timeout: float = 0.0) -> int:
        """Take the workspace lock or raise StateLockedError naming the holder.

        Returns the lock epoch this store now holds (a number that every
        acquire of the workspace increases).  Acquiring a workspace this
        store already holds returns its epoch again; it never re-takes a
        lock that was lost (writes then raise LockLostError)."""
        with self._mutex:
            if workspace in self._locks:  # held, or lost: a lost lock is never re-taken
                return self._locks[workspace].epoch
        deadline = time.monotonic() + timeout
        while True:
            taken, current = self._try_lock(workspace, holder)
            if taken is not None:
                with self._mutex:
                    self._locks[workspace] = taken
                return taken.epoch
            if time.monotonic() >= deadline:
                self._refuse(workspace, current)  # or back: free again, one more try
                continue
            time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))

    def _try_lock(self, workspace: str,
                  holder: LockHolder) -> tuple[Held | None, LockHolder | None]:
        """One attempt: (the lock, None) or (None, who holds it).

        The lock is taken inside the write transaction that records its holder and
        bumps the lock epoch: whoever holds it wrote its record in the transaction
        that took it, and a leftover record of a holder that ended is replaced."""
        handle = None
        try:
            with self.backend.write(f"cannot lock workspace {workspace!r}",
                                    pipelined=True) as tx:
                handle = self.backend.take(workspace)
                if handle is None:
                    return None, _read_holder(tx, workspace)
                _ensure(tx, workspace)
                tx.run("UPDATE {T}workspaces SET lock_epoch = lock_epoch + 1 WHERE name = ?",
                       (workspace,))
                tx.run("INSERT INTO {T}locks (workspace, holder) VALUES (?, ?) ON CONFLICT"
                       " (workspace) DO UPDATE SET holder = excluded.holder",
                       (workspace, dumps(holder.as_dict())))
                epoch = int(tx.one("SELECT lock_epoch FROM {T}workspaces WHERE name = ?",
                                   (workspace,))[0])
        except BaseException:
            if handle is not None:
                self.backend.let_go(handle)
            raise
        return Held(handle, epoch), None

    def _refuse(self, workspace: str, current: LockHolder | None) -> None:
        """Raise StateLockedError naming the holder; return if the lock is free again."""
        deadline = time.monotonic() + HOLDER_WAIT_SECONDS
        while current is None and time.monotonic() < deadline:
            time.sleep(0.05)  # the winner of a race records itself just after it won
            current = self.holder(workspace)
        advice = self.backend.lock_session(workspace)
        if current is None and advice is None:
            return  # its holder gave it back while this one looked
        raise StateLockedError(
            f"workspace {workspace!r} is locked by {current or 'another process'}"
            f"{advice or ''}", current.as_dict() if current else None)

    def release(self, workspace: str) -> None:
        """Give the lock back (nothing happens if this store does not hold it).

        A lock that was lost meanwhile is not touched: its new holder keeps it."""
        with self._mutex:
            lock = self._locks.pop(workspace, None)
            if lock is None:
                return
            given = False
            try:
                with self.backend.write(f"cannot unlock workspace {workspace!r}",
                                        pipelined=True) as tx:
                    tx.run(_CLEAR_LOCK, (workspace, workspace, lock.epoch))
                    # Given back inside the transaction: nobody sees a free record
                    # with the lock still taken.
                    given = True
                    self.backend.let_go(lock.handle)
            finally:
                if not given:
                    self.backend.let_go(lock.handle)

    def fence(self, workspace: str) -> None:
        """Raise LockLostError unless this store still holds the workspace lock (and the
        agent's leadership of it, if it took that) with the epoch it took: what an
        apply asks before each request it sends.  Nothing when it holds neither.

        One statement, asked where the lock is best checked (``Backend.ask``)."""
        lock, lead = self._locks.get(workspace), self._leading.get(workspace)
        if lock is None and lead is None:
            return
        asked = lock if lock is not None else lead
        assert asked is not None
        parts = [self.backend.alive(held.handle) if held else ("1", ()) for held in (lock, lead)]
        row = self.backend.ask(
            asked.handle,
            "SELECT (SELECT lock_epoch FROM {T}workspaces WHERE name = ?), (SELECT value{J}"
            f" FROM {{T}}agent WHERE workspace = ? AND name = ?), {parts[0][0]}, {parts[1][0]}",
            (workspace, workspace, AGENT_LEADER, *parts[0][1], *parts[1][1]))
        if lock is not None:
            if row is None:
                raise LockLostError(lock_lost(workspace, self.backend.ended(lock.handle)))
            if row[0] != lock.epoch:
                current = self.holder(workspace)
                raise LockLostError(lock_lost(
                    workspace, f"taken by {current}" if current else "another process took it"))
            if not row[2]:
                raise LockLostError(lock_lost(workspace, self.backend.ended(lock.handle)))
        if lead is not None:
            why = (self.backend.ended(lead.handle) if row is None
                   else self._leadership_lost((row[1], row[3]), lead))
            if why:
                raise LockLostError(leadership_lost(workspace, why))

    def running(self, workspace: str) -> LockHolder | None:
        """Who holds the workspace lock right now (None: nobody, or this store), without
        taking it.  A holder that left no readable record is named ``unknown``."""
        if workspace in self._locks:
            return None  # ours
        if self.backend.lock_session(workspace) is None:
            return None
        return self.holder(workspace) or LockHolder.unknown()

    def holder(self, workspace: str) -> LockHolder | None:
        """Who holds, or last held without releasing, the workspace lock."""
        if not self.backend.has("locks"):
            return None
        row = self._one(f"cannot read the lock of {workspace!r}",
                        "SELECT holder{J} FROM {T}locks WHERE workspace = ?", (workspace,))
        return holder_from_json(row[0]) if row else None

    # -- the agent's leadership (contract section 9) ----------------------------------
    # Which agent acts for a workspace: one at a time.  Apart from the workspace lock:
    # the leader takes that lock only while it applies, as a person's apply does, so a
    # person still meets an ordinary lock.  Leadership is held as long as the store is
    # open and ends with the process or its session, so another agent takes it over at
    # its next try.  Every write of a store that leads the workspace is fenced by its
    # leadership too (the epoch it took, and the lock still held).

    def lead(self, workspace: str, holder: LockHolder) -> int | None:
        """Take the leadership of the workspace if nobody holds it (never waits):
        its epoch (one more than the last leader's), or None.  Records the holder
        as the agent's value ``leader``, with the previous leader (a take-over).
        Leading already: the epoch again, if the leadership is still held."""
        with self._mutex:
            if workspace in self._leading:
                return self._leading[workspace].epoch if self.leads(workspace) else None
        handle = self.backend.take(workspace, leader=True)
        if handle is None:
            return None
        try:
            with self._write(workspace, bump=False) as tx:
                row = tx.one("SELECT value{J} FROM {T}agent WHERE workspace = ? AND name = ?"
                             "{FOR_UPDATE}", (workspace, AGENT_LEADER))
                previous = loads(row[0]) if row else None
                epoch = leader_epoch(previous) + 1
                tx.run(_UPSERT_AGENT, (workspace, AGENT_LEADER,
                                       dumps(leader_record(holder, epoch, previous))))
        except BaseException:
            self.backend.let_go(handle)
            raise
        with self._mutex:
            self._leading[workspace] = Held(handle, epoch)
        return epoch

    def leads(self, workspace: str) -> bool:
        """Whether this store still holds the leadership it took (False once lost)."""
        lead = self._leading.get(workspace)
        if lead is None:
            return False
        row = self._one(f"cannot read the agent's records of {workspace!r}",
                        *self._leader(workspace, lead))
        return not self._leadership_lost(row, lead)

    def resign(self, workspace: str) -> None:
        """Give the leadership back (nothing happens if this store does not hold it)."""
        with self._mutex:
            lead = self._leading.pop(workspace, None)
        if lead is not None:
            self.backend.let_go(lead.handle)

    def close(self) -> None:
        """Give this store's locks back and close its connections."""
        with self._mutex:
            try:
                for workspace in list(self._leading):
                    self.resign(workspace)
                for workspace in list(self._locks):
                    try:
                        self.release(workspace)
                    except StateError:
                        # Given back anyway (its lock ends with its handle); the holder
                        # record left behind is replaced by the next acquire.
                        self._locks.pop(workspace, None)
            finally:
                self.backend.close()


def new_lineage() -> str:
    """A random lineage: a version 4 UUID, as ``uuid.uuid4`` writes it."""
    return str(uuid.UUID(bytes=os.urandom(16), version=4))


def _ensure(tx: Tx, workspace: str) -> None:
    """Make the workspace's row (lineage and fingerprint key) unless it exists."""
    tx.run("INSERT INTO {T}workspaces (name, lineage, serial, fingerprint_key, created_at)"
           " VALUES (?, ?, 0, ?, ?) ON CONFLICT (name) DO NOTHING",
           (workspace, new_lineage(), os.urandom(32), now()))  # as secrets.token_bytes


def _read_holder(tx: Tx, workspace: str) -> LockHolder | None:
    row = tx.one("SELECT holder{J} FROM {T}locks WHERE workspace = ?", (workspace,))
    return holder_from_json(row[0]) if row else None
