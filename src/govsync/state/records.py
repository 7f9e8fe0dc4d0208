"""What the state records: entries, snapshots of a workspace, lock holders.

Per address the state keeps the object's id, the spec last applied (resolved
request; secrets only as keyed fingerprints) and the API's answer (secrets
scrubbed).  A workspace has a lineage (a random id fixed when it is created)
and a serial that increases on every write, so a saved plan can tell that
the state moved on.

Statuses of an entry (``EntryStatus``):

* ``applied``   the object exists; ``id`` and ``spec`` are known.
* ``pending``   a create is about to be sent (the intent); if govsync dies
                before the answer, the next run treats it as uncertain.
* ``uncertain`` a create was sent and its outcome is unknown; apply never
                repeats it blindly (``govsync state resolve`` settles it).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from govsync import redact
from govsync.errors import StateError


class EntryStatus(StrEnum):
    """The status of a state entry (stored and exported as its value)."""

    APPLIED = "applied"
    PENDING = "pending"
    UNCERTAIN = "uncertain"


APPLIED, PENDING, UNCERTAIN = EntryStatus.APPLIED, EntryStatus.PENDING, EntryStatus.UNCERTAIN
FINGERPRINT_PREFIX = "hmac-sha256:"

# A replace records the object it replaces under a second address before it creates the
# new one ("deposed", as Terraform calls it): Kind/name/deposed/ID.  A name holds no
# "/", so no manifest has such an address; the next plan deletes what a replace that
# did not finish left there.
_DEPOSED = "/deposed/"


def deposed_address(address: str, object_id: str) -> str:
    """Where a replace records the object it replaces while the new one is made."""
    return f"{address}{_DEPOSED}{object_id}"


def deposed_of(address: str) -> str | None:
    """The address a deposed entry's object was replaced at (None: not a deposed entry)."""
    head, found, _ = address.partition(_DEPOSED)
    return head if found else None


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
    try:
        return EntryStatus(entry.status)
    except ValueError:
        raise StateError(f"{entry.address}: unknown entry status {entry.status!r} "
                         f"(known: {', '.join(EntryStatus)})") from None


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
        # getpass and socket (5 ms): for the one who takes a lock, not for every read.
        import getpass
        import socket

        try:
            user = getpass.getuser()
        except Exception:  # no user name in some containers
            user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
        return cls(user, socket.gethostname(), os.getpid(), recorded_command(sys.argv), now())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LockHolder:
        """Tolerates records written by another govsync version (extra or missing keys);
        a command line recorded whole by an older version is cut as ``me`` cuts one."""
        return cls(str(data.get("user", "")), str(data.get("host", "")),
                   int(data.get("pid") or 0),
                   recorded_command(str(data.get("command", "")).split()),
                   str(data.get("since", "")))

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def unknown(cls) -> LockHolder:
        return cls("unknown", "unknown", 0, "another process", "")

    def __str__(self) -> str:
        return f"{self.user}@{self.host} pid {self.pid} since {self.since} ({self.command})"


def recorded_command(argv: list[str]) -> str:
    """What a record keeps of a command line: the program and its subcommand (the words
    before the first option), URLs in them masked (``redact``).  Never the options:
    ``--state postgresql://owner:PASSWORD@...`` or ``--repo https://user:TOKEN@...``
    would put a credential where the read-only role, a plan comment, the agent's API
    and its messages show it."""
    words: list[str] = []
    for i, arg in enumerate(argv):
        if arg.startswith("-"):
            break
        words.append(redact.in_text(os.path.basename(arg) if i == 0 else arg))
    return " ".join(words)[:200]


def lock_lost(workspace: str, why: str) -> str:
    """The message of a LockLostError."""
    return (f"the lock on workspace {workspace!r} was lost ({why}): this apply sends nothing "
            "more; run `govsync plan` to see what is uncertain")


def leadership_lost(workspace: str, why: str) -> str:
    """The message of a LockLostError for an agent's lost leadership."""
    return (f"this agent no longer leads workspace {workspace!r} ({why}): it records "
            "nothing more for it")


def empty_snapshot(workspace: str) -> Snapshot:
    """What a state that does not exist yet reads as: nothing recorded.  Its key is
    made up and thrown away, so nothing planned from it can be saved."""
    return Snapshot(workspace, "", 0, {}, os.urandom(32))  # as secrets.token_bytes


# -- a change of the governance record outside govsync (issue 30) --------------------

# The history record a backend's trigger writes when the governance record of a
# workspace changes in a write that is not govsync's own (``StateStore.set_governance``
# marks its own): ``govsync audit export`` lists it.
GOVERNANCE_CHANGED = "governance-changed"
CHANGED_OUTSIDE = "an UPDATE of the governance record outside govsync"


# -- the agent's records (contract section 9) ------------------------------------------

# The agent's values of a workspace (``StateStore.agent``).
AGENT_LEADER = "leader"
AGENT_CYCLE = "cycle"


def merged_cycle(newest: dict[str, Any] | None, record: dict[str, Any]) -> dict[str, Any] | None:
    """``record`` merged into ``newest`` (the workspace's newest history record) when
    both are agent cycles with one ``key``; None when it is to be appended."""
    if (newest is None or newest.get("type") != record.get("type")
            or record.get("key") is None or newest.get("key") != record.get("key")):
        return None
    cycles = newest.get("cycles")
    return {**record, "since": newest.get("since") or newest.get("at"),
            "cycles": (cycles if isinstance(cycles, int) else 1) + 1}


def leader_record(holder: LockHolder, epoch: int, previous: Any) -> dict[str, Any]:
    """The agent's value ``leader``: who leads, since when, with which epoch, who led
    before (None: nobody), and whether it took over (the one before never gave it
    back: it was killed or cut off).  A leader that stops records ``released``."""
    before = previous.get("holder") if isinstance(previous, dict) else None
    before = before if isinstance(before, dict) else None
    # A leader that ended without giving its leadership back (killed, or cut off).
    took_over = before is not None and not (isinstance(previous, dict)
                                            and previous.get("released"))
    return {"holder": holder.as_dict(), "epoch": epoch, "since": now(), "previous": before,
            "tookOver": took_over}


def leader_epoch(value: Any) -> int:
    """The epoch of a recorded ``leader`` value (0: none, or unreadable)."""
    epoch = value.get("epoch") if isinstance(value, dict) else None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else 0
