"""Plan: one action per address, from manifests against recorded state.

=========  ==========================================================
create     in the manifests, not in state
update     in both, spec differs, the kind's update covers every change
no-op      in both, same resolved spec
blocked    in both, spec differs, the API cannot make the change
orphan     in state, no longer in the manifests, nothing asks to delete it
uncertain  a create whose outcome is unknown (sent, no answer)
delete     a ``Removed`` document with ``destroy: true`` (or ``prune``)
forget     a ``Removed`` document with ``destroy: false``: dropped from state
replace    ``--replace ADDR``: a new object, references moved, the old deleted
=========  ==========================================================

Specs are compared *resolved* (``values.Resolver``): references become the
ids recorded in state (unknown for objects this plan creates), secrets
become keyed fingerprints of their current values.  A change's ``request``
keeps what cannot be known yet as typed leaves (``Ref``, ``PlannedSecret``):
never a secret value.
"""

from __future__ import annotations

import fnmatch
import os
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from govsync import paths
from govsync.api.catalog import readable_kinds
from govsync.api.kinds import BY_KIND, Kind
from govsync.errors import ConfigError, ManifestError, Problem
from govsync.graph import order
from govsync.manifests.directives import Directive
from govsync.manifests.model import Manifest, ManifestSet
from govsync.planning.model import (
    ENDING,
    REFRESH_CHECK,
    WORK,
    Action,
    Change,
    Check,
    CheckStatus,
    Drifted,
    DriftKind,
    Environ,
    FieldChange,
    GovernanceChange,
    Plan,
)
from govsync.planning.removals import (
    directives,
    ending,
    order_deletes,
    protected,
    protected_reason,
    recorded_at,
    removals,
)
from govsync.state import APPLIED, PENDING, UNCERTAIN, Entry, Snapshot
from govsync.state.model import FINGERPRINT_PREFIX
from govsync.values import (
    KNOWN_AFTER_APPLY,
    KNOWN_AFTER_APPLY_TEXT,
    SENSITIVE,
    UNREAD,
    MissingSecret,
    PlannedSecret,
    Resolver,
    SecretRef,
    holes,
)

__all__ = [
    "ENDING", "EXISTS", "REFRESH_CHECK", "ROTATED", "UNREAD_UPDATE", "WORK", "Action",
    "Change", "Check", "CheckStatus", "DriftKind", "Drifted", "Environ", "FieldChange",
    "GovernanceChange", "Plan", "blocked_advice", "blocked_reason", "ending", "exists_reason", "field_diff",
    "make_plan", "missing_secrets", "order_deletes", "protected", "protected_reason",
    "recorded_at", "recorded_shown", "rotation_reason", "say_unread", "top_field",
]


