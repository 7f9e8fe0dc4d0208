"""A change's reason in words (``planning/reasons.py`` decides it; only this module
words it), and the advice a plan with blocked changes ends with, chosen from the
reasons' types."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from govsync.api.kinds import BY_KIND, Kind
from govsync.planning.changes import Change
from govsync.planning.reasons import Reason, Why


def reason_words(change: Change) -> str:
    """What the plan says of ``change`` ('' where there is nothing to say)."""
    reason = change.why
    if reason is None:
        return ""
    kind = BY_KIND.get(change.kind)
    return _WORDS[reason.why](change, reason, kind)  # type: ignore[arg-type]


def _cannot_update(kind: Kind, fields: Sequence[str], address: str) -> str:
    names = ", ".join(fields)
    if kind.update_op is None:
        why = f"the API has no operation that updates a {kind.name}"
    else:
        why = f"{kind.update_op} can change only {kind.changeable}"
    return (f"cannot change {names}: {why}. Revert the change in the manifest, or replace the "
            f"object: `--replace {address or kind.name + '/NAME'}` creates a new one and "
            "deletes the old one")


def _rotated(c: Change, r: Reason, kind: Kind) -> str:
    secrets = ", ".join(f"{v} ({p})" for v, p in (n.split(" ", 1) for n in r.names))
    also = f"; {_cannot_update(kind, r.fields, c.address)}" if r.fields else ""
    if kind.delete is not None:
        how = (f"`govsync plan --replace {c.address}` creates a new {kind.name} with the new "
               "value, moves what uses it there and deletes the old one")
    else:
        how = (f"add a new {kind.name} under a new name with the new value, move what uses "
               "it there, then remove the old one from the manifests (`govsync apply "
               "--forget-orphans` drops it from state)")
    return (f"the value of {secrets} changed, not the manifest: the API cannot update a "
            f"{kind.name}'s secret. To rotate it, {how}; meanwhile `--target` applies the "
            f"rest of the repository{also}")


def _exists(c: Change, r: Reason, kind: Kind) -> str:
    gone = (f" (the object recorded at {c.address}, {r.detail}, is gone from the server; "
            "this one was made by someone else)") if r.detail else ""
    return (f"exists on the server as {r.id}{gone}: adopt it with an Import document or "
            "`govsync import` (or check that --state and --workspace name the state that "
            "records it)")


def _owned(c: Change, r: Reason, kind: Kind) -> str:
    workspace, address = (r.names + ("", ""))[:2]
    return (f"{r.id} on the server is recorded by workspace {workspace!r} as {address}: "
            f"an object belongs to one workspace of a state, and only that workspace "
            "changes or deletes it; remove it there (or `govsync state forget` it there "
            "first, with that workspace's approvals)")


def _protected(c: Change, r: Reason, kind: Kind) -> str:
    if c.action.value == "replace" or r.by == "--replace":
        return (f"--replace: terminationProtection is true ({r.detail}), and a replace "
                "deletes the old object, which govsync never does to a protected one: first "
                "set `terminationProtection: false` in its manifest and apply that, then "
                "replace it (two reviewed steps)")
    return (f"{r.by}: terminationProtection is true ({r.detail}), and govsync never deletes a "
            "protected object: first set `terminationProtection: false` in its manifest "
            "and apply that, then remove it (two reviewed steps)")


def _lacks(c: Change, r: Reason, kind: Kind) -> str:
    if kind.delete is not None and r.operation == kind.delete_op:
        return (f"{r.by}: this endpoint does not offer the deletes of api-lifecycle.md; "
                "forget it instead (destroy: false, or `govsync apply --forget-orphans`)")
    return (f"this endpoint does not offer {r.operation} (it serves the spec's operations "
            "only): revert the change in the manifest")


def _rename(c: Change, r: Reason, kind: Kind) -> str:
    old_name, new_name = r.names
    return (f"moving {r.detail} to {c.address} would change the {kind.name}'s API name "
            f"({old_name!r} -> {new_name!r}), and {r.operation or 'no update'} cannot change "
            f"it: keep the old address, or replace it (`--replace {r.detail}`)")


def _imported(c: Change, r: Reason, kind: Kind) -> str:
    return f"adopted by {r.by}: {r.detail}"


def _verified(c: Change, r: Reason, kind: Kind) -> str:
    head = f"adopted by {r.by}: " if r.by else ""
    if not r.fields:
        return (f"{head}verified by {r.operation}: the live object matches the manifest; it "
                "is recorded, nothing is sent")
    return (f"{head}verified by {r.operation}; {kind.update_op} then sets "
            f"{', '.join(r.fields)} as the manifest says")


def _import_fixed(c: Change, r: Reason, kind: Kind) -> str:
    return (f"adopted by {r.by}: verified by {r.operation}, but the live object differs from "
            f"the manifest in {', '.join(r.fields)}, which {r.detail or 'no operation'} cannot "
            "change: make the manifest match the live object to adopt it")


def _import_secrets(c: Change, r: Reason, kind: Kind) -> str:
    secrets = ", ".join("spec." + n for n in r.names)
    return (f"adopted by {r.by}: verified by {r.operation}, but the live object differs from "
            f"the manifest in {', '.join(r.fields)}, and {r.detail} would also send the "
            f"secret(s) {secrets}, which no read returns: make the manifest match the live "
            "object to adopt it, then change it")


def _replace(c: Change, r: Reason, kind: Kind) -> str:
    why = ("--replace" if r.by == "--replace"
           else "it refers to a replaced object and its update cannot change the reference")
    name = (f"; for a moment two {kind.name}s are named {c.address.split('/', 1)[1]!r} (the "
            "new one is created before the old one is deleted)" if kind.named else "")
    return (f"replaced ({why}): {kind.create_op} creates a new one, what refers to it is "
            f"updated, then {kind.delete_op} deletes {r.id}{name}")


def _unsettled(c: Change, r: Reason, kind: Kind) -> str:
    head = f"{r.detail}; " if r.detail else ""
    return (f"a create was sent but its outcome is unknown; {head}run `govsync state resolve "
            f"{c.address} --id ID` if it exists on the server, or `--absent` if not")


_WORDS: dict[Why, Callable[[Change, Reason, Kind], str]] = {
    Why.CANNOT_UPDATE: lambda c, r, k: _cannot_update(k, r.fields, c.address),
    Why.SECRET_ROTATED: _rotated,
    Why.EXISTS: _exists,
    Why.OWNED: _owned,
    Why.PROTECTED: _protected,
    Why.NO_DELETE: lambda c, r, k: (
        f"{r.by}: the API has no operation that deletes a {k.name}: forget it instead (a "
        "Removed document with destroy: false, or `govsync apply --forget-orphans`)"),
    Why.ENDPOINT_LACKS: _lacks,
    Why.REFERRED: lambda c, r, k: (
        f"still referred to by {', '.join(r.names)}: the server refuses to delete it; "
        "remove or change those first"),
    Why.RENAME: _rename,
    Why.IMPORT_ABSENT: lambda c, r, k: (
        f"adopted by {r.by}: no {k.name} {c.id} exists on the server ({r.operation} found "
        "none): check the Import document's id"),
    Why.IMPORT_FIXED: _import_fixed,
    Why.IMPORT_SECRETS: _import_secrets,
    Why.CODE_INVALID: lambda c, r, k: (
        f"the service says the policy's code does not compile: {r.detail}; fix the code "
        "(`govsync validate` checks it offline)"),
    Why.UNSETTLED: _unsettled,
    Why.MISSING: lambda c, r, k: f"missing on the server (recorded as {r.id}): created again",
    Why.SETTLED_ABSENT: lambda c, r, k: (
        f"a create whose outcome was unknown: {r.operation} finds no such object on the "
        "server, so it is created"),
    Why.SETTLED_EXISTS: lambda c, r, k: (
        f"a create whose outcome was unknown: {r.operation} finds it as {r.id}; apply "
        "records it" + (f" and {k.update_op} sets {', '.join(r.fields)} as the manifest says"
                        if r.fields else ", nothing is sent")),
    Why.REPLACE: _replace,
    Why.OUTSIDE: lambda c, r, k: (
        "puts back what changed outside govsync: the manifests are as applied, the server "
        "is not" + (f" ({', '.join(c.kept)} kept as live: ignoreChanges)" if c.kept else "")),
    Why.MOVED: lambda c, r, k: (
        f"re-addressed from {r.detail} in state; nothing is sent" if not c.operation
        else f"re-addressed from {r.detail} in state, then updated ({c.operation})"),
    Why.IMPORTED: _imported,
    Why.VERIFIED: _verified,
    Why.ORPHAN: lambda c, r, k: (
        "no longer in the manifests: nothing deletes it, so it stays on the server; a "
        "Removed document deletes it (destroy: true) or forgets it (false) after review; "
        "`govsync apply --forget-orphans` drops it from state" if k.delete is not None else
        f"no longer in the manifests: the API has no operation that deletes a {k.name}, so "
        "it stays on the server; a Removed document with destroy: false forgets it after "
        "review, as `govsync apply --forget-orphans` does"),
    Why.DELETE: lambda c, r, k: f"{r.by}: {k.delete_op}",
    Why.FORGET: lambda c, r, k: f"{r.by}: dropped from state; the object stays on the server",
    Why.DEPOSED: lambda c, r, k: (
        f"the old object ({r.id}) of a replace that did not finish: {k.delete_op} deletes "
        "it, as that replace would have"),
    Why.GONE: lambda c, r, k: (
        f"{r.by + ': ' if r.by else ''}the server no longer has it ({r.id}): dropped from "
        "state"),
    Why.UNREAD: lambda c, r, k: (
        f"not read from the server ({r.detail}): {c.operation} is sent the manifest's whole "
        "spec, so a field changed outside govsync that the manifest leaves at its default "
        "is set back"),
    Why.UNCERTAIN_GONE: lambda c, r, k: (
        "a create was sent but its outcome is unknown, and the manifest is gone; run "
        f"`govsync state resolve {c.address} --id ID` or `--absent`"),
}


def blocked_advice(blocked: Sequence[Change]) -> str:
    """What to do about blocked changes, chosen from their reasons' types."""
    by: dict[str, list[Change]] = {}
    for change in blocked:
        why = change.why.why if change.why is not None else Why.CANNOT_UPDATE
        by.setdefault(_ADVICE_GROUP.get(why, "revert"), []).append(change)
    out = []
    for group, changes in by.items():
        out.append(_ADVICE[group](len(changes)))
    return "; ".join(out)


