"""Plan: one action per address, decided once, from the manifests, the recorded state and
what the server showed (``Observation``: the refresh runs first, as Terraform's does).

=========  ==========================================================
create     in the manifests, not in state
update     in both, spec differs, the kind's update covers every change
no-op      in both, same resolved spec
blocked    the change cannot be made, or must not be: a typed reason says why
orphan     in state, no longer in the manifests, nothing asks to delete it
uncertain  a create whose outcome is unknown (sent, no answer) that no read settles
delete     a ``Removed`` document with ``destroy: true`` (or ``prune``)
forget     a ``Removed`` document with ``destroy: false``: dropped from state
replace    ``--replace ADDR``: a new object, references moved, the old deleted
=========  ==========================================================

Specs are compared *resolved* (``values.Resolver``): references become the
ids recorded in state (unknown for objects this plan creates), secrets
become keyed fingerprints of their current values.  A change's ``request``
keeps what cannot be known yet as typed leaves (``Ref``, ``PlannedSecret``):
never a secret value.  Why a change is what it is, is a ``Reason`` (typed); only
the renderers put it into words.
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
from govsync.manifests.manifest import Manifest, ManifestSet
from govsync.planning.changes import (
    CODE_CHECK,
    ENDING,
    REFRESH_CHECK,
    WORK,
    Action,
    CaseRun,
    CaseStatus,
    Change,
    Check,
    CheckStatus,
    Drifted,
    DriftKind,
    Environ,
    FieldChange,
    GovernanceChange,
    Plan,
    PolicyTests,
    Service,
)
from govsync.planning.code import codes_to_check
from govsync.planning.compare import pairs
from govsync.planning.diff import field_diff, recorded_shown, top_field
from govsync.planning.observation import Observation
from govsync.planning.reasons import Reason, Why
from govsync.planning.removals import (
    directives,
    ending,
    protected,
    recorded_at,
    referrers,
    removals,
)
from govsync.state import APPLIED, PENDING, UNCERTAIN, Entry, Snapshot
from govsync.state.records import deposed_of
from govsync.values import (
    UNREAD,
    MissingSecret,
    PlannedSecret,
    Resolver,
    SecretRef,
    holes,
    shown,
)

__all__ = [
    "CODE_CHECK", "ENDING", "REFRESH_CHECK", "WORK", "Action", "CaseRun", "CaseStatus", "Change", "Check",
    "CheckStatus", "DriftKind", "Drifted", "Environ", "FieldChange", "GovernanceChange",
    "Observation", "Plan", "PolicyTests", "Reason", "Recorded", "Service", "Why", "codes_to_check", "creating", "ending", "field_diff", "make_plan",
    "missing_secrets", "protected", "recorded_at", "recorded_shown",
    "say_unread", "top_field", "unrecorded",
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
    prune: bool = False,
    replace: Sequence[str] = (),
    ignore: Mapping[str, Sequence[str]] | None = None,
    observation: Observation | None = None,
) -> Plan:
    """Diff ``manifests`` against ``snapshot`` and what ``observation`` saw on the server
    (None: nothing read).  Raises ManifestError for a missing secret variable or a
    Moved/Import document that cannot apply, ConfigError for a target or a replace
    that names nothing.

    Without ``read_secrets``, secrets' values are not read: each secret is
    taken to be unchanged since it was applied (a pull request's plan, which
    ``apply --reviewed`` plans again with the values).

    ``prune``: every orphan is planned as a delete (the project's or environment's
    ``prune: true``); without it, only a ``Removed`` document deletes.  ``replace``:
    addresses to replace (``--replace``): each is created anew, what refers to it is
    updated (or, where its update cannot change the reference, replaced too), and
    the old object is deleted last.  What the observation found changed outside
    govsync in a field the manifest names is put back by the update (contract 12,
    amended), its diff starting from the live value.  ``ignore`` (the project's
    ``ignoreChanges``, by kind): fields never diffed and never changed (an update
    carries their live value)."""
    seen = observation if observation is not None else Observation()
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
    recorded = Recorded(entries)
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
        entry = entries.get(moved.get(address, address))
        if not read_secrets and entry is not None and entry.status == APPLIED:
            resolved = _unread_as_before(manifest, entry.read_spec() or {}, resolved)
        if address in moved:
            change = _move(manifest, moved[address], entries[moved[address]], request,
                           resolved, seen)
        elif address in imported:
            change = _import(manifest, imported[address], request, seen)
        elif address in replaced:
            change = _replacement(manifest, entries[address], request, replace, seen,
                                  recorded)
        else:
            change = _decide(manifest, entry, request, resolved, address, seen, recorded,
                             (ignore or {}).get(manifest.kind.name, ()))
            if replaced and _chained(change, manifest, replaced):
                replaced.add(address)  # its reference cannot be updated: replaced too
                change = _replacement(manifest, entries[address], request, replace, seen,
                                      recorded)
        if address in seen.invalid_code and change.action in _SENDS_CODE:
            change = Change(address, Action.BLOCKED, change.kind, id=change.id,
                            fields=change.fields, diff=change.diff,
                            why=Reason(Why.CODE_INVALID, detail=seen.invalid_code[address]))
        if manifest.patched:
            change.patched = dict(manifest.patched)
        changes.append(change)
    gone = sorted(entries.keys() - manifests.objects.keys() - set(moved.values()))
    ends = {a for a in gone if entries[a].status == APPLIED
            and (deposed_of(a) is not None or a in removed or prune)}
    referred = referrers(entries, ends, changes)
    for address in gone:
        entry = entries[address]
        refs = referred.get(entry.id) if entry.id else None
        if deposed_of(address) is not None:
            changes.append(ending(entry, None, seen, refs, deposed=True))
        elif entry.status in (PENDING, UNCERTAIN):
            changes.append(Change(address, Action.UNCERTAIN, entry.kind, id=entry.id,
                                  why=Reason(Why.UNCERTAIN_GONE)))
        elif address in removed:
            changes.append(ending(entry, removed[address], seen, refs))
        elif prune:
            changes.append(ending(entry, None, seen, refs))
        else:
            changes.append(Change(address, Action.ORPHAN, entry.kind, id=entry.id,
                                  why=Reason(Why.ORPHAN)))
    if problems:
        raise ManifestError(problems)
    plan = Plan(snapshot.workspace, snapshot.lineage, snapshot.serial, manifests.digest, changes,
                id=uuid.uuid4().hex)
    if targets:
        _target(plan, manifests, targets)
    return plan


# The actions that send a policy's code (the service's check of it blocks them).
_SENDS_CODE = frozenset({Action.CREATE, Action.UPDATE, Action.REPLACE, Action.IMPORT,
                         Action.MOVE})


def creating(plan: Plan) -> list[Change]:
    """The changes that would make an object whose twin may exist on the server already,
    to be looked up before the plan is decided (creates, replaces, unknown creates)."""
    return [c for c in plan.changes if c.request is not None and (
        c.action in (Action.CREATE, Action.REPLACE)
        or (c.action == Action.UNCERTAIN and c.why is not None
            and c.why.why == Why.UNSETTLED))]


class Recorded:
    """The ids this workspace records (at any address, deposed objects included)."""

    def __init__(self, entries: Mapping[str, Entry]) -> None:
        self._entries = entries
        self._ids: dict[tuple[str, str], str] | None = None

    def at(self, kind: str, object_id: str) -> str | None:
        if self._ids is None:
            self._ids = {(e.kind, e.id): a for a, e in self._entries.items() if e.id}
        return self._ids.get((kind, object_id))


def unrecorded(kind: Kind, address: str, seen: Observation, recorded: Recorded,
                mine: str | None = None) -> Reason | None:
    """Why a create at ``address`` must not be sent: an object it would duplicate exists on
    the server (found by the fields that identify it) and this workspace does not record
    it (``mine``: the id recorded at the address, gone or being replaced), or another
    workspace of the state does."""
    for live_id in seen.found.get(address, ()):
        if live_id == mine or recorded.at(kind.name, live_id) is not None:
            continue
        owner = seen.owners.get(live_id)
        if owner is not None:
            return Reason(Why.OWNED, id=live_id, names=owner)
        return Reason(Why.EXISTS, id=live_id, detail=mine or "")
    return None


def _decide(manifest: Manifest, entry: Entry | None, request: dict[str, Any],
            resolved: dict[str, Any], address: str, seen: Observation, recorded: Recorded,
            ignored: Sequence[str]) -> Change:
    """The action of an address the manifests define (not moved, imported or replaced)."""
    kind = manifest.kind
    if entry is None:
        return _create(manifest, request, address, seen, recorded, None)
    if entry.status in (PENDING, UNCERTAIN):
        return _unknown(manifest, entry, request, address, seen, recorded)
    if address in seen.live and seen.live[address] is None:
        return _create(manifest, request, address, seen, recorded,
                       Reason(Why.MISSING, id=entry.id), mine=entry.id)
    change = _compare(manifest, entry, request, resolved, address,
                      seen.changed.get(address), seen.live.get(address), ignored)
    if change.action == Action.UPDATE and seen.lacks_writes and kind.update is not None \
            and not kind.update.spec:
        change = Change(address, Action.BLOCKED, kind.name, id=entry.id, fields=change.fields,
                        diff=change.diff, why=Reason(Why.ENDPOINT_LACKS,
                                                     operation=kind.update_op))
    return change


def _create(manifest: Manifest, request: dict[str, Any], address: str, seen: Observation,
            recorded: Recorded, why: Reason | None, *, mine: str | None = None) -> Change:
    kind = manifest.kind
    blocked = unrecorded(kind, address, seen, recorded, mine)
    if blocked is not None:
        return Change(address, Action.BLOCKED, kind.name, id=blocked.id, why=blocked)
    return Change(address, Action.CREATE, kind.name, fields=tuple(sorted(request)),
                  request=request, operation=kind.create_op, after=manifest.dependencies,
                  why=why)


def _unknown(manifest: Manifest, entry: Entry, request: dict[str, Any], address: str,
             seen: Observation, recorded: Recorded) -> Change:
    """A create sent earlier whose outcome is unknown: settled by the lookup where it ran
    (contract 12, amended): found, it is recorded (an import of what was found); found
    absent, it is created; else it waits for ``state resolve``."""
    kind = manifest.kind
    if address not in seen.found or seen.running:
        detail = ("an apply running now may still be sending it" if seen.running
                  else "" if not seen.read else f"no read finds a {kind.name} by its fields")
        return Change(address, Action.UNCERTAIN, kind.name, id=entry.id, request=request,
                      why=Reason(Why.UNSETTLED, detail=detail))
    read = seen.read_with.get(address, "")
    ids = [i for i in seen.found[address] if recorded.at(kind.name, i) is None]
    owned = [i for i in ids if i in seen.owners]
    if owned:
        return Change(address, Action.BLOCKED, kind.name, id=owned[0],
                      why=Reason(Why.OWNED, id=owned[0], names=seen.owners[owned[0]]))
    if not ids:
        return Change(address, Action.CREATE, kind.name, fields=tuple(sorted(request)),
                      request=request, operation=kind.create_op, after=manifest.dependencies,
                      why=Reason(Why.SETTLED_ABSENT, operation=read))
    if len(ids) > 1:
        return Change(address, Action.UNCERTAIN, kind.name, id=entry.id, request=request,
                      why=Reason(Why.UNSETTLED, detail=(
                          f"{read} finds {len(ids)} such objects ({', '.join(ids)})")))
    return Change(address, Action.IMPORT, kind.name, id=ids[0], fields=tuple(sorted(request)),
                  request=request, operation=None, after=manifest.dependencies,
                  why=Reason(Why.SETTLED_EXISTS, id=ids[0], operation=read))


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


def say_unread(plan: Plan, why: str, read: Collection[str] = ()) -> None:
    """Updates that replace the whole object but whose object was not read (``read``: the
    addresses that were): the plan says what is sent instead of read-modify-write."""
    for change in plan.changes:
        if (change.action in (Action.UPDATE, Action.MOVE) and change.operation
                and change.why is None and change.address not in read
                and BY_KIND[change.kind].replace_all):
            change.why = Reason(Why.UNREAD, detail=why)


def _replacing(manifests: ManifestSet, entries: Mapping[str, Entry], replace: Sequence[str]
               ) -> set[str]:
    """The addresses ``--replace`` names: each must be in the manifests and applied."""
    for address in replace:
        entry = entries.get(address)
        if address not in manifests.objects or entry is None or entry.status != APPLIED:
            raise ConfigError(f"--replace {address}: name an object the manifests define and "
                              "state records as applied (Kind/name)")
        kind = manifests.objects[address].kind
        if kind.delete is None:
            raise ConfigError(f"--replace {address}: the API cannot delete a "
                              f"{entry.kind}, so it cannot be replaced")
        if kind.create.retry_safe:
            raise ConfigError(f"--replace {address}: a {entry.kind} is set in place by "
                              f"{kind.create_op} (there is one per {', '.join(kind.identity)}"
                              "): change it in its manifest instead")
    return set(replace)


def _chained(change: Change, manifest: Manifest, replaced: Collection[str]) -> bool:
    """A change blocked only because a reference to a replaced object cannot be updated."""
    if change.action != Action.BLOCKED or change.id is None or manifest.kind.delete is None:
        return False
    if change.why is None or change.why.why != Why.CANNOT_UPDATE:
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
                 asked: Sequence[str], seen: Observation, recorded: Recorded) -> Change:
    """A replace: blocked where a delete of the old object would be (protected, in state
    or live; the endpoint without deletes), or where an object its new one would duplicate
    exists unrecorded (a replace left unfinished before intents were recorded)."""
    kind = manifest.kind
    address = manifest.address
    by = "--replace" if address in asked else "chained"
    live = seen.live.get(address)
    where = "in state" if protected(entry.read_spec()) else "live" if protected(live) else ""
    blocked: Reason | None = None
    if where:
        blocked = Reason(Why.PROTECTED, by="--replace", detail=where)
    elif seen.lacks_writes:
        blocked = Reason(Why.ENDPOINT_LACKS, by="--replace", operation=kind.delete_op)
    elif entry.id is not None and entry.id in seen.owners:
        blocked = Reason(Why.OWNED, id=entry.id, names=seen.owners[entry.id])
    else:
        blocked = unrecorded(kind, address, seen, recorded, entry.id)
    if blocked is not None:
        return Change(address, Action.BLOCKED, kind.name, id=entry.id, why=blocked)
    return Change(address, Action.REPLACE, kind.name, id=entry.id,
                  fields=tuple(sorted(request)), request=request, operation=kind.create_op,
                  after=manifest.dependencies, why=Reason(Why.REPLACE, by=by, id=entry.id))


def _move(manifest: Manifest, old: str, entry: Entry, request: dict[str, Any],
          resolved: dict[str, Any], seen: Observation) -> Change:
    kind = manifest.kind
    old_name = old.split("/", 1)[1]
    if kind.named and old_name != manifest.name and not kind.can_update("name"):
        return Change(manifest.address, Action.BLOCKED, kind.name, id=entry.id,
                      moved_from=old, why=Reason(Why.RENAME, detail=old,
                                                 names=(old_name, manifest.name),
                                                 operation=kind.update_op))
    change = _compare(manifest, entry, request, resolved, manifest.address)
    change.moved_from = old
    if change.action in (Action.NOOP, Action.UPDATE):
        change.action = Action.MOVE
        change.why = Reason(Why.MOVED, detail=old)
    return change


def _import(manifest: Manifest, directive: Directive, request: dict[str, Any],
            seen: Observation) -> Change:
    """An Import document: verified by the observation's read where there was one."""
    kind = manifest.kind
    address = manifest.address
    object_id = directive.spec["id"]
    by = directive.label
    if object_id in seen.owners:
        return Change(address, Action.BLOCKED, kind.name, id=object_id,
                      why=Reason(Why.OWNED, id=object_id, names=seen.owners[object_id]))
    secrets = [p for p in holes(request) if isinstance(paths.get(request, p), PlannedSecret)]
    if address in seen.imports:
        return _verified(kind, address, object_id, by, request, secrets,
                         seen.imports[address], seen.read_with.get(address, "a read"),
                         manifest.dependencies)
    readable = kind.name in readable_kinds()
    verify = ("" if readable else f"the API has no operation that reads a {kind.name}, so the "
              f"id {object_id} is recorded without checking that it exists; ")
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
    return Change(address, Action.IMPORT, kind.name, id=object_id,
                  fields=tuple(sorted(request)), request=request, operation=operation,
                  after=manifest.dependencies,
                  why=Reason(Why.IMPORTED, by=by, detail=verify + what))


