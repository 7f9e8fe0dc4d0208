"""Plan: one action per address, from manifests against recorded state.

=========  ==========================================================
create     in the manifests, not in state
update     in both, spec differs, the kind's update covers every change
no-op      in both, same resolved spec
blocked    in both, spec differs, the API cannot make the change
orphan     in state, no longer in the manifests (the API cannot delete)
uncertain  a create whose outcome is unknown (sent, no answer)
=========  ==========================================================

Specs are compared *resolved*: references become the ids recorded in state
(or ``(known after apply)`` for objects this plan creates), secrets become
keyed fingerprints of their current values.  A saved plan holds the
templates with those markers, never a secret value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from govsync import __version__
from govsync.api.kinds import Kind
from govsync.errors import ManifestError, Problem
from govsync.manifests.loader import REF, SECRET, Manifest, ManifestSet
from govsync.state.base import APPLIED, PENDING, UNCERTAIN, Snapshot

CREATE, UPDATE, NOOP, BLOCKED, ORPHAN = "create", "update", "no-op", "blocked", "orphan"
ACTIONS = (CREATE, UPDATE, NOOP, BLOCKED, ORPHAN, UNCERTAIN)
KNOWN_AFTER_APPLY = "(known after apply)"
SENSITIVE = "(sensitive)"
PLAN_FORMAT = 1


@dataclass
class FieldChange:
    path: str
    before: Any
    after: Any

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.path, "before": self.before, "after": self.after}


@dataclass
class Change:
    address: str
    action: str
    kind: str
    id: str | None = None
    fields: list[str] = field(default_factory=list)
    diff: list[FieldChange] = field(default_factory=list)
    reason: str = ""
    # What apply sends, before wrapping: the resolved template.  References
    # to objects created by this plan stay {"$ref": address}; secrets are
    # {"$secret": {"env": VAR, "fingerprint": ...}}.
    request: dict[str, Any] | None = None
    operation: str | None = None
    # Addresses this change must wait for (references and dependsOn).
    after: list[str] = field(default_factory=list)

    def public(self) -> dict[str, Any]:
        """What users see of a change (``--format json``): no request, no markers."""
        return {
            "address": self.address,
            "action": self.action,
            "kind": self.kind,
            "id": self.id,
            "fields": self.fields,
            "reason": self.reason,
            "diff": [d.as_dict() for d in self.diff],
        }


@dataclass
class Check:
    name: str
    status: str  # passed | failed | skipped
    detail: str = ""


@dataclass
class Plan:
    workspace: str
    lineage: str
    serial: int
    digest: str
    changes: list[Change]
    checks: list[Check] = field(default_factory=list)
    version: str = __version__

    def summary(self) -> dict[str, int]:
        counts = dict.fromkeys(ACTIONS, 0)
        for change in self.changes:
            counts[change.action] += 1
        return counts

    def has_changes(self) -> bool:
        return any(c.action != NOOP for c in self.changes)

    def blocked(self) -> list[Change]:
        return [c for c in self.changes if c.action == BLOCKED]

    def to_dict(self) -> dict[str, Any]:
        """The saved-plan document (also the base of ``--format json``)."""
        return {
            "format": PLAN_FORMAT,
            "govsyncVersion": self.version,
            "workspace": self.workspace,
            "lineage": self.lineage,
            "serial": self.serial,
            "manifestsDigest": self.digest,
            "checks": [c.__dict__ for c in self.checks],
            "changes": [
                {**c.public(), "operation": c.operation, "after": c.after, "request": c.request}
                for c in self.changes
            ],
            "summary": self.summary(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        changes = [
            Change(
                address=c["address"], action=c["action"], kind=c["kind"], id=c.get("id"),
                fields=list(c.get("fields", [])), reason=c.get("reason", ""),
                diff=[FieldChange(d["field"], d["before"], d["after"]) for d in c.get("diff", [])],
                request=c.get("request"), operation=c.get("operation"),
                after=list(c.get("after", [])),
            )
            for c in data["changes"]
        ]
        return cls(
            workspace=data["workspace"], lineage=data["lineage"], serial=data["serial"],
            digest=data["manifestsDigest"], changes=changes,
            checks=[Check(**c) for c in data.get("checks", [])],
            version=data.get("govsyncVersion", ""),
        )


Environ = Mapping[str, str]


def make_plan(
    manifests: ManifestSet,
    snapshot: Snapshot,
    *,
    environ: Environ | None = None,
) -> Plan:
    """Diff ``manifests`` against ``snapshot``.  Raises ManifestError for a
    missing secret variable."""
    env = os.environ if environ is None else environ
    entries = snapshot.entries
    problems: list[Problem] = []
    changes: list[Change] = []
    actions: dict[str, str] = {}
    if len(manifests.order) != len(manifests.objects):
        from govsync.graph import order

        manifests.order = order(manifests.objects)
    for address in manifests.order:
        manifest = manifests.objects[address]
        entry = entries.get(address)
        request, resolved = resolve(manifest, snapshot, actions, env, problems)
        deps = sorted({a for _, a in manifest.refs} | set(manifest.depends_on))
        kind = manifest.kind
        if entry is None:
            change = Change(address, CREATE, kind.name, fields=sorted(request),
                            request=request, operation=kind.create_op, after=deps)
        elif entry.status in (PENDING, UNCERTAIN):
            change = Change(address, UNCERTAIN, kind.name, id=entry.id, reason=(
                "a create was sent but its outcome is unknown; run `govsync state resolve "
                f"{address} --id ID` if it exists on the server, or `--absent` if not"))
        elif entry.spec == resolved:
            change = Change(address, NOOP, kind.name, id=entry.id)
        else:
            change = _changed(manifest, entry.id, entry.spec or {}, resolved, request, deps)
        actions[address] = change.action
        changes.append(change)
    for address in sorted(entries.keys() - manifests.objects.keys()):
        entry = entries[address]
        if entry.status in (PENDING, UNCERTAIN):
            changes.append(Change(address, UNCERTAIN, entry.kind, id=entry.id, reason=(
                "a create was sent but its outcome is unknown, and the manifest is gone; "
                f"run `govsync state resolve {address} --id ID` or `--absent`")))
        else:
            changes.append(Change(address, ORPHAN, entry.kind, id=entry.id, reason=(
                "no longer in the manifests; the API cannot delete it, so it stays on the "
                "server; `govsync apply --forget-orphans` drops it from state")))
    if problems:
        raise ManifestError(problems)
    return Plan(snapshot.workspace, snapshot.lineage, snapshot.serial, manifests.digest, changes)


def resolve(
    manifest: Manifest,
    snapshot: Snapshot,
    actions: Mapping[str, str],
    env: Environ,
    problems: list[Problem],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(request for apply, resolved spec for comparison)."""
    request = dict(manifest.template)
    resolved = dict(manifest.template)
    entries = snapshot.entries
    for field_name, value in manifest.template.items():
        if isinstance(value, dict) and REF in value:
            target = value[REF]
            entry = entries.get(target)
            if entry is not None and entry.status == APPLIED and actions.get(target) != CREATE:
                request[field_name] = resolved[field_name] = entry.id
            else:
                resolved[field_name] = KNOWN_AFTER_APPLY
    for path in manifest.kind.secrets:
        keys = path.split(".")
        holder = _dig(manifest.template, keys[:-1])
        if not isinstance(holder, dict) or not isinstance(holder.get(keys[-1]), dict):
            continue
        variable = holder[keys[-1]][SECRET]
        value = env.get(variable)
        if value is None or value == "":
            problems.append(Problem(
                *manifest.where(f"spec.{path}"),
                f"{manifest.address}: environment variable {variable} (secret spec.{path}) is "
                "not set: export it before running govsync",
            ))
            continue
        fingerprint = snapshot.fingerprint(value)
        _set(request, keys, {SECRET: {"env": variable, "fingerprint": fingerprint}})
        _set(resolved, keys, fingerprint)
    return request, resolved


