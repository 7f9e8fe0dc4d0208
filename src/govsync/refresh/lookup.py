"""Before a plan decides: what exists on the server beside what state records.  Each object
the plan would create (a create, a replace's new object, a create whose outcome is
unknown) is looked up by the fields that identify it; each Import document's object is
read by its id.  The planner decides from what is found (``Observation.found`` and
``imports``); nothing here changes a plan."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from govsync.api.kinds import BY_KIND, Kind
from govsync.api.resource import (
    Unfindable,
    findable,
    object_id,
    read_with,
    readable,
)
from govsync.api.resource import listed as is_listed
from govsync.errors import ApiError, NotFoundError, StateError, UnauthorizedError
from govsync.plan import Action, Change
from govsync.refresh.reader import (
    NO_READ_AT_ENDPOINT,
    Reader,
    Reading,
    failure,
    first_rejection,
)
from govsync.values import Ref

if TYPE_CHECKING:
    from govsync.api.client import AsyncClient

# Creates of one kind looked up one by one (a List filtered on the name); more read
# the kind's whole List once.
LOOKUPS = 4

Identity = tuple[tuple[str, str], ...]


def _identity(kind: Kind, change: Change, found: Mapping[str, tuple[str, ...]]
              ) -> Identity | Ref | None:
    """((field, value), ...) that finds a create's object on the server; a reference to
    an object this plan creates is the id it was found under.  A ``Ref`` still unfound:
    the create waits for that object's lookup.  () where that object was looked for and
    not found: it is created, so this one cannot exist yet.  None: a field that
    identifies it is not set, or the object it names is ambiguous."""
    request = change.request or {}
    out: list[tuple[str, str]] = []
    for name in kind.identity:
        value = request.get(name)
        if isinstance(value, Ref):
            ids = found.get(value.address)
            if ids is None:
                return value
            if not ids:
                return ()
            if len(ids) > 1:
                return None
            value = ids[0]
        if not isinstance(value, str) or not value:
            return None
        out.append((name, value))
    return tuple(out)


async def look_up(reader: Reader, changes: list[Change]) -> dict[str, tuple[str, ...]]:
    """For each of ``changes`` whose object can be found before it is recorded, the ids of
    the live objects with its identifying fields (``Kind.identity``: its name, its scope
    and label ...).  A create that names another create (a discovery configuration of a
    native user) is looked up once that one is found, by its id.  What nothing can find
    is counted in ``reading.unchecked``; reads that fail, in ``reading.failed``."""
    reading = reader.reading
    pending: list[tuple[Change, Kind]] = []
    for change in changes:
        kind = BY_KIND[change.kind]
        if change.action == Action.CREATE and kind.create.retry_safe:
            # Its "create" sets the one object of its key (a connector's AI provider, a
            # link, a blocked user): sent again, it makes no second one.
            continue
        if not findable(kind):
            reading.unchecked[kind.name] = reading.unchecked.get(kind.name, 0) + 1
            continue
        pending.append((change, kind))
    found: dict[str, tuple[str, ...]] = {}
    creating = {change.address for change, _ in pending}
    while pending:
        wanted: dict[str, list[tuple[Change, Identity]]] = {}
        waiting: list[tuple[Change, Kind]] = []
        for change, kind in pending:
            identity = _identity(kind, change, found)
            if isinstance(identity, Ref):
                if identity.address in creating:
                    waiting.append((change, kind))
                else:  # what it refers to could not be looked for: neither can it
                    reading.unchecked[kind.name] = reading.unchecked.get(kind.name, 0) + 1
            elif identity == ():
                continue  # what it refers to is created by this plan: it cannot exist
            elif identity is not None:
                wanted.setdefault(kind.name, []).append((change, identity))
            else:  # a field that identifies it is not set (a native user without a label)
                reading.unchecked[kind.name] = reading.unchecked.get(kind.name, 0) + 1
        if not wanted:
            for _change, kind in waiting:
                reading.unchecked[kind.name] = reading.unchecked.get(kind.name, 0) + 1
            break
        try:
            async with asyncio.TaskGroup() as group:
                for name, creates in wanted.items():
                    group.create_task(_look_up(reader, BY_KIND[name], creates, found))
        except* UnauthorizedError as rejected:
            raise first_rejection(rejected) from None
        reading.looked_up += sum(len(creates) for name, creates in wanted.items()
                                 if name not in reading.unreadable)
        creating -= {change.address for creates in wanted.values() for change, _ in creates}
        pending = waiting
    return found


async def _look_up(reader: Reader, kind: Kind, creates: list[tuple[Change, Identity]],
                   found: dict[str, tuple[str, ...]]) -> None:
    reading = reader.reading
    if kind.name in reading.unreadable:
        return
    try:
        listed = reading.listed.get(kind.name)
        if listed is None and is_listed(kind) and len(creates) > LOOKUPS:
            assert kind.list is not None
            listed = reading.listed[kind.name] = await reader.all(kind.list)
        for change, identity in creates:
            wanted = dict(identity)
            matches = ([o for o in listed if all(o.get(f) == v for f, v in wanted.items())]
                       if listed is not None else await reader.find(kind, wanted))
            found[change.address] = tuple(str(object_id(kind, o)) for o in matches
                                          if object_id(kind, o))
    except (NotFoundError, Unfindable):
        reading.unreadable[kind.name] = NO_READ_AT_ENDPOINT
    except UnauthorizedError:
        raise
    except ApiError as exc:
        why = failure(exc)
        for change, _ in creates:
            found.pop(change.address, None)
            reading.failed.setdefault(change.address, why)


# -- imports ---------------------------------------------------------------------------------


async def read_imports(reader: Reader, changes: list[Change]
                       ) -> dict[str, dict[str, Any] | None]:
    """The live object of every Import document's id where the endpoint can read it
    (None: the server has none).  One not read is left out (no read in the API, none at
    this endpoint: ``reading.unreadable``; a failed read: ``reading.failed``)."""
    imports = [c for c in changes if c.action == Action.IMPORT and c.id]
    out: dict[str, dict[str, Any] | None] = {}
    reading = reader.reading

    async def one(change: Change) -> None:
        kind = BY_KIND[change.kind]
        if kind.name in reading.unreadable or not readable(kind):
            return
        assert change.id is not None
        try:
            if not await reader.reads_offered():
                reading.unreadable[kind.name] = NO_READ_AT_ENDPOINT
                return
            out[change.address] = await reader.present(kind, change.id, change.request or {})
        except NotFoundError:
            reading.unreadable[kind.name] = NO_READ_AT_ENDPOINT
        except Unfindable:
            return  # not by this id (a field its Get reads it by is not known yet)
        except UnauthorizedError:
            raise
        except ApiError as exc:
            reading.failed[change.address] = failure(exc)

    try:
        async with asyncio.TaskGroup() as group:
            for change in imports:
                group.create_task(one(change))
    except* UnauthorizedError as rejected:
        raise first_rejection(rejected) from None
    return out


async def verify_id(client: AsyncClient, kind: Kind, address: str, object_id_: str,
                    request: Mapping[str, Any]) -> str | None:
    """Before ``state import`` records ``object_id_`` at ``address``: read it.  Returns
    the operation that read it; None where it cannot be read (``unread_reason`` says
    why).  StateError when the server has no such object: nothing is recorded."""
    reader = Reader(client, Reading())
    try:
        live = await reader.present(kind, object_id_, request)
    except (NotFoundError, Unfindable):
        return None
    if live is None:
        raise StateError(f"no {kind.name} {object_id_} exists on the server "
                         f"({read_with(kind)} found none): check the id; nothing was "
                         "recorded")
    return read_with(kind)


def unread_reason(kind: Kind) -> str:
    """Why ``verify_id`` could not read an object of ``kind``."""
    if not readable(kind):
        return f"the API cannot read a {kind.name}"
    if kind.get is not None or kind.list is not None:
        return f"this endpoint does not offer the reads of a {kind.name}"
    return f"a {kind.name} cannot be read by its id"