def _verified(kind: Kind, address: str, object_id: str, by: str, request: dict[str, Any],
              secrets: list[paths.Path], live: dict[str, Any] | None, read: str,
              after: tuple[str, ...]) -> Change:
    if live is None:
        return Change(address, Action.BLOCKED, kind.name, id=object_id,
                      why=Reason(Why.IMPORT_ABSENT, by=by, operation=read))
    manifest, server = pairs(kind, shown(request), None, live)
    # From what the server holds to what the manifest says (what the update then sends).
    diff = field_diff(kind, server, manifest) if manifest != server else ()
    fields = tuple(d.path for d in diff)
    top = tuple(sorted({top_field(d.path) for d in diff}, key=str))
    if diff and not all(kind.can_update(str(t)) for t in top):
        return Change(address, Action.BLOCKED, kind.name, id=object_id, fields=fields,
                      diff=diff, why=Reason(Why.IMPORT_FIXED, by=by, operation=read,
                                            fields=top, detail=kind.update_op or ""))
    if diff and secrets:
        return Change(address, Action.BLOCKED, kind.name, id=object_id, fields=fields,
                      diff=diff, why=Reason(Why.IMPORT_SECRETS, by=by, operation=read,
                                            fields=top, detail=kind.update_op or "",
                                            names=tuple(paths.text(p) for p in secrets)))
    return Change(address, Action.IMPORT, kind.name, id=object_id, fields=fields, diff=diff,
                  request=request, operation=kind.update_op if diff else None, after=after,
                  why=Reason(Why.VERIFIED, by=by, operation=read, fields=top))