def missing_secrets(manifests: ManifestSet, environ: Environ) -> list[Problem]:
    """A problem for each ``{fromEnv: VAR}`` whose variable is not set.

    Checked before the state is opened, so a plan that cannot run leaves no
    trace (not even a new state file)."""
    problems: list[Problem] = []
    for address in sorted(manifests.objects):
        manifest = manifests.objects[address]
        for path in manifest.kind.secrets:
            marker = _dig(manifest.template, path.split("."))
            if isinstance(marker, dict) and SECRET in marker and not environ.get(marker[SECRET]):
                problems.append(Problem(
                    *manifest.where(f"spec.{path}"),
                    f"{address}: environment variable {marker[SECRET]} (secret spec.{path}) is "
                    "not set: export it before running govsync",
                ))
    return problems


def _dig(data: Any, keys: list[str]) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _set(data: dict[str, Any], keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        data[key] = dict(data[key])
        data = data[key]
    data[keys[-1]] = value


def _changed(
    manifest: Manifest,
    object_id: str | None,
    before: dict[str, Any],
    after: dict[str, Any],
    request: dict[str, Any],
    deps: list[str],
) -> Change:
    kind = manifest.kind
    diff = field_diff(kind, before, after)
    top = sorted({k for k in before.keys() | after.keys() if before.get(k) != after.get(k)})
    cannot = [f for f in top if not kind.can_update(f)]
    fields = [d.path for d in diff]
    if not cannot and kind.update_op:
        return Change(manifest.address, UPDATE, kind.name, id=object_id, fields=fields,
                      diff=diff, request=request, operation=kind.update_op, after=deps)
    return Change(manifest.address, BLOCKED, kind.name, id=object_id, fields=fields, diff=diff,
                  reason=blocked_reason(kind, cannot))


def blocked_reason(kind: Kind, fields: list[str]) -> str:
    names = ", ".join(fields)
    if kind.update_op is None:
        why = f"the API has no operation that updates a {kind.name}"
    else:
        why = f"{kind.update_op} can change only {kind.changeable}"
    return (
        f"cannot change {names}: {why}. Revert the change in the manifest, or create a new "
        f"{kind.name} under a new name (the old one stays on the server: the API cannot delete)"
    )


def field_diff(kind: Kind, before: dict[str, Any], after: dict[str, Any]) -> list[FieldChange]:
    """Leaf-level changes (deepdiff), secrets and unknown ids shown as such."""
    from deepdiff import DeepDiff

    secret_paths = set(kind.secrets)
    out: list[FieldChange] = []
    tree = DeepDiff(before, after, verbose_level=2, view="tree")
    for items in tree.values():
        for item in items:
            parts = item.path(output_format="list")
            path = _path_text(parts)
            plain = ".".join(str(p) for p in parts)
            hidden = any(plain == s or plain.startswith(s + ".") for s in secret_paths)
            # A whole object that appears or goes may hold secrets below it.
            inner = [s[len(plain) + 1:] for s in secret_paths if s.startswith(plain + ".")]
            old = _masked(_shown(item.t1, hidden), inner)
            new = _masked(_shown(item.t2, hidden), inner)
            out.append(FieldChange(path, old, new))
    out.sort(key=lambda d: d.path)
    return out


def _path_text(parts: list[Any]) -> str:
    text = ""
    for p in parts:
        text += f"[{p}]" if isinstance(p, int) else (f".{p}" if text else str(p))
    return text


def _masked(value: Any, inner_paths: list[str]) -> Any:
    """``value`` with every secret at the dotted ``inner_paths`` shown as sensitive."""
    if not inner_paths or not isinstance(value, dict):
        return value
    value = dict(value)
    for path in inner_paths:
        head, _, rest = path.partition(".")
        if head not in value:
            continue
        value[head] = _masked(value[head], [rest]) if rest else SENSITIVE
    return value


def _shown(value: Any, hidden: bool) -> Any:
    from deepdiff.helper import NotPresent

    if isinstance(value, NotPresent):
        return None
    if hidden:
        return SENSITIVE
    return value


def live_refs_to_check(
    plan: Plan, manifests: ManifestSet, *, only_creates: bool = False
) -> list[tuple[Manifest, str, str]]:
    """(manifest, field, value) of the live references to check.

    ``plan`` checks every policy; ``apply`` only those it creates (the field
    cannot change after create), so an apply with nothing to do sends nothing.
    """
    if only_creates:
        addresses = sorted(c.address for c in plan.changes if c.action == CREATE)
    else:
        addresses = sorted(manifests.objects)
    return [
        (m, field_name, m.template[field_name])
        for address in addresses
        for m in [manifests.objects[address]]
        for field_name, _kind in m.kind.live_refs
        if isinstance(m.template.get(field_name), str)
    ]


def check_live_refs(
    plan: Plan,
    wanted: list[tuple[Manifest, str, str]],
    groups: set[str] | None,
    skipped: str,
) -> None:
    """Record the group check on ``plan``; ManifestError for unknown groups."""
    if not wanted:
        return
    if groups is None:
        plan.checks.append(Check("groups", "skipped", f"policy owner groups not checked: {skipped}"))
        return
    problems = [
        Problem(*m.where(f"spec.{f}"),
                f"{m.address}: spec.{f} names group {name!r}, which does not exist on the server "
                "(ListGroups); create the group or fix the name")
        for m, f, name in wanted if name not in groups
    ]
    if problems:
        raise ManifestError(problems)
    plan.checks.append(Check("groups", "passed", f"{len(wanted)} policy owner group(s) exist"))


