"""The state store: what govsync has applied, per workspace and address.

Per address it keeps the object's id, the spec last applied (resolved
request; secrets only as keyed fingerprints) and the API's answer (secrets
scrubbed).  A workspace has a lineage (a random id fixed when it is created)
and a serial that increases on every write, so a saved plan can tell that
the state moved on.  Each write is its own transaction.

Statuses of an entry:

* ``applied``   the object exists; ``id`` and ``spec`` are known.
* ``pending``   a create is about to be sent (the intent); if govsync dies
                before the answer, the next run treats it as uncertain.
* ``uncertain`` a create was sent and its outcome is unknown; apply never
                repeats it blindly (``govsync state resolve`` settles it).
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import json
import os
import socket
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

APPLIED, PENDING, UNCERTAIN = "applied", "pending", "uncertain"
FINGERPRINT_PREFIX = "hmac-sha256:"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass
class Entry:
    address: str
    kind: str
    id: str | None
    status: str
    spec: dict[str, Any] | None = None
    response: dict[str, Any] | None = None
    updated_at: str = ""

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


@dataclass
class Snapshot:
    """One consistent read of a workspace."""

    workspace: str
    lineage: str
    serial: int
    entries: dict[str, Entry]
    key: bytes = field(repr=False, default=b"")

    def fingerprint(self, value: str) -> str:
        """A keyed fingerprint of a secret value: comparable, never reversible."""
        digest = hmac.new(self.key, value.encode(), hashlib.sha256).hexdigest()
        return FINGERPRINT_PREFIX + digest


@dataclass
class LockHolder:
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
        return cls(user, socket.gethostname(), os.getpid(), command[:200], now())

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def __str__(self) -> str:
        return f"{self.user}@{self.host} pid {self.pid} since {self.since} ({self.command})"


class StateStore(ABC):
    """What every backend provides.  Plan uses ``snapshot`` only, without the lock."""

    url: str

    # -- read ---------------------------------------------------------------
    @abstractmethod
    def snapshot(self, workspace: str, *, responses: bool = True) -> Snapshot:
        """Read a workspace (created empty, with lineage and key, on first use).

        ``responses=False`` leaves the API's answers out (None): planning does
        not need them, and parsing them is most of reading a large state."""

    @abstractmethod
    def workspaces(self) -> list[str]: ...

    @abstractmethod
    def history(self, workspace: str, limit: int = 50) -> list[dict[str, Any]]: ...

    # -- write (each call one transaction, bumping the serial) --------------
    @abstractmethod
    def put(self, workspace: str, entry: Entry) -> int:
        """Insert or replace one entry; returns the new serial."""

    @abstractmethod
    def remove(self, workspace: str, address: str) -> int:
        """Drop one entry; returns the new serial."""

    @abstractmethod
    def replace_all(self, workspace: str, entries: list[Entry], lineage: str | None,
                    key: bytes | None) -> int:
        """Replace a workspace's entries (state import-all)."""

    @abstractmethod
    def add_history(self, workspace: str, record: dict[str, Any]) -> None: ...

    # -- lock ---------------------------------------------------------------
    @abstractmethod
    def acquire(self, workspace: str, holder: LockHolder, timeout: float = 0.0) -> None:
        """Take the workspace lock or raise StateLockedError naming the holder."""

    @abstractmethod
    def release(self, workspace: str) -> None: ...

    @abstractmethod
    def holder(self, workspace: str) -> LockHolder | None: ...

    @abstractmethod
    def force_unlock(self, workspace: str) -> LockHolder | None:
        """Clear a lock left behind; returns who held it."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(url: str) -> StateStore:
    """A store for ``url``: a SQLite path (default) or ``postgresql://...``."""
    if url.startswith(("postgresql://", "postgres://")):
        from govsync.state.postgres import PostgresStore

        return PostgresStore(url)
    from govsync.state.sqlite import SqliteStore

    return SqliteStore(url.removeprefix("sqlite:///").removeprefix("sqlite://"))


def safe_url(url: str) -> str:
    """The URL without a password, for messages."""
    if "://" in url and "@" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}" if ":" in creds else f"{scheme}://{user}@{host}"
    return url
