"""What an update or a delete sends, and the read that settles one whose answer was lost
(contract section 12).

A replace-all update (``…V2``, UpdateHook) replaces every mutable field with what it
is sent, so it is sent read-modify-write: the object as the server just returned it,
the manifest's fields laid over it, the fields the update cannot change left out.  A
sparse update is sent the manifest's fields the update covers; an absent one stays.
A delete is sent the object's id (or the field that names it).  Where an update or a
delete was sent and no answer came, one read says whether it took effect; where the
create of a replace's new object was, a List of the kind's objects of that name does
(the new one is the one whose id is not the old one's).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from govsync import paths
from govsync.api.catalog import Operation
from govsync.api.kinds import Kind
from govsync.api.resource import Objects, Unfindable, key_of, object_id
from govsync.errors import ApiError
from govsync.values import SENSITIVE


def laid_over(kind: Kind, op: Operation, base: Mapping[str, Any] | None,
              send: Mapping[str, Any], changed: Collection[str] = (),
              kept: Collection[str] = ()) -> dict[str, Any]:
    """The whole object a replace-all update is sent: ``base`` (the live object, None: not
    read) restricted to the kind's fields (what only the server sets is never sent), the
    manifest's fields laid over it.  A field the update cannot change keeps its live value
    (the request model may still require it: a satellite's type).  ``changed``: the
    top-level fields the plan changes (always sent, even at their default).  ``kept``:
    fields (dotted) sent as read whatever the manifest says (ignoreChanges)."""
    # What the update carries: a field it does not (a hook's status) is never sent.
    keep = set(kind.update_fields) | (set(op.read_only) & set(kind.fields))
    read_only = set(op.read_only)
    obj = {k: v for k, v in (base or {}).items() if k in keep and v != SENSITIVE}
    for k, v in send.items():
        if k not in keep:
            continue
        if k in obj:
            if k in read_only:
                continue  # left as read: a field the update cannot change
            if (k not in changed and (obj[k] != v or type(obj[k]) is not type(v))
                    and kind.unnamed(k, v)):
                # Left as read where the manifest leaves it at its default, which it
                # does not name (a description set in the console is not erased).
                continue
        obj[k] = v
    for dotted in kept:
        path = paths.parse(dotted)
        if base is not None and paths.has(base, path):
            obj = paths.put(obj, path, paths.get(base, path))
    return obj


def update_object(kind: Kind, op: Operation, object_id: str | None,
                  base: Mapping[str, Any] | None, send: Mapping[str, Any],
                  changed: Collection[str] = (), kept: Collection[str] = ()
                  ) -> dict[str, Any]:
    """The object of an update request, before its wrap (``kept``: fields sent as read)."""
    if kind.replace_all:
        fields = laid_over(kind, op, base, send, changed, kept)
    else:
        fields = {k: send[k] for k in sorted(kind.updatable) if k in send and k not in kept}
    return {"id": object_id, **fields} if kind.update_with_id else fields


def delete_body(kind: Kind, object_id: str, spec: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(operation, body) of the delete of one object."""
    op = kind.delete
    assert op is not None
    return op.name, {op.by: key_of(kind, object_id, spec) or object_id}


def changed_since(kind: Kind, op: Operation, seen: Mapping[str, Any],
                  fresh: Mapping[str, Any]) -> list[str]:
    """The fields a replace-all update sends (every one it carries) whose live value
    changed between the read the plan showed (``seen``) and the one just made
    (``fresh``): an edit made meanwhile, which the update would write over, or write
    into govsync's record, unseen."""
    sent = (set(kind.update_fields) - set(op.read_only) - {"id", "createdAt", "updatedAt"})
    return sorted(k for k in sent if seen.get(k) != fresh.get(k))


def took_effect(kind: Kind, sent: Mapping[str, Any], live: Mapping[str, Any] | None) -> bool:
    """Whether ``live`` holds what an update sent (fields a read does not return, such as
    secrets, are not compared)."""
    if live is None:
        return False
    return all(live[k] == v for k, v in sent.items() if k in kind.updatable and k in live)


async def created_beside(objects: Objects, kind: Kind, old_id: str,
                         sent: Mapping[str, Any]) -> dict[str, Any] | None | bool:
    """After a replace's create went unanswered: the new object (a live object of the
    kind with the fields that identify it sent, ``Kind.identity``: its name, or a native
    user's resource and label ..., holding what was sent, other than ``old_id``), False
    when a read shows there is none, None when no read can tell (a kind nothing
    identifies, a failed read, more than one candidate)."""
    identity = {f: v for f in kind.identity if isinstance(v := sent.get(f), str) and v}
    if not identity or len(identity) != len(kind.identity):
        return None
    try:
        listed = await objects.find(kind, identity)
    except (ApiError, Unfindable):
        return None
    found = [o for o in listed if str(object_id(kind, o)) != old_id
             and took_effect(kind, sent, o)]
    if len(found) > 1:
        return None
    return found[0] if found else False
