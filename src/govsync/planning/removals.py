"""Planning what ends or re-addresses an object: ``Removed`` documents (a delete, or a
forget), ``prune``, termination protection, deletes ordered dependants first and blocked
while an object that stays refers to them; ``Moved`` and ``Import`` documents."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, NamedTuple

from govsync.api.kinds import BY_KIND
from govsync.errors import Problem
from govsync.manifests.directives import Directive
from govsync.manifests.manifest import ManifestSet
from govsync.planning.changes import Action, Change
from govsync.planning.observation import Observation
from govsync.planning.reasons import Reason, Why
from govsync.state import APPLIED, Entry

# What a Moved or Removed document is told when the address it takes an object from is
# still defined in the manifests, and when another document of its kind already takes it.
STILL_DEFINED = {
    "Moved": "remove it (a move keeps one object under a new address)",
    "Removed": "remove its manifest (a Removed document ends an object whose manifest is gone)",
}
TAKEN = {"Moved": "is already moved by {other}", "Removed": "is already removed by {other}: keep one"}


def source_problem(d: Directive, manifests: ManifestSet, taken: Mapping[str, Directive]
                   ) -> Problem | None:
    """The one check a Moved and a Removed document share: the object it takes (its
    ``from``) has no manifest left, and no other document of its kind takes it."""
    address = d.spec["from"]
    if address in manifests.objects:
        return Problem(*d.where("from"), f"{d.label}: {address} is still defined in the "
                       f"manifests: {STILL_DEFINED[d.kind]}")
    if address in taken:
        return Problem(*d.where("from"), f"{d.label}: {address} "
                       + TAKEN[d.kind].format(other=taken[address].label))
    return None


def directives(manifests: ManifestSet, entries: Mapping[str, Entry], problems: list[Problem]
               ) -> tuple[dict[str, str], dict[str, Directive]]:
    """Moves still to make (new address -> old) and imports still to make (address -> doc).

    The loader has checked that every ``to`` names a manifest.  Moves are settled first;
    an Import whose object is already recorded at its ``to``, or that a move brings
    there, is done (a no-op, as Terraform's ``import`` block after apply): it claims
    nothing, so it never stands in the way of a later Moved document."""
    moved: dict[str, str] = {}
    claims: dict[str, Directive] = {}
    sources: dict[str, Directive] = {}
    for d in manifests.directives:
        if d.kind != "Moved":
            continue
        old, new = d.spec["from"], d.spec["to"]
        if new in claims:
            problems.append(Problem(*d.where("to"), f"{d.label}: {claims[new].label} already "
                                    f"moves an object to {new}: keep one"))
            continue
        problem = source_problem(d, manifests, sources)
        if problem is not None:
            problems.append(problem)
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
            claims[new] = d
        # else: applied already (new in state), or nothing to move: a no-op
    imported: dict[str, Directive] = {}
    for d in manifests.directives:
        if d.kind != "Import":
            continue
        new, wanted = d.spec["to"], d.spec["id"]
        entry = entries.get(moved.get(new, new))
        if entry is not None and entry.id == wanted:
            continue  # done: recorded there, or moved there by a Moved document
        if new in claims:
            problems.append(Problem(*d.where("to"), (
                f"{d.label}: {claims[new].label} already "
                + ("adopts an object as" if claims[new].kind == "Import" else "moves an "
                   f"object (id {entry.id if entry else '?'}) to")
                + f" {new}: keep one")))
            continue
        holder = recorded_at(entries, manifests.objects[new].kind.name, wanted)
        if entry is None and holder is not None:
            problems.append(Problem(*d.where("id"), (
                f"{d.label}: id {wanted} is already recorded at {holder}: one object "
                f"has one address; to re-address it, write a Moved document from {holder} "
                f"to {new} (or run `govsync state mv {holder} {new}`)")))
        elif entry is None:
            imported[new] = d
            claims[new] = d
        else:
            problems.append(Problem(*d.where("id"), f"{d.label}: {new} is already in state "
                                    f"as {entry.id}, not {wanted}: `govsync state "
                                    "forget` it first to adopt another object"))
    return moved, imported


def removals(manifests: ManifestSet, entries: Mapping[str, Entry], problems: list[Problem]
             ) -> dict[str, Directive]:
    """The Removed documents to act on, by the address they remove (one recorded, whose
    manifest is gone; one already gone from state is a no-op)."""
    out: dict[str, Directive] = {}
    for d in manifests.removals:
        address = d.spec["from"]
        problem = source_problem(d, manifests, out)
        if problem is not None:
            problems.append(problem)
        elif address in entries:
            out[address] = d
    return out


def protected(spec: Mapping[str, Any] | None) -> bool:
    return bool(spec) and spec.get("terminationProtection") is True  # type: ignore[union-attr]


class Referrers(NamedTuple):
    """Who refers to an object about to end: the ends and changes it waits for, and the
    objects that stay and still refer to it ("address (field)" each)."""

    waits: tuple[str, ...] = ()
    staying: tuple[str, ...] = ()


def referrers(entries: Mapping[str, Entry], ends: Collection[str],
              changes: Iterable[Change]) -> dict[str, Referrers]:
    """By the id of each recorded object in ``ends`` (the addresses a plan ends): what refers
    to it.  A referrer that ends too is waited for (dependants first), and so is one this
    plan points elsewhere (an update or a replace whose request names another id)."""
    ending_ids: dict[str, str] = {e.id: a for a in ends if (e := entries[a]).id}
    if not ending_ids:
        return {}
    sending = {c.address: c.request for c in changes
               if c.action in (Action.UPDATE, Action.REPLACE, Action.MOVE)
               and c.request is not None}
    waits: dict[str, list[str]] = {}
    staying: dict[str, list[str]] = {}
    for address, entry in entries.items():
        spec = entry.read_spec() or {}
        for ref in BY_KIND[entry.kind].references if entry.kind in BY_KIND else ():
            target_id = spec.get(ref.id_field)
            target = ending_ids.get(target_id) if isinstance(target_id, str) else None
            if target is None or not isinstance(target_id, str) or entries[target].kind != ref.target or target == address:
                continue
            if address in ends or (address in sending
                                   and sending[address].get(ref.id_field) != target_id):
                waits.setdefault(target_id, []).append(address)
            else:
                staying.setdefault(target_id, []).append(f"{address} ({ref.id_field})")
    return {i: Referrers(tuple(waits.get(i, ())), tuple(sorted(staying.get(i, ()))))
            for i in waits.keys() | staying.keys()}


def ending(entry: Entry, directive: Directive | None, seen: Observation,
           referred: Referrers | None = None, *, deposed: bool = False) -> Change:
    """The delete (or forget) of a recorded object: ``directive`` a Removed document, None
    for ``prune`` (or, ``deposed``, the old object of a replace that did not finish).
    Blocked where the object is protected (in state or live), another workspace of the
    state records it, objects that stay still refer to it (``referred``), the API or
    the endpoint cannot delete it; a forget where the server no longer has it."""
    kind = BY_KIND[entry.kind]
    address = entry.address
    by = directive.label if directive is not None else "" if deposed else "prune: true"
    if directive is not None and directive.spec["destroy"] is False:
        return Change(address, Action.FORGET, entry.kind, id=entry.id,
                      why=Reason(Why.FORGET, by=by))
    if address in seen.live and seen.live[address] is None:
        return Change(address, Action.FORGET, entry.kind, id=entry.id,
                      why=Reason(Why.GONE, by=by, id=entry.id))
    blocked: Reason | None = None
    live = seen.live.get(address)
    referred = referred or Referrers()
    if kind.delete is None:
        blocked = Reason(Why.NO_DELETE, by=by)
    elif protected(entry.read_spec()) or protected(live):
        blocked = Reason(Why.PROTECTED, by=by or "the unfinished replace",
                         detail="in state" if protected(entry.read_spec()) else "live")
    elif entry.id is not None and entry.id in seen.owners:
        blocked = Reason(Why.OWNED, id=entry.id, names=seen.owners[entry.id])
    elif seen.lacks_writes:
        blocked = Reason(Why.ENDPOINT_LACKS, by=by, operation=kind.delete_op)
    elif referred.staying:
        blocked = Reason(Why.REFERRED, names=referred.staying)
    if blocked is not None:
        return Change(address, Action.BLOCKED, entry.kind, id=entry.id, why=blocked)
    assert kind.delete is not None
    return Change(address, Action.DELETE, entry.kind, id=entry.id,
                  operation=kind.delete.name, after=referred.waits,
                  why=Reason(Why.DEPOSED, id=entry.id) if deposed else Reason(Why.DELETE, by=by))


def recorded_at(entries: Mapping[str, Entry], kind: str, object_id: str) -> str | None:
    """The address at which an object of ``kind`` with ``object_id`` is recorded (None:
    nowhere): one object, one address."""
    return next((a for a, e in entries.items() if e.id == object_id and e.kind == kind), None)