class _Ids(Mapping[str, str]):
    """The id of every object that exists, by address: each applied entry's, read
    from the entries in place (a copy for a state of 100,000 is 5 MB more at
    the plan's peak), and those of the plan's moves and imports."""

    def __init__(self, entries: Mapping[str, Entry], more: Mapping[str, str],
                 replaced: Collection[str] = ()) -> None:
        self._entries = entries
        self._more = more
        # Objects this plan replaces: their new ids are known after apply.
        self._replaced = replaced

    def __getitem__(self, address: str) -> str:
        if address in self._replaced:
            raise KeyError(address)
        found = self._more.get(address)
        if found is not None:
            return found
        entry = self._entries.get(address)
        if entry is None or entry.status != APPLIED or not entry.id:
            raise KeyError(address)
        return entry.id

    def __iter__(self) -> Iterator[str]:
        yield from (a for a in self._more if a not in self._replaced)
        yield from (a for a, e in self._entries.items()
                    if a not in self._more and a not in self._replaced
                    and e.status == APPLIED and e.id)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def make_plan(
    manifests: ManifestSet,
    snapshot: Snapshot,
    *,
    environ: Environ | None = None,
    targets: Sequence[str] = (),
    read_secrets: bool = True,
    missing: Collection[str] = (),
    prune: bool = False,
    replace: Sequence[str] = (),
    heal: Mapping[str, Drifted] | None = None,
) -> Plan:
    """Diff ``manifests`` against ``snapshot``.  Raises ManifestError for a
    missing secret variable or a Moved/Import document that cannot apply,
    ConfigError for a target that matches nothing.

    Without ``read_secrets``, secrets' values are not read: each secret is
    taken to be unchanged since it was applied (a pull request's plan, which
    ``apply --reviewed`` plans again with the values).

    ``missing``: recorded addresses the server no longer has (refresh): planned
    as creates.  ``prune``: every orphan is planned as a delete (the project's or
    environment's ``prune: true``); without it, only a ``Removed`` document deletes.
    ``replace``: addresses to replace (``--replace``): each is created anew, what refers
    to it is updated (or, where its update cannot change the reference, replaced too),
    and the old object is deleted last.  ``heal`` (``selfHeal: true``): what a refresh
    found changed outside govsync, by address: planned as the updates that put it back
    where the kind's update covers every such field."""
    env = os.environ if environ is None else environ
    entries = snapshot.entries
    problems: list[Problem] = []
    moved, imported = directives(manifests, entries, problems)
    removed = removals(manifests, entries, problems)
    more: dict[str, str] = {}
    for new, old in moved.items():
        if entries[old].id:
            more[new] = entries[old].id  # type: ignore[assignment]
    for new, directive in imported.items():
        more[new] = directive.spec["id"]
    replaced = _replacing(manifests, entries, replace)
    resolver = Resolver(ids=_Ids(entries, more, replaced), fingerprint=snapshot.fingerprint,
                        environ=env, read_secrets=read_secrets)
    changes: list[Change] = []
    if len(manifests.order) != len(manifests.objects):

        manifests.order = order(manifests.objects)
    for address in manifests.order:
        manifest = manifests.objects[address]
        try:
            request, resolved = resolver.plan(manifest.template, manifest.holes)
        except MissingSecret as exc:
            problems.append(_missing_secret(manifest, exc.path, exc.variable))
            continue
        if not read_secrets:
            recorded = entries.get(moved.get(address, address))
            if recorded is not None and recorded.status == APPLIED:
                resolved = _unread_as_before(manifest, recorded.read_spec() or {}, resolved)
        if address in moved:
            changes.append(_move(manifest, moved[address], entries[moved[address]], request,
                                 resolved))
        elif address in imported:
            changes.append(_import(manifest, imported[address], request))
        elif address in replaced:
            changes.append(_replacement(manifest, entries[address], request, replace))
        elif address in missing:
            change = _change(manifest, None, request, resolved, address)
            change.reason = (f"missing on the server (recorded as {entries[address].id}): "
                             "created again")
            changes.append(change)
        else:
            change = _change(manifest, entries.get(address), request, resolved, address)
            if heal and change.action == Action.NOOP and address in heal:
                change = _healing(manifest, change, request, heal[address])
            if replaced and _chained(change, manifest, replaced):
                replaced.add(address)  # its reference cannot be updated: replaced too
                change = _replacement(manifest, entries[address], request, replace)
            changes.append(change)
    for address in sorted(entries.keys() - manifests.objects.keys() - set(moved.values())):
        entry = entries[address]
        if entry.status in (PENDING, UNCERTAIN):
            changes.append(Change(address, Action.UNCERTAIN, entry.kind, id=entry.id, reason=(
                "a create was sent but its outcome is unknown, and the manifest is gone; "
                f"run `govsync state resolve {address} --id ID` or `--absent`")))
        elif address in removed:
            changes.append(ending(entry, removed[address]))
        elif prune:
            changes.append(ending(entry, None))
        else:
            changes.append(Change(address, Action.ORPHAN, entry.kind, id=entry.id, reason=(
                "no longer in the manifests: nothing deletes it, so it stays on the server; "
                "a Removed document deletes it (destroy: true) or forgets it (false) after "
                "review; `govsync apply --forget-orphans` drops it from state")))
    order_deletes(changes, entries)
    if problems:
        raise ManifestError(problems)
    plan = Plan(snapshot.workspace, snapshot.lineage, snapshot.serial, manifests.digest, changes,
                id=uuid.uuid4().hex)
    if targets:
        _target(plan, manifests, targets)
    return plan