def _compare(manifest: Manifest, entry: Entry, request: dict[str, Any],
             resolved: dict[str, Any], address: str, drifted: Drifted | None = None,
             live: Mapping[str, Any] | None = None, ignored: Sequence[str] = ()) -> Change:
    """An applied object's spec against the manifest's: a no-op, an update, or blocked.

    What changed outside govsync in a field the manifest names is compared from its
    live value (contract 12, amended: any apply puts it back); a field the manifest
    does not name keeps what the console set (an update lays the manifest over the
    object as read).  ``ignored`` fields (ignoreChanges) are never compared."""
    kind = manifest.kind
    recorded = entry.read_spec() or {}
    before = _live_base(kind, recorded, resolved, drifted, live, ignored)
    kept: tuple[str, ...] = ()
    if ignored:
        kept = tuple(p for p in ignored if paths.has(resolved, paths.parse(p))
                     or paths.has(before, paths.parse(p)))
        before, resolved = _without(before, ignored), _without(resolved, ignored)
        recorded = _without(recorded, ignored)
    if before == resolved:
        # The manifest now says what changed outside govsync (a console value copied into
        # git): nothing to send; apply records it (its request resolved, the live object).
        caught_up = drifted is not None and recorded != resolved
        return Change(address, Action.NOOP, kind.name, id=entry.id,
                      request=request if caught_up else None)
    diff = field_diff(kind, before, resolved, _secret_holes(manifest))
    top = sorted({k for k in before.keys() | resolved.keys() if before.get(k) != resolved.get(k)})
    cannot = [f for f in top if not kind.can_update(f)]
    fields = tuple(d.path for d in diff)
    # Only what changed outside govsync, the manifests as applied: put back.
    why = Reason(Why.OUTSIDE) if recorded == resolved else None
    if not cannot:
        return Change(address, Action.UPDATE, kind.name, id=entry.id, fields=fields, diff=diff,
                      request=request, operation=kind.update_op, after=manifest.dependencies,
                      why=why, kept=kept if kind.replace_all else ())
    rotated = _rotated_secrets(manifest, before, resolved)
    if rotated:
        tops = {str(p[0]) for p, _ in rotated}
        blocked = Reason(Why.SECRET_ROTATED,
                         names=tuple(f"{v} spec.{paths.text(p)}" for p, v in rotated),
                         fields=tuple(f for f in cannot if f not in tops))
    else:
        blocked = Reason(Why.CANNOT_UPDATE, fields=tuple(cannot), operation=kind.update_op)
    return Change(address, Action.BLOCKED, kind.name, id=entry.id, fields=fields, diff=diff,
                  why=blocked)


