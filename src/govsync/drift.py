"""Drift: do reality, the recorded state and the repository agree?

Three sources of drift:

* the manifests against state: unapplied changes (create, update, blocked),
  orphans and uncertain entries, exactly as ``plan`` computes them;
* live checks, where the API offers a read: every group named by a policy
  owner must exist (ListGroups, every page);
* nothing else can be observed live: the API has no read operation for any
  managed kind, so drift says so plainly instead of pretending to check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from govsync.api.catalog import OPERATIONS
from govsync.manifests.loader import ManifestSet
from govsync.plan import NOOP, Change, Plan


@dataclass
class LiveCheck:
    name: str
    status: str  # passed | failed | skipped
    detail: str
    problems: list[dict[str, str]] = field(default_factory=list)


@dataclass
class DriftReport:
    plan: Plan
    live: list[LiveCheck]
    unobservable: list[str]

    @property
    def drifted(self) -> list[Change]:
        return [c for c in self.plan.changes if c.action != NOOP]

    @property
    def in_sync(self) -> bool:
        return not self.drifted and all(c.status != "failed" for c in self.live)

    def to_dict(self) -> dict[str, Any]:
        from govsync.render import plan_public

        body = plan_public(self.plan)
        body["changes"] = [c for c in body["changes"] if c["action"] != NOOP]
        return {
            "inSync": self.in_sync,
            **body,
            "live": [c.__dict__ for c in self.live],
            "unobservable": self.unobservable,
        }


def readable_kinds() -> set[str]:
    """Kinds some read operation returns (today: none of the managed kinds)."""
    return {op.kind for op in OPERATIONS if op.verb == "read" and op.kind}


def unobservable(manifests: ManifestSet) -> list[str]:
    kinds = {m.kind.name for m in manifests.objects.values()}
    return sorted(kinds - readable_kinds())


def group_check(manifests: ManifestSet, groups: set[str] | None, skipped: str) -> LiveCheck:
    """Every group a policy owner names must exist on the server."""
    wanted = sorted(
        (m.address, f, m.template[f])
        for m in manifests.objects.values()
        for f, _kind in m.kind.live_refs
        if isinstance(m.template.get(f), str)
    )
    if not wanted:
        return LiveCheck("groups", "passed", "no policy names a group")
    if groups is None:
        return LiveCheck("groups", "skipped", f"not checked: {skipped}")
    missing = [
        {"address": address, "field": f, "group": name,
         "message": f"{address}: group {name!r} ({f}) does not exist on the server"}
        for address, f, name in wanted if name not in groups
    ]
    if missing:
        return LiveCheck("groups", "failed", f"{len(missing)} of {len(wanted)} owner group(s) missing",
                         missing)
    return LiveCheck("groups", "passed", f"all {len(wanted)} owner group(s) exist")
