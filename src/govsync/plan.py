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
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from govsync import __version__, paths
from govsync.api.catalog import readable_kinds
from govsync.api.kinds import BY_KIND, Kind
from govsync.errors import ConfigError, ManifestError, Problem
from govsync.graph import order
from govsync.manifests.directives import Directive
from govsync.manifests.model import Manifest, ManifestSet
from govsync.state import APPLIED, PENDING, UNCERTAIN, Entry, LockHolder, Snapshot
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
    reason: str = ""
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

    def public(self) -> dict[str, Any]:
        """What users see of a change (``--format json``): no request."""
        body: dict[str, Any] = {
            "address": self.address,
            "action": self.action,
            "kind": self.kind,
            "id": self.id,
            "fields": self.fields,
            "reason": self.reason,
            "diff": [d.as_dict() for d in self.diff],
        }
        if self.patched:
            body["patchedBy"] = self.patched
        if self.moved_from:
            body["movedFrom"] = self.moved_from
        if self.outside:
            body["outside"] = [d.as_dict() for d in self.outside]
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


class DriftKind(StrEnum):
    """How a recorded object differs from the server (refresh)."""

    CHANGED = "changed"
    MISSING = "missing"


@dataclass(frozen=True)
class Drifted:
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
    governance: dict[str, Any] | None = None
    # False: made without reading secrets' values (for review only).
    secrets_read: bool = True
    # What a refresh found changed outside govsync or missing (empty: nothing, or no
    # refresh), and whether the server was read at all.
    drift: list[Drifted] = field(default_factory=list)
    refreshed: bool = False
    # Who held the workspace lock while the plan was made (None: nobody); the check
    # "lock" words it for people.
    running: LockHolder | None = None

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

    def blocked(self) -> list[Change]:
        return [c for c in self.changes if c.action == Action.BLOCKED]

    def work(self, *, forget_orphans: bool = False) -> list[Change]:
        """The changes apply acts on: requests to send, and orphans to forget if asked."""
        return [c for c in self.changes
                if c.action in WORK or (forget_orphans and c.action == Action.ORPHAN)]


Environ = Mapping[str, str]


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
    moved, imported = _directives(manifests, entries, problems)
    removed = _removals(manifests, entries, problems)
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


def _directives(manifests: ManifestSet, entries: Mapping[str, Entry], problems: list[Problem]
                ) -> tuple[dict[str, str], dict[str, Directive]]:
    """Moves still to make (new address -> old) and imports still to make (address -> doc)."""
    moved: dict[str, str] = {}
    imported: dict[str, Directive] = {}
    sources: dict[str, Directive] = {}
    for d in manifests.directives:
        if d.kind == "Removed":
            continue
        new = d.spec["to"]
        if new not in manifests.objects:
            problems.append(Problem(*d.where("to"), f"{d.label}: no manifest defines {new}: "
                                    "add it (the object's manifest under its new address)"))
            continue
        if new in moved or new in imported:
            problems.append(Problem(*d.where("to"), f"{d.label}: another Moved or Import "
                                    f"document already targets {new}: keep one"))
            continue
        if d.kind == "Moved":
            old = d.spec["from"]
            if old in manifests.objects:
                problems.append(Problem(*d.where("from"), f"{d.label}: {old} is still defined "
                                        "in the manifests: remove it (a move keeps one object "
                                        "under a new address)"))
            elif old in sources:
                problems.append(Problem(*d.where("from"), f"{d.label}: {old} is already moved "
                                        f"by {sources[old].label}"))
            elif old in entries and new in entries:
                problems.append(Problem(*d.where("to"), f"{d.label}: cannot move {old} onto "
                                        f"{new}: both are in state; `govsync state forget` "
                                        "the one that is wrong"))
            elif old in entries:
                if entries[old].status != APPLIED:
                    problems.append(Problem(*d.where("from"), f"{d.label}: {old} is uncertain: "
                                            "settle it (`govsync state resolve`) before moving"))
                    continue
                moved[new] = old
                sources[old] = d
            # else: applied already (new in state), or nothing to move: a no-op
        else:
            entry = entries.get(new)
            holder = recorded_at(entries, manifests.objects[new].kind.name, d.spec["id"])
            if entry is None and holder is not None:
                problems.append(Problem(*d.where("id"), (
                    f"{d.label}: id {d.spec['id']} is already recorded at {holder}: one object "
                    f"has one address; to re-address it, write a Moved document from {holder} "
                    f"to {new} (or run `govsync state mv {holder} {new}`)")))
            elif entry is None:
                imported[new] = d
            elif entry.id != d.spec["id"]:
                problems.append(Problem(*d.where("id"), f"{d.label}: {new} is already in state "
                                        f"as {entry.id}, not {d.spec['id']}: `govsync state "
                                        "forget` it first to adopt another object"))
    return moved, imported


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