def _live_base(kind: Kind, recorded: dict[str, Any], resolved: Mapping[str, Any],
               drifted: Drifted | None, live: Mapping[str, Any] | None,
               ignored: Sequence[str]) -> dict[str, Any]:
    """The recorded spec with the live value of each field that changed outside govsync
    and that the manifest names (at a value it sets, not the API's default)."""
    if drifted is None or live is None:
        return recorded
    before = recorded
    for d in drifted.diff:
        top = top_field(d.path)
        if top not in resolved or kind.unnamed(top, resolved[top]) or any(
                paths.under(paths.parse(d.path), paths.parse(i)) for i in ignored):
            continue
        path = paths.parse(d.path)
        try:
            before = paths.put(before, path, paths.get(live, path, paths.DELETE))
        except KeyError:  # a list that grew or shrank: its whole value, as it is live
            before = paths.put(before, (top,), live.get(top, paths.DELETE))
    return before


def _without(spec: dict[str, Any], ignored: Sequence[str]) -> dict[str, Any]:
    """``spec`` without the ignored fields (ignoreChanges)."""
    for dotted in ignored:
        path = paths.parse(dotted)
        if paths.has(spec, path):
            try:
                spec = paths.put(spec, path, paths.DELETE)
            except KeyError:
                continue
    return spec


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