def _target(plan: Plan, manifests: ManifestSet, patterns: Sequence[str]) -> None:
    """Keep the changes whose address matches a pattern, and what they depend on."""


    addresses = [c.address for c in plan.changes]
    chosen: set[str] = set()
    for pattern in patterns:
        matched = [a for a in addresses if fnmatch.fnmatchcase(a, pattern)]
        if not matched:
            raise ConfigError(f"--target {pattern!r} matches no address in the manifests or "
                              "the state: give an address (Kind/name) or a glob such as Hook/*")
        chosen.update(matched)
    todo = list(chosen)
    while todo:
        manifest = manifests.objects.get(todo.pop())
        for dep in manifest.dependencies if manifest else ():
            if dep not in chosen:
                chosen.add(dep)
                todo.append(dep)
    kept = [c for c in plan.changes if c.address in chosen]
    # What was left out that would have changed something (no-ops are not changes).
    plan.left_out = sum(1 for c in plan.changes
                        if c.address not in chosen and c.action != Action.NOOP)
    plan.changes = kept
    plan.targets = list(patterns)


UNREAD_UPDATE = ("not read from the server ({why}): {op} is sent the manifest's whole spec, "
                 "so a field changed outside govsync that the manifest leaves at its default "
                 "is set back")


def say_unread(plan: Plan, why: str, read: Collection[str] = ()) -> None:
    """Updates that replace the whole object but whose object was not read (``read``: the
    addresses that were): the plan says what is sent instead of read-modify-write."""
    for change in plan.changes:
        kind = BY_KIND[change.kind]
        if (change.action in (Action.UPDATE, Action.MOVE) and change.operation
                and kind.replace_all and change.address not in read and not change.reason):
            change.reason = UNREAD_UPDATE.format(why=why, op=change.operation)


def top_field(path: str) -> str:
    """The top-level spec field of a change's dotted path (``hosts[1]`` -> ``hosts``)."""
    return path.split(".", 1)[0].split("[", 1)[0]


def _healing(manifest: Manifest, change: Change, request: dict[str, Any], drifted: Drifted
             ) -> Change:
    """Self-heal: the update that puts back what changed outside govsync (the live value
    -> the manifest's), where the kind's update covers every such field."""
    kind = manifest.kind
    top = {top_field(d.path) for d in drifted.diff}
    if not top or not all(kind.can_update(f) for f in top):
        return change
    return Change(change.address, Action.UPDATE, kind.name, id=change.id,
                  fields=tuple(d.path for d in drifted.diff),
                  diff=tuple(FieldChange(d.path, d.after, d.before) for d in drifted.diff),
                  request=request, operation=kind.update_op, after=manifest.dependencies,
                  reason="selfHeal: puts back what changed outside govsync")


def _replacing(manifests: ManifestSet, entries: Mapping[str, Entry], replace: Sequence[str]
               ) -> set[str]:
    """The addresses ``--replace`` names: each must be in the manifests and applied."""
    for address in replace:
        entry = entries.get(address)
        if address not in manifests.objects or entry is None or entry.status != APPLIED:
            raise ConfigError(f"--replace {address}: name an object the manifests define and "
                              "state records as applied (Kind/name)")
        if manifests.objects[address].kind.delete is None:
            raise ConfigError(f"--replace {address}: the API cannot delete a "
                              f"{entry.kind}, so it cannot be replaced")
    return set(replace)


def _chained(change: Change, manifest: Manifest, replaced: Collection[str]) -> bool:
    """A change blocked only because a reference to a replaced object cannot be updated."""
    if change.action != Action.BLOCKED or change.id is None or manifest.kind.delete is None:
        return False
    moving: set[str] = set()
    for written, target in manifest.refs:
        if target in replaced:
            moving.add(written)
            moving.update(r.id_field for r in manifest.kind.references
                          if r.ref_field == written)
    top = {top_field(f) for f in change.fields}
    return bool(moving) and top <= moving


def _replacement(manifest: Manifest, entry: Entry, request: dict[str, Any],
                 asked: Sequence[str]) -> Change:
    kind = manifest.kind
    why = ("--replace" if manifest.address in asked
           else "it refers to a replaced object and its update cannot change the reference")
    name = (f"; for a moment two {kind.name}s are named {manifest.name!r} (the new one is "
            "created before the old one is deleted)" if kind.named else "")
    return Change(manifest.address, Action.REPLACE, kind.name, id=entry.id,
                  fields=tuple(sorted(request)), request=request, operation=kind.create_op,
                  after=manifest.dependencies,
                  reason=(f"replaced ({why}): {kind.create_op} creates a new one, what refers "
                          f"to it is updated, then {kind.delete_op} deletes {entry.id}{name}"))


