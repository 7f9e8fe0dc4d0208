"""The state store: what govsync has applied, per workspace and address.

Per address it keeps the object's id, the spec last applied (resolved
request; secrets only as keyed fingerprints) and the API's answer (secrets
scrubbed).  A workspace has a lineage (a random id fixed when it is created)
and a serial that increases on every write, so a saved plan can tell that
the state moved on.  Each write is its own transaction.

The interface is two halves, as Terraform's ``statemgr`` splits them:
``Storage`` (read and write a workspace) and ``Locker`` (the workspace
lock).  ``StateStore`` is both, and is what a backend implements.

Fencing: a store that holds a workspace's lock has a lock epoch (bumped by
every ``acquire`` of that workspace, by anyone).  Each of its writes checks,
in the write's own transaction, that the epoch is still its own and that its
lock is still alive; otherwise it raises ``LockLostError`` and writes
nothing.  So an apply that lost its lock can never record an intent, and
never sends a create whose intent is not recorded.

Statuses of an entry (``EntryStatus``):

* ``applied``   the object exists; ``id`` and ``spec`` are known.
* ``pending``   a create is about to be sent (the intent); if govsync dies
                before the answer, the next run treats it as uncertain.
* ``uncertain`` a create was sent and its outcome is unknown; apply never
                repeats it blindly (``govsync state resolve`` settles it).
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import hmac
import json
import os
import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from govsync import redact
from govsync.errors import LockLostError, StateError

if TYPE_CHECKING:
    from concurrent.futures import Future


class EntryStatus(StrEnum):
    """The status of a state entry (stored and exported as its value)."""

    APPLIED = "applied"
    PENDING = "pending"
    UNCERTAIN = "uncertain"


APPLIED, PENDING, UNCERTAIN = EntryStatus.APPLIED, EntryStatus.PENDING, EntryStatus.UNCERTAIN
FINGERPRINT_PREFIX = "hmac-sha256:"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class Entry:
    """What the state records of one address: its id, status, the spec last applied and the
    answer.

    A store may hand the spec over as the JSON text it keeps (``spec_json``,
    already checked to be one JSON object): it is parsed when ``spec`` is first
    read.  A plan reads it through ``read_spec``, which keeps nothing, so the
    specs of a state of 100,000 entries stay text (35 MB less)."""

    __slots__ = ("address", "kind", "id", "status", "response", "updated_at", "_spec",
                 "_spec_json")

    def __init__(self, address: str, kind: str, id: str | None, status: EntryStatus,
                 spec: dict[str, Any] | None = None, response: dict[str, Any] | None = None,
                 updated_at: str = "", *, spec_json: str | None = None) -> None:
        self.address = address
        self.kind = kind
        self.id = id
        self.status = status
        self.response = response
        self.updated_at = updated_at
        self._spec = spec
        self._spec_json = spec_json if spec is None else None

    @property
    def spec(self) -> dict[str, Any] | None:
        if self._spec_json is not None:
            self._spec, self._spec_json = json.loads(self._spec_json), None
        return self._spec

    @spec.setter
    def spec(self, value: dict[str, Any] | None) -> None:
        self._spec, self._spec_json = value, None

    def read_spec(self) -> dict[str, Any] | None:
        """The spec, parsed again each time from the stored text if it is still text."""
        return json.loads(self._spec_json) if self._spec_json is not None else self._spec

    def spec_text(self) -> str | None:
        """The spec as JSON text (the stored text when there is one)."""
        if self._spec_json is not None:
            return self._spec_json
        return None if self._spec is None else dumps(self._spec)

    def _fields(self) -> tuple[Any, ...]:
        return (self.address, self.kind, self.id, self.status, self.read_spec(),
                self.response, self.updated_at)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Entry):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass's

    def __repr__(self) -> str:
        return (f"Entry(address={self.address!r}, kind={self.kind!r}, id={self.id!r}, "
                f"status={self.status!r}, spec={self.read_spec()!r}, "
                f"response={self.response!r}, updated_at={self.updated_at!r})")

    def as_dict(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "kind": self.kind,
            "id": self.id,
            "status": self.status,
            "spec": self.spec,
            "response": self.response,
            "updatedAt": self.updated_at,
        }


def checked_status(entry: Entry) -> EntryStatus:
    """The entry's status, or StateError: a store writes no status it does not know."""
    from govsync.errors import StateError

    try:
        return EntryStatus(entry.status)
    except ValueError:
        raise StateError(f"{entry.address}: unknown entry status {entry.status!r} "
                         f"(known: {', '.join(EntryStatus)})") from None


