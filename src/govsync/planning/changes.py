"""What a plan holds: its actions (``Action``), one ``Change`` per address, the checks
made while planning, what a refresh found drifted, and the ``Plan`` itself.
``govsync.plan`` re-exports every name here (``from govsync.plan import Change``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple, TypedDict

from govsync import __version__
from govsync.planning.impact import Impact
from govsync.planning.reasons import Reason, Why


class Action(StrEnum):
    """What a plan does with an address (as Terraform's plans/action.go)."""

    CREATE = "create"
    UPDATE = "update"
    NOOP = "no-op"
    BLOCKED = "blocked"
    ORPHAN = "orphan"
    UNCERTAIN = "uncertain"
    MOVE = "move"
    IMPORT = "import"
    DELETE = "delete"
    REPLACE = "replace"
    FORGET = "forget"


# The actions apply sends a request for, or records in state.
WORK = frozenset({Action.CREATE, Action.UPDATE, Action.MOVE, Action.IMPORT, Action.DELETE,
                  Action.REPLACE, Action.FORGET})
# The actions that end an object (or govsync's record of it): apply makes them after
# every other change, dependants first.
ENDING = frozenset({Action.DELETE, Action.FORGET})


class CheckStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    WARNING = "warning"


@dataclass
class FieldChange:
    """One field that a change alters: its dotted path, its value before and after (secrets
    masked)."""

    path: str
    before: Any
    after: Any

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.path, "before": self.before, "after": self.after}


class CaseStatus(StrEnum):
    """A test case's outcome (``govsync test``, and a plan's tests)."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"


class Service(StrEnum):
    """What the service said of a policy's code (GetPolicyCodeValidity)."""

    VALID = "valid"
    INVALID = "invalid"
    UNKNOWN = "unknown"   # not asked: the plan says why (its "policy code" check)


class CaseRun(NamedTuple):
    """One case of a policy's tests on a plan: its status with the new code, and the
    decisions of the new code (``after``) and of the recorded code (``before``)."""

    test: str
    case: str
    stage: str
    status: CaseStatus
    message: str = ""
    before: Any = None
    after: Any = None

    def as_dict(self) -> dict[str, Any]:
        return {"test": self.test, "case": self.case, "stage": self.stage,
                "status": self.status, "message": self.message}


@dataclass(frozen=True)
class PolicyTests:
    """A created or code-changed policy's tests, as the plan shows them (contract section
    13): the counts, each case, and the cases whose decision the change alters (for a
    changed policy: ``recorded`` says the recorded code was read).  ``compiles``: the
    offline compiler's first error ('' : it compiles); ``service``: what
    GetPolicyCodeValidity said."""

    cases: tuple[CaseRun, ...] = ()
    recorded: bool = False
    compiles: str = ""
    service: Service = Service.UNKNOWN

    def count(self, status: CaseStatus) -> int:
        return sum(1 for c in self.cases if c.status == status)

    @property
    def changed(self) -> tuple[CaseRun, ...]:
        """The cases whose decision differs between the recorded code and the new."""
        if not self.recorded:
            return ()
        return tuple(c for c in self.cases if c.before != c.after)

    def as_dict(self) -> dict[str, Any]:
        """``"tests"`` of a change in JSON (and what rules see as ``change.tests``)."""
        return {"passed": self.count(CaseStatus.PASSED),
                "failed": self.count(CaseStatus.FAILED),
                "errors": self.count(CaseStatus.ERROR),
                "changed": [{"test": c.test, "case": c.case, "before": c.before,
                             "after": c.after} for c in self.changed],
                "cases": [c.as_dict() for c in self.cases],
                "compiles": not self.compiles, "compileError": self.compiles,
                "service": self.service}

    def saved(self) -> dict[str, Any]:
        """What a saved plan keeps, to be read back (``from_saved``)."""
        return {"cases": [[*c[:4], c.message, c.before, c.after] for c in self.cases],
                "recorded": self.recorded, "compiles": self.compiles,
                "service": self.service}

    @classmethod
    def from_saved(cls, data: Any) -> PolicyTests:
        """What ``saved`` wrote; ValueError or TypeError for anything else."""
        if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
            raise TypeError("tests must be {cases, recorded, compiles, service}")
        cases = []
        for item in data["cases"]:
            if (not isinstance(item, list) or len(item) != 7
                    or not all(isinstance(v, str) for v in item[:5])):
                raise TypeError("a test case must be [test, case, stage, status, message, "
                                "before, after]")
            cases.append(CaseRun(item[0], item[1], item[2], CaseStatus(item[3]), item[4],
                                 item[5], item[6]))
        compiles = data.get("compiles", "")
        if not isinstance(compiles, str) or not isinstance(data.get("recorded"), bool):
            raise TypeError("tests' compiles is a text and recorded a boolean")
        return cls(tuple(cases), data["recorded"], compiles, Service(str(data.get("service"))))


