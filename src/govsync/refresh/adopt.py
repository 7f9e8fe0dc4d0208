"""Before a create, and for an import: read what exists on the server.  A create of an
object that exists unrecorded is blocked; an import is verified by a read and never sends
a secret no read returns."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from govsync import paths
from govsync.api.kinds import BY_KIND, Kind
from govsync.errors import ApiError, NotFoundError, UnauthorizedError
from govsync.plan import (
    Action,
    Change,
    Plan,
    exists_reason,
    field_diff,
    top_field,
)
from govsync.state import APPLIED, Entry
from govsync.values import PlannedSecret, holes, shown

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
    if kind.name in reader.reading.unreadable or not readable(kind):
        return _UNREAD
    request = change.request or {}
    if kind.get is not None and (kind.get.by == "id" or isinstance(request.get(kind.get.by),
                                                                   str)):
        if not await reader.offers_reads():  # a Get's 404 alone cannot tell
            reader.reading.unreadable[kind.name] = NO_READ_AT_ENDPOINT
            return _UNREAD
        shim = Entry(change.address, kind.name, change.id, APPLIED,
                     {kind.get.by: request.get(kind.get.by)})
        obj = await reader.get(kind, shim)
        if obj is not None and kind.get.by != "id" and object_id(kind, obj) != change.id:
            return None  # that connector's provider is another object
        return obj
    if kind.list is not None and not kind.list.scope_required:
        listed = reader.reading.listed.get(kind.name)
        if listed is None:
            listed = reader.reading.listed[kind.name] = await reader.all_pages(kind.list, {})
        return next((o for o in listed if object_id(kind, o) == change.id), None)
    return _UNREAD


def _verified(kind: Kind, change: Change, live: dict[str, Any] | None) -> None:
    read = kind.get.name if kind.get is not None else (kind.list.name if kind.list else "")
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


def _identity(kind: Kind, change: Change) -> tuple[str, str] | None:
    """(field, value) that finds a create's object on the server, where a read can: the
    API name; for a kind read by another field than its id (a connector's AI provider,
    by its connector), that field.  None: nothing identifies it before it exists."""
    request = change.request or {}
    if kind.named and kind.list is not None and not kind.list.scope_required:
        name = request.get("name")
        return ("name", name) if isinstance(name, str) else None
    if kind.get is not None and kind.get.by != "id":
        value = request.get(kind.get.by)
        return (kind.get.by, value) if isinstance(value, str) else None
    return None


async def block_existing(client: AsyncClient, plan: Plan, entries: Mapping[str, Entry],
                         reading: Reading | None = None) -> Reading:
    """Block every create whose object already exists on the server unrecorded (found
    by its name, or its identifying field): sending it would make a second one, or
    overwrite one govsync does not manage.  Returns what was read."""
    reading = reading if reading is not None else Reading()
    wanted: dict[str, list[tuple[Change, tuple[str, str]]]] = {}
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
        identity = _identity(kind, change)
        if identity is not None:
            wanted.setdefault(kind.name, []).append((change, identity))
    if not wanted:
        return reading
    reader = Reader(client, reading)
    reading.looked_up += sum(len(creates) for creates in wanted.values())
    found: dict[str, str] = {}
    try:
        async with asyncio.TaskGroup() as group:
            for name, creates in wanted.items():
                group.create_task(_look_up(reader, BY_KIND[name], creates, found))
    except* UnauthorizedError as rejected:
        raise first_rejection(rejected) from None
    recorded_ids = {(e.kind, e.id) for e in entries.values() if e.id}
    for change in plan.changes:
        live_id = found.get(change.address)
        # An address with an entry (an intent an apply is acting on, or left uncertain)
        # is recorded: its object is that apply's, settled by `state resolve`.
        if live_id and (change.kind, live_id) not in recorded_ids \
                and change.address not in entries:
            change.action = Action.BLOCKED
            change.id, change.request, change.operation = live_id, None, None
            change.reason = exists_reason(live_id)
    return reading


async def _look_up(reader: Reader, kind: Kind, creates: list[tuple[Change, tuple[str, str]]],
                   found: dict[str, str]) -> None:
    reading = reader.reading
    if kind.name in reading.unreadable:
        return
    try:
        if kind.list is not None and not kind.list.scope_required:
            await _look_up_listed(reader, kind, creates, found)
        elif await reader.offers_reads():
            for change, (_field, value) in creates:
                obj = await reader.get(kind, _EntryOf(change, value))
                if obj is not None and object_id(kind, obj):
                    found[change.address] = str(object_id(kind, obj))
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


async def _look_up_listed(reader: Reader, kind: Kind,
                          creates: list[tuple[Change, tuple[str, str]]],
                          found: dict[str, str]) -> None:
    op = kind.list
    assert op is not None
    listed = reader.reading.listed.get(kind.name)
    if listed is None and op.search and len(creates) <= LOOKUPS:
        for change, (field_name, value) in creates:
            items, _, _ = await reader.page(op, {"limit": PAGE, "filter": {"field": {
                "key": field_name, "value": {"type": "string", "value": value}}}})
            match = next((o for o in items if o.get(field_name) == value), None)
            if match is not None and object_id(kind, match):
                found[change.address] = str(object_id(kind, match))
        return
    if listed is None:
        listed = reader.reading.listed[kind.name] = await reader.all_pages(op, {})
    by_value: dict[tuple[str, Any], dict[str, Any]] = {}
    for obj in listed:
        for field_name in {f for _, (f, _) in creates}:
            by_value.setdefault((field_name, obj.get(field_name)), obj)
    for change, identity in creates:
        match = by_value.get(identity)
        if match is not None and object_id(kind, match):
            found[change.address] = str(object_id(kind, match))


class _EntryOf(Entry):
    """A create looked up by its identifying field, as an entry ``Reader.get`` reads."""

    def __init__(self, change: Change, value: str) -> None:
        kind = BY_KIND[change.kind]
        assert kind.get is not None
        super().__init__(change.address, change.kind, None, APPLIED,
                         {kind.get.by: value})