class Malformed(ValueError):
    """A stored value that is not what govsync writes (turned into StateDamagedError)."""


# What a read for planning selects in place of the last two columns of a
# snapshot's rows (the API's answer and the time of the write).
NO_ANSWER_COLUMNS = "NULL, ''"


def entries_from_json_rows(rows: Iterable[tuple[Any, ...]]) -> dict[str, Entry]:
    """``entry_from_row`` over rows whose spec and response are JSON text, taken as
    a cursor yields them (every row's text at once is 60 MB more at the peak
    of a read of 100,000 entries); each spec is kept as its text once it is
    checked to be one JSON object, and parsed again when a plan compares it."""
    entries: dict[str, Entry] = {}
    for row in rows:
        entry = entry_from_row(row)
        entries[entry.address] = entry
    return entries


_DECODE = json.JSONDecoder().raw_decode


def _json_value(text: str | bytes) -> Any:
    """The one JSON value that ``text`` is; ValueError if it is not exactly one.

    ``raw_decode`` on the text as stored (compact, no surrounding space) skips
    the two whitespace scans of ``json.loads``; anything else is left to
    ``json.loads``, which allows the space and refuses what follows a value."""
    if isinstance(text, str):
        try:
            value, end = _DECODE(text)
        except ValueError:
            pass
        else:
            if end == len(text):
                return value
    return json.loads(text)


def json_object(value: Any, name: str) -> dict[str, Any] | None:
    """A stored JSON object (text, or already parsed by the driver), or None; Malformed
    for anything else."""
    if value is None:
        return None
    if isinstance(value, str | bytes):
        try:
            value = _json_value(value)
        except ValueError:
            raise Malformed(f"its {name} is not JSON") from None
    if not isinstance(value, dict):
        raise Malformed(f"its {name} is a JSON {type(value).__name__}, not an object")
    return value


def entry_from_row(row: tuple[Any, ...]) -> Entry:
    """An Entry from a stored row (address, kind, id, status, spec, response,
    updated_at) whose spec and response are JSON text.  The entry keeps the
    spec's text once it is checked, not the parsed spec.  Raises Malformed
    naming the entry and the problem."""
    address, kind, object_id, status, spec, response, updated_at = row
    if not isinstance(address, str) or not address:
        raise Malformed(f"an entry has the address {address!r}")
    where = f"entry {address!r}"
    if not isinstance(kind, str) or not kind:
        raise Malformed(f"{where} has the kind {kind!r}")
    kind = sys.intern(kind)  # one string per kind, not one per entry
    if object_id is not None and not isinstance(object_id, str):
        raise Malformed(f"{where} has the id {object_id!r}, not a string")
    try:
        status = EntryStatus(status)
    except ValueError:
        raise Malformed(f"{where} has the unknown status {status!r} "
                        f"(known: {', '.join(EntryStatus)})") from None
    values: list[dict[str, Any] | None] = []
    for name, value in (("spec", spec), ("response", response)):
        if value is not None:
            if not isinstance(value, str | bytes):
                raise Malformed(f"{where}: its {name} is not JSON text")
            try:
                value = _json_value(value)
            except ValueError:
                raise Malformed(f"{where}: its {name} is not JSON") from None
        if value is not None and not isinstance(value, dict):
            raise Malformed(f"{where}: its {name} is a JSON {type(value).__name__}, "
                            "not an object")
        values.append(value)
    if not isinstance(updated_at, str):
        raise Malformed(f"{where} has the time {updated_at!r}, not a string")
    if isinstance(spec, str) and values[0] is not None:
        return Entry(address, kind, object_id, status, None, values[1], updated_at,
                     spec_json=spec)
    return Entry(address, kind, object_id, status, values[0], values[1], updated_at)