@dataclass(slots=True)
class Change:
    """What the plan does to one address: its action, why, and what apply sends."""

    address: str
    action: Action
    kind: str
    id: str | None = None
    # Tuples, shared when empty: a no-op change of 100,000 allocates nothing more.
    fields: tuple[str, ...] = ()
    diff: tuple[FieldChange, ...] = ()
    # Why (typed: the renderers word it, render/reasons.py); None: a plain create,
    # update or no-op.
    why: Reason | None = None
    # What apply sends, before wrapping: references to objects this plan
    # creates stay ``Ref``; secrets are ``PlannedSecret`` (values.py).
    request: dict[str, Any] | None = None
    operation: str | None = None
    # Addresses this change must wait for (references and dependsOn).
    after: tuple[str, ...] = ()
    # Spec fields a Patch set -> which patch (shown by `plan -v`).
    patched: dict[str, str] | None = None
    # A move: the address the state entry has now.
    moved_from: str | None = None
    # The fields changed outside govsync since it last applied (refresh).
    outside: tuple[FieldChange, ...] = ()
    # Fields an update sends as the server holds them, whatever the manifest says
    # (ignoreChanges): never diffed, never changed.
    kept: tuple[str, ...] = ()
    # A created or code-changed policy's tests (policytests.annotate, after the plan is
    # decided): shown, seen by rules as change.tests, never sent.
    tests: PolicyTests | None = None
    # A created or code-changed policy's impact over logged traffic (plan --impact,
    # --impact-from): shown, seen by rules as change.impact, never sent.
    impact: Impact | None = None

    def public(self, reason: str = "") -> dict[str, Any]:
        """What users see of a change (``--format json``): no request.  ``reason``: its
        reason in words (the renderer's, ``render.reason_words``)."""
        body: dict[str, Any] = {
            "address": self.address,
            "action": self.action,
            "kind": self.kind,
            "id": self.id,
            "fields": self.fields,
            "reason": reason,
            "diff": [d.as_dict() for d in self.diff],
        }
        if self.why is not None:
            body["why"] = self.why.as_dict()
        if self.patched:
            body["patchedBy"] = self.patched
        if self.moved_from:
            body["movedFrom"] = self.moved_from
        if self.outside:
            body["outside"] = [d.as_dict() for d in self.outside]
        if self.kept:
            body["kept"] = list(self.kept)
        if self.tests is not None:
            body["tests"] = self.tests.as_dict()
        if self.impact is not None:
            body["impact"] = self.impact.as_dict()
        return body

    def patch_of(self, path: str) -> str | None:
        """The patch that set ``path`` or a field above or below it, if one did."""
        for field_path, patch in (self.patched or {}).items():
            if (path == field_path or path.startswith(field_path + ".")
                    or field_path.startswith(path + ".") or path.startswith(field_path + "[")):
                return patch
        return None


# The name of the plan's check that says what a refresh read (refresh.annotate).
REFRESH_CHECK = "refresh"
# The name of the plan's check that says what the service said of policies' code.
CODE_CHECK = "policy code"


class DriftKind(StrEnum):
    """How a recorded object differs from the server (refresh)."""

    CHANGED = "changed"
    MISSING = "missing"


