"""Drift: do reality, the recorded state and the repository agree?

Three sources of drift:

* the manifests against state: unapplied changes (create, update, blocked),
  orphans and uncertain entries, exactly as ``plan`` computes them;
* live checks, where the API offers a read: every group named by a policy
  owner must exist (ListGroups, every page);
* refresh, where the endpoint offers the reads of api-lifecycle.md: every
  recorded object read back, changed outside govsync or missing
  (``refresh.py``); what cannot be read is said plainly, never pretended.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from govsync.api.catalog import readable_kinds
from govsync.api.kinds import BY_KIND, KINDS, Kind, LiveRef
from govsync.api.resource import readable
from govsync.live import LiveValue, missing
from govsync.manifests.manifest import ManifestSet
from govsync.plan import Action, Change, CheckStatus, Drifted, Plan


@dataclass
class LiveCheck:
    name: str
    status: CheckStatus
    detail: str
    problems: list[dict[str, str]] = field(default_factory=list)


@dataclass
class DriftReport:
    plan: Plan
    live: list[LiveCheck]
    unobservable: list[str]

    @property
    def drifted(self) -> list[Change]:
        return [c for c in self.plan.changes if c.action != Action.NOOP]

    @property
    def outside(self) -> list[Drifted]:
        """Recorded objects changed outside govsync or missing on the server (refresh)."""
        return self.plan.drift

    @property
    def in_sync(self) -> bool:
        return (not self.drifted and not self.outside
                and all(c.status != CheckStatus.FAILED for c in self.live))


def unobservable(manifests: ManifestSet, read: Collection[str] | None = None) -> list[str]:
    """The manifests' kinds that cannot be read live (``read``: the kinds a refresh read;
    None: no refresh, so the kinds no read of the API finds)."""
    kinds = {m.kind.name for m in manifests.objects.values()}
    if read is None:
        return sorted(k for k in kinds - readable_kinds() if not readable(BY_KIND[k]))
    return sorted(kinds - readable_kinds() - set(read))


def live_checks(values: list[LiveValue], existing: Mapping[str, set[str]] | None,
                skipped: str) -> list[LiveCheck]:
    """One check per live reference of the table of kinds: every object a
    manifest names there (a policy's owner group) must exist on the server."""
    return [_live_check(kind, ref, [v for v in values if v.ref == ref], existing, skipped)
            for kind in KINDS for ref in kind.live_refs]


def _live_check(kind: Kind, ref: LiveRef, values: list[LiveValue],
                existing: Mapping[str, set[str]] | None, skipped: str) -> LiveCheck:
    target = ref.word
    if not values:
        return LiveCheck(ref.check, CheckStatus.PASSED,
                         f"no {kind.name.lower()} names a {target}")
    if existing is None:
        return LiveCheck(ref.check, CheckStatus.SKIPPED, f"not checked: {skipped}")
    absent = [
        {"address": v.manifest.address, "field": v.ref.field, target: v.value,
         "message": f"{v.manifest.address}: {target} {v.value!r} ({v.ref.field}) does not "
                    "exist on the server"}
        for v in missing(values, existing)
    ]
    if absent:
        return LiveCheck(ref.check, CheckStatus.FAILED,
                         f"{len(absent)} of {len(values)} {ref.noun}(s) missing", absent)
    return LiveCheck(ref.check, CheckStatus.PASSED, f"all {len(values)} {ref.noun}(s) exist")