def recorded_shown(entry: Entry) -> dict[str, Any]:
    """A recorded spec as rules and people may see it: secrets' fingerprints hidden."""
    shown: dict[str, Any] = _fingerprints_hidden(entry.read_spec() or {})
    return shown


def _move(manifest: Manifest, old: str, entry: Entry, request: dict[str, Any],
          resolved: dict[str, Any]) -> Change:
    kind = manifest.kind
    old_name = old.split("/", 1)[1]
    if kind.named and old_name != manifest.name and not kind.can_update("name"):
        return Change(manifest.address, Action.BLOCKED, kind.name, id=entry.id,
                      moved_from=old, reason=(
                          f"moving {old} to {manifest.address} would change the {kind.name}'s "
                          f"API name ({old_name!r} -> {manifest.name!r}), and "
                          f"{kind.update_op or 'no update'} cannot change it: keep the old "
                          f"address, or replace it (`--replace {old}`)"))
    change = _change(manifest, entry, request, resolved, manifest.address)
    change.moved_from = old
    if change.action == Action.NOOP:
        change.action = Action.MOVE
        change.reason = f"re-addressed from {old} in state; nothing is sent"
    elif change.action == Action.UPDATE:
        change.action = Action.MOVE
        change.reason = f"re-addressed from {old} in state, then updated ({change.operation})"
    return change


def _import(manifest: Manifest, directive: Directive, request: dict[str, Any]) -> Change:
    kind = manifest.kind
    readable = kind.name in readable_kinds()
    verify = ("" if readable else f"the API has no operation that reads a {kind.name}, so the "
              f"id {directive.spec['id']} is recorded without checking that it exists; ")
    secrets = [p for p in holes(request) if isinstance(paths.get(request, p), PlannedSecret)]
    if kind.replace_all and secrets:
        # No read returns a secret: sending it could overwrite the live one with
        # whatever the variable holds (a migration's placeholder).
        what = (f"nothing is sent: {kind.update_op} would also send the secret(s) "
                f"{', '.join('spec.' + paths.text(p) for p in secrets)}, which no read "
                "returns to check; the manifest's spec is recorded (a later change to it is "
                "sent as usual)")
        operation: str | None = None
    elif kind.replace_all and kind.update is not None and kind.update.spec:
        # (a kind whose update only api-lifecycle.md lists is sent only where the
        # read that verifies the import finds a difference)
        what = f"{kind.update_op} then sets it to the manifest's spec"
        operation = kind.update_op
    else:
        what = ("the manifest's spec is recorded as its current spec (no operation can make "
                "the server match it: check that they agree)")
        operation = None
    return Change(manifest.address, Action.IMPORT, kind.name, id=directive.spec["id"],
                  fields=tuple(sorted(request)), request=request, operation=operation,
                  after=manifest.dependencies,
                  reason=f"adopted by {directive.label}: {verify}{what}")


def _change(manifest: Manifest, entry: Any, request: dict[str, Any],
            resolved: dict[str, Any], address: str) -> Change:
    """``address``: the manifest's, given as the string the manifest set keys it by
    (``Manifest.address`` makes a new one: 7 MB more for a plan of 100,000)."""
    change = _action(manifest, entry, request, resolved, address)
    if manifest.patched:
        change.patched = dict(manifest.patched)
    return change


def _action(manifest: Manifest, entry: Any, request: dict[str, Any],
            resolved: dict[str, Any], address: str) -> Change:
    kind = manifest.kind
    if entry is None:
        return Change(address, Action.CREATE, kind.name, fields=tuple(sorted(request)),
                      request=request, operation=kind.create_op, after=manifest.dependencies)
    if entry.status in (PENDING, UNCERTAIN):
        return Change(address, Action.UNCERTAIN, kind.name, id=entry.id, reason=(
            "a create was sent but its outcome is unknown; run `govsync state resolve "
            f"{address} --id ID` if it exists on the server, or `--absent` if not"))
    before = entry.read_spec() or {}  # parsed for this comparison only
    if before == resolved:
        return Change(address, Action.NOOP, kind.name, id=entry.id)
    diff = field_diff(kind, before, resolved, _secret_holes(manifest))
    top = sorted({k for k in before.keys() | resolved.keys() if before.get(k) != resolved.get(k)})
    cannot = [f for f in top if not kind.can_update(f)]
    fields = tuple(d.path for d in diff)
    if not cannot:
        return Change(address, Action.UPDATE, kind.name, id=entry.id, fields=fields, diff=diff,
                      request=request, operation=kind.update_op, after=manifest.dependencies)
    rotated = _rotated_secrets(manifest, before, resolved)
    reason = (rotation_reason(kind, rotated, [f for f in cannot if f not in {
        str(p[0]) for p, _ in rotated}]) if rotated else blocked_reason(kind, cannot, address))
    return Change(address, Action.BLOCKED, kind.name, id=entry.id, fields=fields, diff=diff,
                  reason=reason)