_ADVICE_GROUP: dict[Why, str] = {
    Why.EXISTS: "adopt", Why.OWNED: "owned", Why.SECRET_ROTATED: "rotate",
    Why.PROTECTED: "protected", Why.NO_DELETE: "forget", Why.ENDPOINT_LACKS: "endpoint",
    Why.REFERRED: "referred", Why.IMPORT_ABSENT: "import", Why.IMPORT_FIXED: "import",
    Why.IMPORT_SECRETS: "import", Why.CODE_INVALID: "code", Why.UNSETTLED: "settle",
    Why.CANNOT_UPDATE: "replace", Why.RENAME: "replace",
}

_ADVICE: dict[str, Callable[[int], str]] = {
    "adopt": lambda n: (f"{n} exist(s) on the server unrecorded: adopt them with Import "
                        "documents or `govsync import`, or point --state at the state that "
                        "records them"),
    "owned": lambda n: (f"{n} belong(s) to another workspace of this state: change them "
                        "there"),
    "rotate": lambda n: (f"{n} secret value(s) changed, not the manifests: rotate each as its "
                         "reason says (or apply the rest with --target)"),
    "protected": lambda n: (f"{n} protected object(s): apply `terminationProtection: false` "
                            "first, then remove or replace them"),
    "forget": lambda n: f"{n} cannot be deleted by the API: forget them instead",
    "endpoint": lambda n: (f"{n} need(s) an operation this endpoint does not offer: revert "
                           "them in the manifests, or forget instead of deleting"),
    "referred": lambda n: f"{n} still referred to: remove or change what refers to them first",
    "import": lambda n: f"{n} import(s) do not match the server: fix the Import documents",
    "code": lambda n: f"{n} policy code(s) do not compile: fix the code",
    "settle": lambda n: (f"{n} unknown create(s) no read can settle: `govsync state resolve` "
                         "them"),
    "replace": lambda n: (f"{n} change(s) no update can make: revert them in the manifests, "
                          "or replace the objects with `--replace ADDR`"),
    "revert": lambda n: f"{n} change(s) cannot be made: revert them in the manifests",
}


def blocked_lines(blocked: Sequence[Change]) -> list[str]:
    """One line per blocked change: its address and why (what apply shows as it refuses)."""
    return [f"  {c.address}: {reason_words(c)}" for c in blocked]
