"""Before a create, and for an import: read what exists on the server.  A create of an
object that exists unrecorded is blocked; an import is verified by a read and never sends
a secret no read returns."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from govsync import paths
from govsync.api.kinds import BY_KIND, Kind
from govsync.errors import ApiError, NotFoundError, StateError, UnauthorizedError
from govsync.plan import (
    Action,
    Change,
    Plan,
    exists_reason,
    field_diff,
    top_field,
)
from govsync.state import APPLIED, Entry
from govsync.values import PlannedSecret, Ref, holes, shown

if TYPE_CHECKING:
    from govsync.api.client import AsyncClient

from govsync.refresh.compare import pairs
from govsync.refresh.reading import (
    NO_READ_AT_ENDPOINT,
    PAGE,
    Reader,
    Reading,
    failure,
    first_rejection,
    object_id,
    readable,
)

# -- adoption that reads -------------------------------------------------------------------


async def verify_imports(client: AsyncClient, plan: Plan, reading: Reading) -> None:
    """Read the object of every import where the endpoint can: one that does not exist
    blocks it; the plan shows how the live object differs from the manifest; apply
    sends nothing unless the manifest changes a field an update covers, and never a
    secret no read returns."""
    imports = [c for c in plan.changes if c.action == Action.IMPORT and c.id]
    if not imports:
        return
    reader = Reader(client, reading)

    async def one(change: Change) -> None:
        kind = BY_KIND[change.kind]
        try:
            live = await _read_import(reader, kind, change)
        except NotFoundError:
            reading.unreadable[kind.name] = NO_READ_AT_ENDPOINT
            return
        except UnauthorizedError:
            raise
        except ApiError as exc:
            reading.failed[change.address] = failure(exc)
            return
        if live is not _UNREAD:
            _verified(kind, change, live)

    try:
        async with asyncio.TaskGroup() as group:
            for change in imports:
                group.create_task(one(change))
    except* UnauthorizedError as rejected:
        raise first_rejection(rejected) from None


_UNREAD: Any = object()


async def _read_import(reader: Reader, kind: Kind, change: Change) -> Any:
    """The live object an import names (None: none; ``_UNREAD``: it cannot be read)."""
    assert change.id is not None
    return await _read_by_id(reader, kind, change.address, change.id, change.request or {})


async def _read_by_id(reader: Reader, kind: Kind, address: str, object_id_: str,
                      request: Mapping[str, Any]) -> Any:
    """The live object of ``object_id_`` (None: the server has none; ``_UNREAD``: it
    cannot be read: no read in the API, or none at this endpoint, or none by id)."""
    if kind.name in reader.reading.unreadable or not readable(kind):
        return _UNREAD
    if kind.get is not None and (kind.get.by == "id" or isinstance(request.get(kind.get.by),
                                                                   str)):
        if not await reader.offers_reads():  # a Get's 404 alone cannot tell
            reader.reading.unreadable[kind.name] = NO_READ_AT_ENDPOINT
            return _UNREAD
        shim = Entry(address, kind.name, object_id_, APPLIED,
                     {kind.get.by: request.get(kind.get.by)})
        obj = await reader.get(kind, shim)
        if obj is not None and kind.get.by != "id" and object_id(kind, obj) != object_id_:
            return None  # that connector's provider is another object
        return obj
    if kind.list is not None and not kind.list.scope_required:
        listed = reader.reading.listed.get(kind.name)
        if listed is None:
            listed = reader.reading.listed[kind.name] = await reader.all_pages(kind.list, {})
        return next((o for o in listed if object_id(kind, o) == object_id_), None)
    return _UNREAD


def _read_name(kind: Kind) -> str:
    return kind.get.name if kind.get is not None else (kind.list.name if kind.list else "")


async def verify_id(client: AsyncClient, kind: Kind, address: str, object_id_: str,
                    request: Mapping[str, Any]) -> str | None:
    """Before ``state import`` records ``object_id_`` at ``address``: read it.  Returns
    the operation that read it; None where it cannot be read (``unread_reason`` says
    why).  StateError when the server has no such object: nothing is recorded."""
    reader = Reader(client, Reading())
    try:
        live = await _read_by_id(reader, kind, address, object_id_, request)
    except NotFoundError:  # a List the endpoint does not offer
        return None
    if live is _UNREAD:
        return None
    if live is None:
        raise StateError(f"no {kind.name} {object_id_} exists on the server "
                         f"({_read_name(kind)} found none): check the id; nothing was "
                         "recorded")
    return _read_name(kind)


def unread_reason(kind: Kind) -> str:
    """Why ``verify_id`` could not read an object of ``kind``."""
    if not readable(kind):
        return f"the API cannot read a {kind.name}"
    if kind.get is not None or (kind.list is not None and not kind.list.scope_required):
        return f"this endpoint does not offer the reads of a {kind.name}"
    return f"a {kind.name} cannot be read by its id"


def _verified(kind: Kind, change: Change, live: dict[str, Any] | None) -> None:
    read = _read_name(kind)
    # "adopted by Import/x: " stays first: which document adopts it.
    by = change.reason.split(": ", 1)[0] + ": " if change.reason.startswith("adopted by ") \
        else ""
    _check_import(kind, change, live, read)
    change.reason = by + change.reason
    if change.action == Action.BLOCKED:
        change.request, change.operation = None, None


def _check_import(kind: Kind, change: Change, live: dict[str, Any] | None, read: str) -> None:
    if live is None:
        change.action = Action.BLOCKED
        change.reason = (f"no {kind.name} {change.id} exists on the server ({read} found "
                         "none): check the Import document's id")
        return
    request = change.request or {}
    manifest = shown(request)
    got, wanted = pairs(kind, manifest, None, live)
    change.diff = field_diff(kind, got, wanted) if got != wanted else ()
    change.fields = tuple(d.path for d in change.diff)
    if not change.diff:
        change.operation = None
        change.reason = (f"verified by {read}: the live object matches the manifest; it is "
                         "recorded, nothing is sent")
        return
    top = sorted({top_field(d.path) for d in change.diff}, key=str)
    differs = ", ".join(str(t) for t in top)
    secrets = [p for p in holes(request) if isinstance(paths.get(request, p), PlannedSecret)]
    if not all(kind.can_update(str(t)) for t in top):
        change.action = Action.BLOCKED
        change.reason = (f"verified by {read}, but the live object differs from the manifest "
                         f"in {differs}, which {kind.update_op or 'no operation'} cannot "
                         "change: make the manifest match the live object to adopt it")
    elif secrets:
        change.action = Action.BLOCKED
        change.reason = (
            f"verified by {read}, but the live object differs from the manifest in "
            f"{differs}, and {kind.update_op} would also send the secret(s) "
            f"{', '.join('spec.' + paths.text(p) for p in secrets)}, which no read returns: "
            "make the manifest match the live object to adopt it, then change it")
    else:
        change.operation = kind.update_op
        change.reason = (f"verified by {read}; {kind.update_op} then sets {differs} as the "
                         "manifest says")


# -- no duplicate from a lost or misplaced state ----------------------------------------

# Creates of one kind looked up one by one (a List filtered on the name); more read
# the kind's whole List once.
LOOKUPS = 4


Identity = tuple[tuple[str, str], ...]


def searchable(kind: Kind) -> bool:
    """Whether an object of ``kind`` can be found on the server before it is recorded:
    the kinds table names the fields that identify it (``Kind.identity``) and the API
    has a read that finds them (its List, a List scoped by one of them, or a Get by one)."""
    fields = kind.identity
    if not fields:
        return False
    listed = kind.list is not None and (
        not kind.list.scope_required or any(s.path in fields for s in kind.list.scope))
    return listed or (kind.get is not None and kind.get.by in fields)


def _identity(kind: Kind, change: Change, found: Mapping[str, str]) -> Identity | Ref | None:
    """((field, value), ...) that finds a create's object on the server; a reference to
    an object this plan creates is the id it was found under.  A ``Ref`` still unfound:
    the create waits for that object's lookup (if that object is created, this one
    cannot exist yet).  None: a field that identifies it is not set."""
    request = change.request or {}
    out: list[tuple[str, str]] = []
    for name in kind.identity:
        value = request.get(name)
        if isinstance(value, Ref):
            if value.address not in found:
                return value
            value = found[value.address]
        if not isinstance(value, str) or not value:
            return None
        out.append((name, value))
    return tuple(out)


async def block_existing(client: AsyncClient, plan: Plan, entries: Mapping[str, Entry],
                         reading: Reading | None = None,
                         recheck: Callable[[], Mapping[str, Entry]] | None = None) -> Reading:
    """Block every create whose object already exists on the server unrecorded (found
    by the fields that identify it in the kinds table: its name, its scope and label,
    ...): sending it would make a second one, or overwrite one govsync does not manage.
    A create that names another create (a discovery configuration of a native user) is looked up once
    that one is found, by its id.  Creates of kinds nothing can find are counted in
    ``reading.unchecked``.  Returns what was read."""
    reading = reading if reading is not None else Reading()
    pending: list[tuple[Change, Kind]] = []
    for change in plan.changes:
        if change.action != Action.CREATE:
            continue
        kind = BY_KIND[change.kind]
        if kind.create.retry_safe:
            # Its "create" sets the one object of its key (a connector's AI provider, a
            # link, a blocked user): sent again, it makes no second one. Apply records
            # no intent for it, so a kill after the server kept it leaves it unrecorded,
            # and the next apply sends it again, as it would without the refresh.
            continue
        if not searchable(kind):
            reading.unchecked[kind.name] = reading.unchecked.get(kind.name, 0) + 1
            continue
        pending.append((change, kind))
    reader = Reader(client, reading)
    found: dict[str, str] = {}
    creating = {change.address for change, _ in pending}
    while pending:
        wanted: dict[str, list[tuple[Change, Identity]]] = {}
        waiting: list[tuple[Change, Kind]] = []
        for change, kind in pending:
            identity = _identity(kind, change, found)
            if isinstance(identity, Ref):
                if identity.address in creating:
                    waiting.append((change, kind))
                elif identity.address.split("/", 1)[0] in reading.unreadable:
                    # What it refers to could not be looked for: neither can it.
                    reading.unchecked[kind.name] = reading.unchecked.get(kind.name, 0) + 1
            elif identity is not None:
                wanted.setdefault(kind.name, []).append((change, identity))
            else:  # a field that identifies it is not set (a native user without a label)
                reading.unchecked[kind.name] = reading.unchecked.get(kind.name, 0) + 1
        if not wanted:
            # Left waiting on creates that were never looked for (their own fields
            # unset): they cannot be looked for either.
            for _change, kind in waiting:
                reading.unchecked[kind.name] = reading.unchecked.get(kind.name, 0) + 1
            break
        try:
            async with asyncio.TaskGroup() as group:
                for name, creates in wanted.items():
                    group.create_task(_look_up(reader, BY_KIND[name], creates, found))
        except* UnauthorizedError as rejected:
            raise first_rejection(rejected) from None
        # Counted once looked for: a kind the endpoint cannot read is said as such.
        reading.looked_up += sum(len(creates) for name, creates in wanted.items()
                                 if name not in reading.unreadable)
        creating -= {change.address for creates in wanted.values() for change, _ in creates}
        pending = waiting
    recorded_ids = {(e.kind, e.id) for e in entries.values() if e.id}

    def unrecorded(change: Change) -> str | None:
        live_id = found.get(change.address)
        # An address with an entry (an intent an apply is acting on, or left uncertain)
        # is recorded: its object is that apply's, settled by `state resolve`.
        if live_id and (change.kind, live_id) not in recorded_ids \
                and change.address not in entries:
            return live_id
        return None

    if recheck is not None and any(unrecorded(c) for c in plan.changes):
        # The state was read before the server: an apply running meanwhile records its
        # intent before it sends, so the state read again now knows every object of
        # its that the lookup found (plan takes no lock).
        entries = {**entries, **recheck()}
        recorded_ids = {(e.kind, e.id) for e in entries.values() if e.id}
    for change in plan.changes:
        live_id = unrecorded(change)
        if live_id:
            change.action = Action.BLOCKED
            change.id, change.request, change.operation = live_id, None, None
            change.reason = exists_reason(live_id)
    return reading


async def _look_up(reader: Reader, kind: Kind, creates: list[tuple[Change, Identity]],
                   found: dict[str, str]) -> None:
    reading = reader.reading
    if kind.name in reading.unreadable:
        return
    try:
        if kind.list is not None and not kind.list.scope_required:
            await _look_up_listed(reader, kind, creates, found)
        elif await reader.offers_reads():
            if kind.list is not None and any(s.path in kind.identity for s in kind.list.scope):
                await _look_up_scoped(reader, kind, creates, found)
            else:
                await _look_up_by_get(reader, kind, creates, found)
        else:
            reading.unreadable[kind.name] = NO_READ_AT_ENDPOINT
    except NotFoundError:
        reading.unreadable[kind.name] = NO_READ_AT_ENDPOINT
    except UnauthorizedError:
        raise
    except ApiError as exc:
        why = failure(exc)
        for change, _ in creates:
            reading.failed.setdefault(change.address, why)


def _match(kind: Kind, objects: list[dict[str, Any]], creates: list[tuple[Change, Identity]],
           found: dict[str, str]) -> None:
    """The creates whose identifying fields an object of ``objects`` has, found."""
    by_identity: dict[Identity, dict[str, Any]] = {}
    for obj in objects:
        key = tuple((f, obj.get(f)) for f in kind.identity)
        by_identity.setdefault(key, obj)  # type: ignore[arg-type]
    for change, identity in creates:
        match = by_identity.get(identity)
        if match is not None and object_id(kind, match):
            found[change.address] = str(object_id(kind, match))


async def _look_up_listed(reader: Reader, kind: Kind, creates: list[tuple[Change, Identity]],
                          found: dict[str, str]) -> None:
    op = kind.list
    assert op is not None
    listed = reader.reading.listed.get(kind.name)
    if listed is None and op.search and kind.identity == ("name",) \
            and len(creates) <= LOOKUPS:
        for change, identity in creates:
            (field_name, value), = identity
            items, _, _ = await reader.page(op, {"limit": PAGE, "filter": {"field": {
                "key": field_name, "value": {"type": "string", "value": value}}}})
            _match(kind, items, [(change, identity)], found)
        return
    if listed is None:
        listed = reader.reading.listed[kind.name] = await reader.all_pages(op, {})
    _match(kind, listed, creates, found)


async def _look_up_scoped(reader: Reader, kind: Kind, creates: list[tuple[Change, Identity]],
                          found: dict[str, str]) -> None:
    """A List that needs a scope (a resource's native users): once per scope value the
    creates name."""
    op = kind.list
    assert op is not None
    scope = next(s for s in op.scope if s.path in kind.identity)
    by_scope: dict[str, list[tuple[Change, Identity]]] = {}
    for change, identity in creates:
        by_scope.setdefault(dict(identity)[scope.path], []).append((change, identity))
    for value, members in by_scope.items():
        _match(kind, await reader.all_pages(op, {scope.field: value}), members, found)


async def _look_up_by_get(reader: Reader, kind: Kind, creates: list[tuple[Change, Identity]],
                          found: dict[str, str]) -> None:
    """A kind read by another field than its id (a connector's AI provider, by its
    connector): one Get a create."""
    assert kind.get is not None
    for change, identity in creates:
        obj = await reader.get(kind, _EntryOf(change, dict(identity)[kind.get.by]))
        if obj is not None and object_id(kind, obj):
            found[change.address] = str(object_id(kind, obj))


class _EntryOf(Entry):
    """A create looked up by its identifying field, as an entry ``Reader.get`` reads."""

    def __init__(self, change: Change, value: str) -> None:
        kind = BY_KIND[change.kind]
        assert kind.get is not None
        super().__init__(change.address, change.kind, None, APPLIED,
                         {kind.get.by: value})


