"""A partial apply (``agent: {partialApply: true}``): when a plan has blocked
changes, the agent holds back each blocked change and every change that depends
on it, directly or not, and applies the rest, as ``govsync apply --target``
would with the other changes' addresses (``cycle.apply_rest``) (so every check of an apply still
runs on what is sent: rules, approvals, the lock).  What it held back is listed
in the cycle's ``held`` (the API's ``heldBack``), its reason and its
notifications.  Without the opt-in, one blocked change holds back the whole
environment (``Blocked``, nothing applied).
"""

from __future__ import annotations

from govsync.manifests.manifest import ManifestSet
from govsync.plan import Action, Plan

# How many held-back addresses a reason names (the API lists them all).
NAMED = 10


def held_back(plan: Plan, manifests: ManifestSet) -> list[str]:
    """The blocked changes' addresses, then every change that depends on one of them."""
    blocked = [c.address for c in plan.blocked()]
    held = set(blocked)
    dependants: dict[str, set[str]] = {}
    for address, manifest in manifests.objects.items():
        for dependency in manifest.dependencies:
            dependants.setdefault(dependency, set()).add(address)
    todo = list(blocked)
    while todo:
        for address in dependants.get(todo.pop(), ()):
            if address not in held:
                held.add(address)
                todo.append(address)
    changing = {c.address for c in plan.changes if c.action != Action.NOOP}
    return blocked + sorted(held & changing - set(blocked))


def said(held: list[str], blocked: int) -> str:
    """The held-back changes as a reason says them."""
    named = ", ".join(held[:NAMED]) + (f" and {len(held) - NAMED} more"
                                       if len(held) > NAMED else "")
    return (f"held back {len(held)} change(s): {named} ({blocked} blocked, "
            f"{len(held) - blocked} depending on them)")