@dataclass
class Snapshot:
    """One consistent read of a workspace."""

    workspace: str
    lineage: str
    serial: int
    entries: dict[str, Entry]
    key: bytes = field(repr=False, default=b"")
    endpoint: str | None = None
    """The API endpoint the workspace was last applied against (None: never recorded)."""
    governance: dict[str, Any] | None = None
    """What the workspace records of its governance (environment, approvals, rules), as
    ``governance.Governance.as_dict`` wrote it; None: never recorded."""

    def content_digest(self) -> str:
        """SHA-256 of what is recorded (addresses, ids, statuses, specs): equal for two
        serials between which the writes cancelled out (an intent, then its removal)."""
        digest = hashlib.sha256()
        for address in sorted(self.entries):
            e = self.entries[address]
            digest.update(dumps([address, e.kind, e.id, str(e.status), e.read_spec()]).encode())
            digest.update(b"\n")
        return digest.hexdigest()

    def fingerprint(self, value: str) -> str:
        """A keyed fingerprint of a secret value: comparable, never reversible."""
        digest = hmac.new(self.key, value.encode(), hashlib.sha256).hexdigest()
        return FINGERPRINT_PREFIX + digest


@dataclass
class LockHolder:
    """Who holds a workspace lock: user, host, process, command and since when."""

    user: str
    host: str
    pid: int
    command: str
    since: str

    @classmethod
    def me(cls) -> LockHolder:
        try:
            user = getpass.getuser()
        except Exception:  # no user name in some containers
            user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
        command = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))
        import socket

        return cls(user, socket.gethostname(), os.getpid(), command[:200], now())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LockHolder:
        """Tolerates records written by another govsync version (extra or missing keys)."""
        return cls(str(data.get("user", "")), str(data.get("host", "")),
                   int(data.get("pid") or 0), str(data.get("command", "")),
                   str(data.get("since", "")))

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def unknown(cls) -> LockHolder:
        return cls("unknown", "unknown", 0, "another process", "")

    def __str__(self) -> str:
        return f"{self.user}@{self.host} pid {self.pid} since {self.since} ({self.command})"


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
    def running(self, workspace: str) -> LockHolder | None:
        """Who holds the workspace lock right now (None: nobody), without taking it.
        A holder that left no readable record is named ``unknown``."""

    @abstractmethod
    def holder(self, workspace: str) -> LockHolder | None:
        """Who holds, or last held without releasing, the workspace lock."""