def _secret_holes(manifest: Manifest) -> list[paths.Path]:
    """The paths of a manifest's secrets (those inside open variants included)."""
    return [p for p in manifest.holes if isinstance(paths.get(manifest.template, p), SecretRef)]


def _unread_as_before(manifest: Manifest, before: dict[str, Any],
                      resolved: dict[str, Any]) -> dict[str, Any]:
    """A secret not read (``UNREAD``) compares as the fingerprint applied before."""
    for path in manifest.holes:
        if (isinstance(paths.get(manifest.template, path), SecretRef)
                and paths.has(resolved, path) and paths.get(resolved, path) == UNREAD
                and paths.has(before, path)):
            resolved = paths.replace(resolved, path, paths.get(before, path))
    return resolved


def _rotated_secrets(manifest: Manifest, before: dict[str, Any], after: dict[str, Any]
                     ) -> list[tuple[paths.Path, str]]:
    """(path, variable) of each secret whose value changed since it was applied."""
    out = []
    for path in manifest.holes:
        hole = paths.get(manifest.template, path)
        if isinstance(hole, SecretRef) and paths.get(before, path) != paths.get(after, path):
            out.append((path, hole.variable))
    return out


# In the reason of a change blocked by a rotated secret (and only there).
ROTATED = "changed, not the manifest"


# In the reason of a create blocked because its object exists unrecorded (and only there).
EXISTS = "exists on the server as"


def exists_reason(object_id: str) -> str:
    """Why a create is blocked: its object exists on the server, and state does not record
    it (contract section 12: no duplicate from a lost or misplaced state)."""
    return (f"{EXISTS} {object_id}: adopt it with an Import document or `govsync import` "
            "(or check that --state and --workspace name the state that records it)")


def blocked_advice(blocked: Sequence[Change]) -> str:
    """What to do about blocked changes: revert manifest edits, rotate secrets, adopt
    what exists, or all of these."""
    existing = [c for c in blocked if EXISTS in c.reason]
    if existing:
        rest = [c for c in blocked if EXISTS not in c.reason]
        adopt = (f"{len(existing)} exist(s) on the server unrecorded: adopt them with Import "
                 "documents or `govsync import`, or point --state at the state that records "
                 "them")
        return adopt + ("; " + blocked_advice(rest) if rest else "")
    rotated = sum(1 for c in blocked if ROTATED in c.reason)
    if rotated == len(blocked):
        return ("a secret's value changed, not the manifests: rotate it as the reason says "
                "(or apply the rest with --target)")
    if rotated:
        return ("revert the manifest changes, and rotate the secrets whose value changed as "
                "their reasons say")
    return "revert them in the manifests"


def rotation_reason(kind: Kind, rotated: list[tuple[paths.Path, str]], others: list[str]) -> str:
    """Why a changed secret value blocks, and how to rotate it (contract section 6)."""
    secrets = ", ".join(f"{variable} (spec.{paths.text(path)})" for path, variable in rotated)
    also = f"; {blocked_reason(kind, others)}" if others else ""
    return (
        f"the value of {secrets} {ROTATED}: the API cannot update a "
        f"{kind.name}'s secret. To rotate it, add a new {kind.name} under a new name with the "
        "new value, move what uses it there, then remove the old one from the manifests "
        "(`govsync apply --forget-orphans` drops it from state); meanwhile `--target` applies "
        f"the rest of the repository{also}"
    )


def _missing_secret(manifest: Manifest, path: paths.Path, variable: str) -> Problem:
    dotted = ".".join(str(p) for p in path)
    return Problem(
        *manifest.where(f"spec.{dotted}"),
        f"{manifest.address}: environment variable {variable} (secret spec.{dotted}) is "
        "not set: export it before running govsync",
    )


