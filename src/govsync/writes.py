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

import enum
import functools
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from govsync.api.catalog import Operation
from govsync.api.kinds import Kind
from govsync.errors import ApiError, NotFoundError
from govsync.refresh.reading import Reader, Reading, object_id
from govsync.values import SENSITIVE

if TYPE_CHECKING:
    from govsync.api.client import AsyncClient


def laid_over(kind: Kind, op: Operation, base: Mapping[str, Any] | None,
              send: Mapping[str, Any], changed: Collection[str] = ()) -> dict[str, Any]:
    """The whole object a replace-all update is sent: ``base`` (the live object, None: not
    read) restricted to the kind's fields (what only the server sets is never sent), the
    manifest's fields laid over it.  A field the update cannot change keeps its live value
    (the request model may still require it: a satellite's type).  ``changed``: the
    top-level fields the plan changes (always sent, even at their default)."""
    keep = set(kind.fields)
    read_only = set(op.read_only)
    obj = {k: v for k, v in (base or {}).items() if k in keep and v != SENSITIVE}
    unnamed: dict[str, Any] | None = None
    for k, v in send.items():
        if k in obj:
            if k in read_only:
                continue  # left as read: a field the update cannot change
            if k not in changed and (obj[k] != v or type(obj[k]) is not type(v)):
                # Left as read where the manifest leaves it at its default, which it
                # does not name (a description set in the console is not erased).  The
                # defaults come from the request model (pydantic, a fifth of a second
                # to import): asked for only here, where a field differs unchanged.
                unnamed = defaults(kind) if unnamed is None else unnamed
                if k in unnamed and unnamed[k] == v:
                    continue
        obj[k] = v
    return obj


@functools.cache
def defaults(kind: Kind) -> dict[str, Any]:
    """The spec fields the API's request model fills in when a manifest leaves them out,
    and their values (JSON)."""
    out: dict[str, Any] = {}
    for name, info in kind.request_model.model_fields.items():
        if info.is_required():
            continue
        value = info.get_default(call_default_factory=True)
        if value is not None:
            out[name] = value.value if isinstance(value, enum.Enum) else value
    return out


def update_object(kind: Kind, op: Operation, object_id: str | None,
                  base: Mapping[str, Any] | None, send: Mapping[str, Any],
                  changed: Collection[str] = ()) -> dict[str, Any]:
    """The object of an update request, before its wrap."""
    if kind.replace_all:
        fields = laid_over(kind, op, base, send, changed)
    else:
        fields = {k: send[k] for k in sorted(kind.updatable) if k in send}
    return {"id": object_id, **fields} if kind.update_with_id else fields


def delete_body(kind: Kind, object_id: str, spec: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(operation, body) of the delete of one object."""
    op = kind.delete
    assert op is not None
    value = object_id if op.by == "id" else spec.get(op.by, object_id)
    return op.name, {op.by: value}


async def read_live(client: AsyncClient, kind: Kind, object_id: str,
                    spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The live object (None: the server does not have it, or answers the Get 404).
    Raises ApiError when the read fails otherwise; ValueError when the kind has no Get."""
    op = kind.get
    if op is None:
        raise ValueError(f"the API has no Get for a {kind.name}")
    return await read_by(client, op, object_id if op.by == "id" else spec.get(op.by))


async def read_by(client: AsyncClient, op: Operation, value: Any) -> dict[str, Any] | None:
    """The object a Get finds by ``value`` (None: it answers 404, or not with an object)."""
    try:
        answer = await client.call(op, {op.by: value})
    except NotFoundError:
        return None
    obj = answer.get(op.response_key) if op.response_key else answer
    return obj if isinstance(obj, dict) else None


def took_effect(kind: Kind, sent: Mapping[str, Any], live: Mapping[str, Any] | None) -> bool:
    """Whether ``live`` holds what an update sent (fields a read does not return, such as
    secrets, are not compared)."""
    if live is None:
        return False
    return all(live[k] == v for k, v in sent.items() if k in kind.updatable and k in live)


async def created_beside(client: AsyncClient, kind: Kind, old_id: str,
                         sent: Mapping[str, Any]) -> dict[str, Any] | None | bool:
    """After a replace's create went unanswered: the new object (a live object of the
    kind with the fields that identify it sent, ``Kind.identity``: its name, or a native
    user's resource and label ..., holding what was sent, other than ``old_id``), False
    when a List shows there is none, None when no read can tell (a kind nothing
    identifies, a List that cannot be scoped by them, a failed read, more than one
    candidate)."""
    fields, op = kind.identity, kind.list
    identity = {f: sent.get(f) for f in fields}
    if not fields or op is None or not all(isinstance(v, str) and v for v in identity.values()):
        return None
    body: dict[str, Any] = {}
    if op.scope_required:
        scope = next((s for s in op.scope if s.path in identity), None)
        if scope is None:
            return None
        body = {scope.field: identity[scope.path]}
    elif op.search and fields == ("name",):
        body = {"filter": {"field": {"key": "name", "value": {
            "type": "string", "value": identity["name"]}}}}
    try:
        listed = await Reader(client, Reading()).all_pages(op, body)
    except ApiError:
        return None
    found = [o for o in listed if all(o.get(f) == v for f, v in identity.items())
             and str(object_id(kind, o)) != old_id and took_effect(kind, sent, o)]
    if len(found) > 1:
        return None
    return found[0] if found else False
