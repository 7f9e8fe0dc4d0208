"""Why a change is what it is: a typed reason (``Why`` and its data), decided once by the
planner and turned into words only by the renderers (``render/reasons.py``).

Nothing reads a reason's words back: advice is chosen from ``Why``, and a later
stage that needs to know why a change is blocked asks ``change.why.why``.  A saved
plan keeps the reason as its data (``as_dict``), so ``govsync show`` words it as
``plan`` did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any


class Why(StrEnum):
    """The reasons a plan gives, each with the data its words need (``Reason``)."""

    # -- a change blocked: nothing is sent for it, and plan and apply exit 1 ------------
    # fields no update covers (names: the fields; operation: the update, None: none)
    CANNOT_UPDATE = "cannot-update"
    # a secret's value changed (names: "VARIABLE spec.path" each; fields: other fields
    # no update covers)
    SECRET_ROTATED = "secret-rotated"
    # the object exists on the server unrecorded (id: the live one; detail: the recorded
    # id that is gone, if any)
    EXISTS = "exists-unrecorded"
    # the live object is recorded by another workspace of this state (id; names:
    # (workspace, address))
    OWNED = "owned-elsewhere"
    # terminationProtection is true (by: who asks; detail: "in state" or "live")
    PROTECTED = "protected"
    # the API cannot delete the kind (by)
    NO_DELETE = "no-delete"
    # the endpoint does not serve the operation (operation; by)
    ENDPOINT_LACKS = "endpoint-lacks"
    # objects that stay refer to it (names: "address (field)" each)
    REFERRED = "still-referred"
    # a move that would rename an object no update renames (detail: old address;
    # names: (old name, new name); operation: the update or None)
    RENAME = "rename"
    # an import whose object the read found absent (by; operation: the read)
    IMPORT_ABSENT = "import-absent"
    # an import whose live object differs where no update can change it (by;
    # operation: the read; fields; detail: the update or '')
    IMPORT_FIXED = "import-fixed-fields"
    # an import whose differences would send secrets no read returns (by; operation:
    # the read; fields; names: the secrets' paths; detail: the update)
    IMPORT_SECRETS = "import-secrets"
    # the service says the policy's code does not compile (detail: its error)
    CODE_INVALID = "code-invalid"
    # a create whose outcome is unknown and that no read settles (detail: why not)
    UNSETTLED = "unsettled"

    # -- why a change is not a plain create, update or no-op --------------------------
    MISSING = "missing"                # recorded, gone from the server: created again (id)
    SETTLED_ABSENT = "settled-absent"  # an unknown create a read found absent (operation)
    SETTLED_EXISTS = "settled-exists"  # an unknown create a read found (id; operation)
    REPLACE = "replace"                # --replace, or a reference that no update moves
    OUTSIDE = "outside"                # only puts back what changed outside govsync
    MOVED = "moved"                    # re-addressed (detail: the old address)
    IMPORTED = "imported"              # an Import document (by; detail: how it is taken)
    VERIFIED = "import-verified"       # an import its read verified (by; operation; fields)
    ORPHAN = "orphan"
    DELETE = "delete"                  # by: the Removed document, or prune
    FORGET = "forget"                  # by
    DEPOSED = "deposed"                # the old object of a replace left unfinished (id)
    GONE = "gone"                      # an object to end that the server no longer has
    UNREAD = "unread"                  # a replace-all update of an object not read (detail)
    UNCERTAIN_GONE = "uncertain-gone"  # an unknown create whose manifest is gone


# The reasons of a blocked change.
BLOCKING = frozenset({Why.CANNOT_UPDATE, Why.SECRET_ROTATED, Why.EXISTS, Why.OWNED,
                      Why.PROTECTED, Why.NO_DELETE, Why.ENDPOINT_LACKS, Why.REFERRED,
                      Why.RENAME, Why.IMPORT_ABSENT, Why.IMPORT_FIXED, Why.IMPORT_SECRETS,
                      Why.CODE_INVALID, Why.UNSETTLED})


@dataclass(frozen=True, slots=True)
class Reason:
    """A reason and its data.  Which fields a ``Why`` uses is said beside it."""

    why: Why
    by: str = ""                     # the document or setting that asks
    id: str | None = None
    operation: str | None = None
    fields: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    detail: str = ""

    @property
    def blocking(self) -> bool:
        return self.why in BLOCKING

    def as_dict(self) -> dict[str, Any]:
        """The reason as a saved plan and ``--format json`` keep it (defaults left out)."""
        out: dict[str, Any] = {"why": str(self.why)}
        for f in fields(self)[1:]:
            value = getattr(self, f.name)
            if value not in ("", None, ()):
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reason:
        """A reason as ``as_dict`` wrote it; ValueError for anything else."""
        if not isinstance(data, Mapping):
            raise ValueError("a reason is an object")
        known = {f.name for f in fields(cls)}
        if set(data) - known:
            raise ValueError(f"unknown reason field(s) {sorted(set(data) - known)}")
        why = Why(str(data.get("why")))
        out: dict[str, Any] = {}
        for name in ("by", "detail"):
            value = data.get(name, "")
            if not isinstance(value, str):
                raise ValueError(f"reason {name} is not a string")
            out[name] = value
        for name in ("id", "operation"):
            value = data.get(name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"reason {name} is not a string")
            out[name] = value
        for name in ("fields", "names"):
            value = data.get(name, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"reason {name} is not a list of strings")
            out[name] = tuple(value)
        return cls(why, **out)