def missing_secrets(manifests: ManifestSet, environ: Environ) -> list[Problem]:
    """A problem for each ``{fromEnv: VAR}`` whose variable is not set.

    Checked before the state is opened, so a plan that cannot run leaves no
    trace (not even a new state file)."""
    problems: list[Problem] = []
    for address in sorted(manifests.objects):
        manifest = manifests.objects[address]
        for path in manifest.holes:
            hole = paths.get(manifest.template, path)
            if isinstance(hole, SecretRef) and not environ.get(hole.variable):
                problems.append(_missing_secret(manifest, path, hole.variable))
    return problems


def blocked_reason(kind: Kind, fields: list[str], address: str = "") -> str:
    names = ", ".join(fields)
    if kind.update_op is None:
        why = f"the API has no operation that updates a {kind.name}"
    else:
        why = f"{kind.update_op} can change only {kind.changeable}"
    return (
        f"cannot change {names}: {why}. Revert the change in the manifest, or replace the "
        f"object: `--replace {address or kind.name + '/NAME'}` creates a new one and deletes "
        "the old one"
    )


def field_diff(kind: Kind, before: dict[str, Any], after: dict[str, Any],
               secrets: Sequence[paths.Path] = ()) -> tuple[FieldChange, ...]:
    """Leaf-level changes (deepdiff below the top level), secrets and unknown ids shown
    as such.

    Secrets are the kind's secret fields and ``secrets``, the manifest's own (a
    ``{fromEnv}`` inside an open variant); a fingerprint anywhere (a secret the
    manifest no longer has) is shown as sensitive too."""

    secret_paths = [*(paths.split(s) for s in kind.secrets), *secrets]
    out: list[FieldChange] = []

    def change(parts: paths.Path, t1: Any, t2: Any) -> None:
        hidden = any(paths.under(parts, s) for s in secret_paths)
        # A whole object that appears or goes may hold secrets below it.
        inner = [s[len(parts):] for s in secret_paths if len(s) > len(parts) and paths.under(s, parts)]
        old = _masked(_shown(t1, hidden), inner)
        new = _masked(_shown(t2, hidden), inner)
        out.append(FieldChange(paths.text(parts), old, new))

    # A top-level field whose values are both leaves, or that is on one side only, is
    # one change: no DeepDiff for it (its set-up costs a plan of 1,000 updates about a
    # second).  DeepDiff compares the others, under the keys both sides have.
    nested: list[str] = []
    for key in sorted(before.keys() | after.keys(), key=str):
        t1, t2 = before.get(key, _ABSENT), after.get(key, _ABSENT)
        if _same(t1, t2):
            continue
        if t1 is not _ABSENT and t2 is not _ABSENT and (isinstance(t1, dict | list)
                                                       or isinstance(t2, dict | list)):
            nested.append(key)
        else:
            change((key,), t1, t2)
    if nested:
        from deepdiff import DeepDiff
        from deepdiff.helper import NotPresent

        tree = DeepDiff({k: before[k] for k in nested}, {k: after[k] for k in nested},
                        verbose_level=2, view="tree")
        for items in tree.values():
            for item in items:
                t1, t2 = (_ABSENT if isinstance(t, NotPresent) else t
                          for t in (item.t1, item.t2))
                change(tuple(item.path(output_format="list")), t1, t2)
    out.sort(key=lambda d: d.path)
    return tuple(out)


_ABSENT = object()


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same types throughout (as DeepDiff sees it: 1 and 1.0 differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _masked(value: Any, inner: list[paths.Path]) -> Any:
    """``value`` with every secret at the ``inner`` paths shown as sensitive."""
    for path in inner:
        if paths.has(value, path):
            value = paths.replace(value, path, SENSITIVE)
    return value


def _shown(value: Any, hidden: bool) -> Any:
    if value is _ABSENT:
        return None
    if hidden:
        return SENSITIVE
    if value is KNOWN_AFTER_APPLY:
        return KNOWN_AFTER_APPLY_TEXT
    return _fingerprints_hidden(value)


def _fingerprints_hidden(value: Any) -> Any:
    """``value`` with every recorded secret's fingerprint shown as sensitive."""
    if isinstance(value, str):
        return SENSITIVE if value.startswith(FINGERPRINT_PREFIX) else value
    if isinstance(value, dict):
        return {k: _fingerprints_hidden(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fingerprints_hidden(v) for v in value]
    return value