def _removals(manifests: ManifestSet, entries: Mapping[str, Entry], problems: list[Problem]
              ) -> dict[str, Directive]:
    """The Removed documents to act on, by the address they remove (one recorded, whose
    manifest is gone; one already gone from state is a no-op)."""
    out: dict[str, Directive] = {}
    for d in manifests.removals:
        address = d.spec["from"]
        if address in manifests.objects:
            problems.append(Problem(*d.where("from"), f"{d.label}: {address} is still defined "
                                    "in the manifests: remove its manifest (a Removed document "
                                    "ends an object whose manifest is gone)"))
        elif address in out:
            problems.append(Problem(*d.where("from"), f"{d.label}: {address} is already "
                                    f"removed by {out[address].label}: keep one"))
        elif address in entries:
            out[address] = d
    return out


def recorded_shown(entry: Entry) -> dict[str, Any]:
    """A recorded spec as rules and people may see it: secrets' fingerprints hidden."""
    shown: dict[str, Any] = _fingerprints_hidden(entry.read_spec() or {})
    return shown


def protected(spec: Mapping[str, Any] | None) -> bool:
    return bool(spec) and spec.get("terminationProtection") is True  # type: ignore[union-attr]


def ending(entry: Entry, directive: Directive | None) -> Change:
    """The delete (or forget) of a recorded object: ``directive`` a Removed document, None
    for ``prune``.  Blocked where the object is protected or the API cannot delete it."""
    kind = BY_KIND[entry.kind]
    by = directive.label if directive is not None else "prune: true"
    if directive is not None and directive.spec["destroy"] is False:
        return Change(entry.address, Action.FORGET, entry.kind, id=entry.id, reason=(
            f"{by}: dropped from state; the object stays on the server"))
    if kind.delete is None:
        return Change(entry.address, Action.BLOCKED, entry.kind, id=entry.id, reason=(
            f"{by}: the API has no operation that deletes a {kind.name}: forget it instead "
            "(a Removed document with destroy: false, or `govsync apply --forget-orphans`)"))
    if protected(entry.read_spec()):
        return Change(entry.address, Action.BLOCKED, entry.kind, id=entry.id,
                      reason=protected_reason(by, "in state"))
    return Change(entry.address, Action.DELETE, entry.kind, id=entry.id,
                  operation=kind.delete.name, reason=f"{by}: {kind.delete.name}")


def protected_reason(by: str, where: str) -> str:
    return (f"{by}: terminationProtection is true ({where}), and govsync never deletes a "
            "protected object: first set `terminationProtection: false` in its manifest "
            "and apply that, then remove it (two reviewed steps)")


def order_deletes(changes: list[Change], entries: Mapping[str, Entry]) -> None:
    """Dependants first: a delete waits for the deletes of the objects that refer to it;
    one still referred to by an object that stays is blocked, naming it."""
    deleting = {c.id: c for c in changes if c.action == Action.DELETE and c.id}
    if not deleting:
        return
    staying: dict[str, list[str]] = {}
    gone = {c.address for c in changes if c.action in (Action.DELETE, Action.FORGET)}
    for address, entry in entries.items():
        spec = entry.read_spec() or {}
        for ref in BY_KIND[entry.kind].references if entry.kind in BY_KIND else ():
            target = deleting.get(spec.get(ref.id_field))  # type: ignore[arg-type]
            if target is None or target.kind != ref.target or target.address == address:
                continue
            if address in gone:
                target.after = (*target.after, address)
            else:
                staying.setdefault(target.address, []).append(f"{address} ({ref.id_field})")
    for change in changes:
        if change.address in staying:
            change.action = Action.BLOCKED
            change.operation = None
            change.reason = (f"still referred to by {', '.join(sorted(staying[change.address]))}"
                             ": the server refuses to delete it; remove or change those first")


def recorded_at(entries: Mapping[str, Entry], kind: str, object_id: str) -> str | None:
    """The address at which an object of ``kind`` with ``object_id`` is recorded (None:
    nowhere): one object, one address."""
    return next((a for a, e in entries.items() if e.id == object_id and e.kind == kind), None)


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
    """Leaf-level changes (deepdiff), secrets and unknown ids shown as such.

    Secrets are the kind's secret fields and ``secrets``, the manifest's own (a
    ``{fromEnv}`` inside an open variant); a fingerprint anywhere (a secret the
    manifest no longer has) is shown as sensitive too."""
    from deepdiff import DeepDiff

    secret_paths = [*(paths.split(s) for s in kind.secrets), *secrets]
    out: list[FieldChange] = []
    tree = DeepDiff(before, after, verbose_level=2, view="tree")
    for items in tree.values():
        for item in items:
            parts = tuple(item.path(output_format="list"))
            hidden = any(paths.under(parts, s) for s in secret_paths)
            # A whole object that appears or goes may hold secrets below it.
            inner = [s[len(parts):] for s in secret_paths if len(s) > len(parts) and paths.under(s, parts)]
            old = _masked(_shown(item.t1, hidden), inner)
            new = _masked(_shown(item.t2, hidden), inner)
            out.append(FieldChange(paths.text(parts), old, new))
    out.sort(key=lambda d: d.path)
    return tuple(out)


def _masked(value: Any, inner: list[paths.Path]) -> Any:
    """``value`` with every secret at the ``inner`` paths shown as sensitive."""
    for path in inner:
        if paths.has(value, path):
            value = paths.replace(value, path, SENSITIVE)
    return value


def _shown(value: Any, hidden: bool) -> Any:
    from deepdiff.helper import NotPresent

    if isinstance(value, NotPresent):
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
