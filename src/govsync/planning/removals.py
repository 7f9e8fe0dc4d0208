"""Planning what ends or re-addresses an object: ``Removed`` documents (a delete, or a
forget), ``prune``, termination protection, deletes ordered dependants first and blocked
while an object that stays refers to them; ``Moved`` and ``Import`` documents."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from govsync.api.kinds import BY_KIND
from govsync.errors import Problem
from govsync.manifests.directives import Directive
from govsync.manifests.model import ManifestSet
from govsync.planning.model import Action, Change
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