class StateStore(Storage, Locker):
    """What every backend provides: storage and locking over one database."""

    @abstractmethod
    def close(self) -> None:
        """Release this store's locks and close its connections."""

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class GroupWriter:
    """A workspace's writes on one worker thread, committed in groups.

    ``put`` queues an entry and returns a future that is done once that entry is
    committed.  The thread commits everything queued since its last commit in
    one ``put_many`` transaction (group commit).  A write to a database across
    a network costs its round trips, not its rows: at 2 ms to PostgreSQL, an
    apply of 1,000 objects that committed each write alone took 26 s instead
    of 4.  When a group fails, its entries are written again one by one, so
    one entry's fault is its own.  A lost lock fails them all, and each caller
    acts on it as on its own write.

    A caller that gives up cancels its future.  Its intent (``pending``) is then
    not written, if the thread has not taken it yet: an intent is written only
    just before its send.  Any other entry records an answer the API already
    gave, so it is written anyway.  ``close`` returns once every write to be
    made has been made; a ``put`` after it is a StateError."""

    def __init__(self, store: Storage, workspace: str) -> None:
        import queue
        import threading

        self._store = store
        self._workspace = workspace
        self._queue: queue.SimpleQueue[tuple[Entry, Future[int]] | None] = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="govsync-state", daemon=True)
        self._thread.start()

    def put(self, entry: Entry) -> Future[int]:
        """Queue one entry; the future holds the serial its commit made, or the error."""
        from concurrent.futures import Future

        if self._closed or not self._thread.is_alive():
            raise StateError(f"the state writer of workspace {self._workspace!r} is closed")
        done: Future[int] = Future()
        self._queue.put((entry, done))
        return done

    def close(self) -> None:
        self._closed = True
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        import queue

        stop = False
        try:
            while not stop:
                group = [self._queue.get()]
                with contextlib.suppress(queue.Empty):
                    while True:
                        group.append(self._queue.get_nowait())
                stop = None in group
                writes = []
                for item in group:
                    if item is None:
                        continue
                    entry, done = item
                    waited = done.set_running_or_notify_cancel()
                    if waited or entry.status != PENDING:
                        writes.append((entry, done if waited else None))
                if writes:
                    self._commit(writes)
        finally:
            # Should this thread ever end early, no caller waits forever.
            self._closed = True
            with contextlib.suppress(queue.Empty):
                while True:
                    item = self._queue.get_nowait()
                    if item is not None and item[1].set_running_or_notify_cancel():
                        item[1].set_exception(StateError(
                            f"the state writer of workspace {self._workspace!r} stopped"))

    def _commit(self, writes: list[tuple[Entry, Future[int] | None]]) -> None:
        try:
            serial = self._store.put_many(self._workspace, [entry for entry, _ in writes])
        except Exception as exc:  # a StateError, or a defect: each caller sees its own
            if len(writes) > 1 and not isinstance(exc, LockLostError):
                for write in writes:
                    self._commit([write])
                return
            for _, done in writes:
                if done is not None:
                    done.set_exception(exc)
        else:
            for _, done in writes:
                if done is not None:
                    done.set_result(serial)


def lock_lost(workspace: str, why: str) -> str:
    """The message of a LockLostError."""
    return (f"the lock on workspace {workspace!r} was lost ({why}): this apply sends nothing "
            "more; run `govsync plan` to see what is uncertain")


SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def open_store(url: str) -> StateStore:
    """A store for ``url``: a SQLite path (default, or ``sqlite:///path``) or
    ``postgresql://...``.  Any other ``scheme://`` is a StateError."""
    scheme = SCHEME.match(url)
    name = scheme.group(1).lower() if scheme else ""
    if name in ("postgresql", "postgres"):
        try:
            from govsync.state.postgres import PostgresStore
        except ModuleNotFoundError as exc:
            if exc.name not in ("psycopg", "psycopg_binary", "psycopg_c"):
                raise
            raise StateError(
                f"{safe_url(url)} needs PostgreSQL support, which is not installed: "
                "pip install 'govsync[postgres]'") from None
        return PostgresStore(url)
    if name not in ("", "sqlite"):
        raise StateError(
            f"unsupported state URL {safe_url(url)}: the scheme {name!r} is not a state "
            "backend; use a SQLite file path (e.g. .govsync/state.db, or sqlite:///path) "
            "or postgresql://user@host/database")
    from govsync.state.sqlite import SqliteStore

    path = sqlite_path(url)
    assert path is not None
    return SqliteStore(path)


def sqlite_path(url: str) -> str | None:
    """The file of a SQLite state URL (None for another backend)."""
    scheme = SCHEME.match(url)
    name = scheme.group(1).lower() if scheme else ""
    if name not in ("", "sqlite"):
        return None
    return url.removeprefix("sqlite:///").removeprefix("sqlite://")


def exists(url: str) -> bool:
    """Whether there is a state at ``url`` to read (a server backend always has one)."""
    path = sqlite_path(url)
    return path is None or os.path.lexists(path)


def empty_snapshot(workspace: str) -> Snapshot:
    """What a state that does not exist yet reads as: nothing recorded.  Its key is
    made up and thrown away, so nothing planned from it can be saved."""
    import secrets

    return Snapshot(workspace, "", 0, {}, secrets.token_bytes(32))


def safe_url(url: str) -> str:
    """The URL without a password or query values, for messages."""
    return redact.url(url)