class Drifted(NamedTuple):
    """A recorded object changed outside govsync (its fields), or missing on the server."""

    address: str
    kind: DriftKind
    diff: tuple[FieldChange, ...] = ()
    id: str | None = None

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(d.path for d in self.diff)

    def as_dict(self) -> dict[str, Any]:
        return {"address": self.address, "kind": self.kind, "fields": list(self.fields),
                "id": self.id, "diff": [d.as_dict() for d in self.diff]}


@dataclass
class Check:
    """A check made while planning (live groups, the lock, guardrail rules) and its outcome."""

    name: str
    status: CheckStatus
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "detail": self.detail}


# A plan's change of its workspace's governance: the record it finds ("from"; None
# where a saved plan recorded none) and the one it records ("to"), each as
# governance.Governance.as_dict writes it.  A dict (JSON in a saved plan), typed.
GovernanceChange = TypedDict("GovernanceChange", {"from": dict[str, Any] | None,
                                                  "to": dict[str, Any]})


@dataclass(repr=False)
class Plan:
    """The changes that bring a workspace from its recorded state (lineage and serial) to
    the manifests (digest)."""

    workspace: str
    lineage: str
    serial: int
    digest: str
    changes: list[Change]
    checks: list[Check] = field(default_factory=list)
    version: str = __version__
    # --target patterns, and how many changes they left out.
    targets: list[str] = field(default_factory=list)
    left_out: int = 0
    # What the state held when the plan was saved (Snapshot.content_digest).
    state_digest: str = ""
    # The git commit of the manifests a saved plan was made from ({commit, dirty}).
    git: dict[str, Any] | None = None
    # A random id: a saved plan applies at most once, and approvals name it.
    id: str = ""
    # The project's environment the plan was made for (None: none).
    environment: str | None = None
    # The state a saved plan was made against, without credentials ('' : not recorded).
    state: str = ""
    # The workspace's governance it changes: {from, to} (governance.change), or None.
    governance: GovernanceChange | None = None
    # False: made without reading secrets' values (for review only).
    secrets_read: bool = True
    # What a refresh found changed outside govsync or missing (empty: nothing, or no
    # refresh), and whether the server was read at all.
    drift: list[Drifted] = field(default_factory=list)
    refreshed: bool = False

    def __repr__(self) -> str:
        # A count, not every change: asyncio.run formats its task's result
        # (this plan) while restoring the SIGINT handler, and a dataclass repr
        # of 1,000 changes cost 13 ms at the end of every apply.
        counts = ", ".join(f"{n} {a}" for a, n in self.summary().items() if n)
        return (f"Plan(workspace={self.workspace!r}, serial={self.serial}, "
                f"{len(self.changes)} changes{': ' + counts if counts else ''})")

    def summary(self) -> dict[str, int]:
        counts = dict.fromkeys(Action, 0)
        for change in self.changes:
            counts[change.action] += 1
        return {str(action): n for action, n in counts.items()}

    def has_changes(self) -> bool:
        return self.governance is not None or any(c.action != Action.NOOP
                                                  for c in self.changes)

    def caught_up(self) -> list[Change]:
        """No-ops whose manifest now matches what changed outside govsync: nothing is
        sent, and apply records the live object (as Terraform's apply keeps its refresh)."""
        return [c for c in self.changes if c.action == Action.NOOP and c.request is not None]

    def blocked(self) -> list[Change]:
        return [c for c in self.changes if c.action == Action.BLOCKED]

    def blocked_by(self, *reasons: Why) -> list[Change]:
        """The blocked changes whose reason is one of ``reasons``."""
        return [c for c in self.blocked() if c.why is not None and c.why.why in reasons]

    def work(self, *, forget_orphans: bool = False) -> list[Change]:
        """The changes apply acts on: requests to send, and orphans to forget if asked."""
        return [c for c in self.changes
                if c.action in WORK or (forget_orphans and c.action == Action.ORPHAN)]


Environ = Mapping[str, str]
