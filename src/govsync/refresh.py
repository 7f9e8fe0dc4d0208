"""Refresh: read every recorded object from the server before a plan (contract section 12).

``read(client, entries)`` reads the objects state records, concurrently
across kinds: a kind with a List is read in pages (a scoped List once per
scope id), else with one Get per object.  ``compare`` then says, per
address, what changed outside govsync and what is missing.

What an endpoint offers is learned, not assumed, once per run and per kind,
without side effects: a List's first page answers 200 where the endpoint has
it; an unknown operation is 404 ``not_found`` (the reference server's
``--operations spec`` answers every operation of api-lifecycle.md so).  A
Get answers 404 for an unknown id too, so a kind that has only a Get (or a
scoped List) is read only once a List has shown that the endpoint has the
reads of api-lifecycle.md.

What govsync last applied is the answer it recorded when it applied (the
object as the server returned it, with the defaults the server filled in),
else, where the answer carries no fields (an import, an id-only answer), the
spec it sent.  Fields the server sets (``id``, timestamps, the fields its
update cannot change and no manifest sets: a policy's ``ast`` and
``version``), objects embedded in another (a connector's ``space``) and
secrets (never returned, or recorded only as ``(sensitive)`` or a keyed
fingerprint) never count as drift.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from govsync import paths
from govsync.api.catalog import Operation
from govsync.api.kinds import BY_KIND, KINDS, Kind
from govsync.errors import ApiError, ApiStatusError, NotFoundError, UnauthorizedError
from govsync.plan import (
    Action,
    Change,
    Check,
    CheckStatus,
    Drifted,
    DriftKind,
    FieldChange,
    Plan,
    exists_reason,
    field_diff,
)
from govsync.state import APPLIED, Entry
from govsync.state.model import FINGERPRINT_PREFIX
from govsync.values import SENSITIVE

if TYPE_CHECKING:
    from govsync.api.client import AsyncClient

# The largest page a List gives (api-lifecycle.md: limit 1-500).
PAGE = 500
# Gets in flight at once, over every kind.
CONCURRENCY = 32
# Fields every object carries that only the server sets.
SERVER_FIELDS = ("id", "createdAt", "updatedAt")


@dataclass
class Reading:
    """What a refresh read: the live object of each address (None: the server does not
    have it), the kinds it could not read and why, the objects whose read failed."""

    live: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    # Kinds the endpoint (or the API) offers no read for -> why.
    unreadable: dict[str, str] = field(default_factory=dict)
    # Addresses whose read failed -> why (a timeout, a 500 after retries, a wrong answer).
    failed: dict[str, str] = field(default_factory=dict)
    # Every live object of a kind read whole (all its List pages), by kind.
    listed: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # Whether the endpoint offers the reads of api-lifecycle.md (None: not learned).
    offers_reads: bool | None = None
    calls: int = 0
    # Kinds of which at least one object was read.
    kinds_read: set[str] = field(default_factory=set)

    @property
    def complete(self) -> bool:
        return not self.failed

    def read_kinds(self) -> list[str]:
        """The kinds this refresh could read (every kind with a read, where the endpoint
        showed it has them; else those it read)."""
        if self.offers_reads:
            return sorted(k.name for k in KINDS if readable(k) and k.name not in self.unreadable)
        return sorted(self.kinds_read)

    def summary(self) -> str:
        """One line for the plan: what was read live, and what could not be."""
        line = f"{len(self.live)} recorded object(s) read from the server"
        by_reason: dict[str, list[str]] = {}
        for kind, why in sorted(self.unreadable.items()):
            by_reason.setdefault(why, []).append(kind)
        for why, kinds in sorted(by_reason.items()):
            line += f"; not read ({why}), compared with the recorded state only: " + ", ".join(
                kinds)
        if self.failed:
            shown = sorted(self.failed)
            line += (f"; could not be refreshed: {len(shown)} object(s) ("
                     + ", ".join(shown[:5]) + (" ..." if len(shown) > 5 else "")
                     + f": {self.failed[shown[0]]})")
        return line


# Why a kind is not read.
NO_READ_IN_API = "the API has no read for these kinds"
NO_READ_AT_ENDPOINT = "the endpoint does not offer these reads"


def readable(kind: Kind) -> bool:
    """Whether the API (api-lifecycle.md) has a read for ``kind``."""
    return kind.get is not None or kind.list is not None


def recorded(entries: Mapping[str, Entry], addresses: Iterable[str] | None = None
             ) -> dict[str, list[Entry]]:
    """The applied entries (with an id) to read, by kind."""
    chosen = entries.keys() if addresses is None else addresses
    out: dict[str, list[Entry]] = {}
    for address in chosen:
        entry = entries.get(address)
        if entry is not None and entry.status == APPLIED and entry.id:
            out.setdefault(entry.kind, []).append(entry)
    return out


class Reader:
    """Reads objects with one client: pages of Lists, Gets, and what the endpoint offers."""

    def __init__(self, client: AsyncClient, reading: Reading,
                 concurrency: int = CONCURRENCY) -> None:
        self.client = client
        self.reading = reading
        self._slots = asyncio.Semaphore(concurrency)
        self._probe: asyncio.Task[bool] | None = None

    async def call(self, op: Operation, body: Mapping[str, Any]) -> dict[str, Any]:
        async with self._slots:
            self.reading.calls += 1
            return await self.client.call(op, body)

    async def offers_reads(self) -> bool:
        """Whether the endpoint has the reads of api-lifecycle.md: one List of one object,
        learned once (an unknown operation is 404 not_found)."""
        if self.reading.offers_reads is not None:
            return self.reading.offers_reads
        if self._probe is None:
            self._probe = asyncio.ensure_future(self._learn())
        return await self._probe

    async def _learn(self) -> bool:
        op = next(k.list for k in KINDS if k.list is not None and not k.list.scope_required)
        try:
            await self.call(op, {"limit": 1})
        except NotFoundError:
            self.reading.offers_reads = False
        else:
            self.reading.offers_reads = True
        return self.reading.offers_reads

    async def page(self, op: Operation, body: Mapping[str, Any]
                   ) -> tuple[list[dict[str, Any]], str, int | None]:
        """One page of a List: its objects, the next cursor ('' at the end), the count."""
        answer = await self.call(op, body)
        items = answer.get(op.response_key or "")
        meta = answer.get("listMetadata")
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items) or (
                meta is not None and not isinstance(meta, dict)):
            raise ApiError(f"{op.name} answered without a list of objects under "
                           f"{op.response_key!r}", operation=op.name)
        meta = meta or {}
        cursor = meta.get("nextCursor") or ""
        count = meta.get("count")
        return (items, cursor if isinstance(cursor, str) else "",
                count if isinstance(count, int) and not isinstance(count, bool) else None)

    async def all_pages(self, op: Operation, body: Mapping[str, Any],
                        first: tuple[list[dict[str, Any]], str, int | None] | None = None
                        ) -> list[dict[str, Any]]:
        items, cursor, _ = first or await self.page(op, {**body, "limit": PAGE})
        out = list(items)
        seen: set[str] = set()
        while cursor:
            if cursor in seen:
                raise ApiError(f"{op.name} repeated a page cursor; paging stopped",
                               operation=op.name)
            seen.add(cursor)
            items, cursor, _ = await self.page(op, {**body, "limit": PAGE, "cursor": cursor})
            out.extend(items)
        return out

    async def get(self, kind: Kind, entry: Entry) -> dict[str, Any] | None:
        """The live object of ``entry`` (None: the server does not have it)."""
        op = kind.get
        assert op is not None
        value = entry.id if op.by == "id" else (entry.read_spec() or {}).get(op.by)
        if not isinstance(value, str) or not value:
            raise ApiError(f"{entry.address}: no {op.by} recorded to read it with",
                           operation=op.name)
        try:
            answer = await self.call(op, {op.by: value})
        except NotFoundError:
            return None
        obj = answer.get(op.response_key) if op.response_key else answer
        if not isinstance(obj, dict):
            raise ApiError(f"{op.name} answered without an object under {op.response_key!r}",
                           operation=op.name)
        return obj


def _id_of(kind: Kind, obj: Mapping[str, Any]) -> Any:
    return obj.get(kind.create.id_field, obj.get("id"))


async def read(client: AsyncClient, entries: Mapping[str, Entry],
               addresses: Iterable[str] | None = None, *,
               concurrency: int = CONCURRENCY) -> Reading:
    """Read every applied entry of ``addresses`` (None: all) from the server."""
    reading = Reading()
    reader = Reader(client, reading, concurrency)
    by_kind = recorded(entries, addresses)
    try:
        async with asyncio.TaskGroup() as group:
            for name, kind_entries in sorted(by_kind.items()):
                group.create_task(_read_kind(reader, BY_KIND[name], kind_entries))
    except* UnauthorizedError as rejected:
        # The key, not the objects, is what to fix: said once, as the first call said it.
        raise _first(rejected) from None
    reading.kinds_read = {entries[a].kind for a in reading.live}
    return reading


def _first(group: BaseExceptionGroup[UnauthorizedError]) -> UnauthorizedError:
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first


async def _read_kind(reader: Reader, kind: Kind, entries: list[Entry]) -> None:
    reading = reader.reading
    if not readable(kind):
        reading.unreadable[kind.name] = NO_READ_IN_API
        return
    try:
        if kind.list is not None and not kind.list.scope_required:
            await _by_list(reader, kind, entries)
        elif await reader.offers_reads():
            if kind.list is not None:
                await _by_scoped_list(reader, kind, entries)
            else:
                await _by_gets(reader, kind, entries)
        else:
            reading.unreadable[kind.name] = NO_READ_AT_ENDPOINT
    except UnauthorizedError:
        raise
    except ApiError as exc:
        _failed(reading, entries, exc)


def _failed(reading: Reading, entries: Iterable[Entry], exc: ApiError) -> None:
    """The entries not read yet could not be refreshed, for the reason ``exc`` gives."""
    if isinstance(exc, UnauthorizedError):
        raise exc
    why = _failure(exc)
    for entry in entries:
        if entry.address not in reading.live:
            reading.failed[entry.address] = why


def _failure(exc: ApiError) -> str:
    if isinstance(exc, ApiStatusError):
        return f"{exc.operation} answered {exc.status} {exc.code}"
    return exc.message


async def _by_list(reader: Reader, kind: Kind, entries: list[Entry]) -> None:
    op = kind.list
    assert op is not None
    reading = reader.reading
    try:
        first = await reader.page(op, {"limit": PAGE})
    except NotFoundError:
        reading.unreadable[kind.name] = NO_READ_AT_ENDPOINT
        return
    if reading.offers_reads is None:
        reading.offers_reads = True
    items, cursor, count = first
    found = {_id_of(kind, o): o for o in items}
    unfound = [e for e in entries if e.id not in found]
    pages_left = math.ceil(max((count or 0) - len(items), 0) / PAGE) if cursor else 0
    gets = math.ceil(len(unfound) / CONCURRENCY)
    if cursor and kind.get is not None and count is not None and gets < pages_left:
        # Fewer round trips to read the rest one by one than page by page.
        for entry in entries:
            if entry.id in found:
                reading.live[entry.address] = found[entry.id]
        await _by_gets(reader, kind, unfound)
        return
    every = await reader.all_pages(op, {}, first) if cursor else items
    reading.listed[kind.name] = every
    found = {_id_of(kind, o): o for o in every}
    gone = [e for e in entries if e.id not in found]
    for entry in entries:
        if entry.id in found:
            reading.live[entry.address] = found[entry.id]
    if gone and kind.get is not None:
        await _by_gets(reader, kind, gone)  # a List may lag: the Get says for sure
    else:
        for entry in gone:
            reading.live[entry.address] = None


async def _by_scoped_list(reader: Reader, kind: Kind, entries: list[Entry]) -> None:
    """A List that needs a scope (a resource's native users): once per scope id the
    recorded objects name; objects whose scope is not recorded are read with Gets."""
    op = kind.list
    assert op is not None
    groups: dict[tuple[str, str], list[Entry]] = {}
    rest: list[Entry] = []
    for entry in entries:
        key = _scope_of(op, entry)
        if key is None:
            rest.append(entry)
        else:
            groups.setdefault(key, []).append(entry)

    async def one(scope: tuple[str, str], members: list[Entry]) -> None:
        try:
            every = await reader.all_pages(op, {scope[0]: scope[1]})
        except ApiError as exc:
            _failed(reader.reading, members, exc)
            return
        found = {_id_of(kind, o): o for o in every}
        gone = []
        for entry in members:
            if entry.id in found:
                reader.reading.live[entry.address] = found[entry.id]
            else:
                gone.append(entry)
        if gone and kind.get is not None:
            await _by_gets(reader, kind, gone)
        else:
            for entry in gone:
                reader.reading.live[entry.address] = None

    async with asyncio.TaskGroup() as group:
        for scope, members in groups.items():
            group.create_task(one(scope, members))
        if rest and kind.get is not None:
            group.create_task(_by_gets(reader, kind, rest))
        elif rest:
            for entry in rest:
                reader.reading.failed[entry.address] = (
                    f"no {' or '.join(s.field for s in op.scope)} recorded to list it with")


def _scope_of(op: Operation, entry: Entry) -> tuple[str, str] | None:
    """(request field, value) of the first scope the entry's spec or answer records."""
    spec = entry.read_spec() or {}
    for scope in op.scope:
        for source in (spec, entry.response or {}):
            value = paths.get(source, paths.split(scope.path))
            if isinstance(value, str) and value:
                return scope.field, value
    return None


async def _by_gets(reader: Reader, kind: Kind, entries: Sequence[Entry]) -> None:
    async def one(entry: Entry) -> None:
        try:
            reader.reading.live[entry.address] = await reader.get(kind, entry)
        except ApiError as exc:
            _failed(reader.reading, [entry], exc)

    async with asyncio.TaskGroup() as group:
        for entry in entries:
            group.create_task(one(entry))


# -- comparing -----------------------------------------------------------------------


class _Absent:
    """A field one side does not have."""

    def __repr__(self) -> str:
        return "(absent)"


_ABSENT = _Absent()


def compare(entries: Mapping[str, Entry], reading: Reading,
            ignore: Mapping[str, Sequence[str]] | None = None) -> list[Drifted]:
    """What changed outside govsync, and what is missing, by address (sorted)."""
    out: list[Drifted] = []
    for address in sorted(reading.live):
        entry = entries[address]
        live = reading.live[address]
        if live is None:
            out.append(Drifted(address, DriftKind.MISSING, id=entry.id))
            continue
        kind = BY_KIND[entry.kind]
        diff = outside_changes(kind, entry.read_spec() or {}, entry.response, live)
        ignored = [paths.split(p) for p in (ignore or {}).get(kind.name, ())]
        if ignored:
            diff = tuple(d for d in diff
                         if not any(paths.under(paths.split(d.path), p) for p in ignored))
        if diff:
            out.append(Drifted(address, DriftKind.CHANGED, diff, id=entry.id))
    return out


def server_set(kind: Kind) -> frozenset[str]:
    """Top-level fields the server sets: never drift (``id``, timestamps, and the fields
    the kind's update cannot change that no manifest sets: a policy's ``ast``, ``version``)."""
    update = kind.lifecycle_update
    read_only = update.read_only if update is not None else ()
    return frozenset({*SERVER_FIELDS, kind.create.id_field,
                      *(f for f in read_only if f not in kind.fields)})


def normal(kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
    """An object as compared: without what the server sets, embedded objects by id."""
    drop = server_set(kind)
    return {k: _embedded_by_id(v) for k, v in obj.items() if k not in drop}


def _embedded_by_id(value: Any) -> Any:
    """Another stored object inside this one (it has an id and a creation time) is
    compared by its id: its own changes are not this object's."""
    if isinstance(value, dict):
        if "id" in value and "createdAt" in value:
            return {"id": value["id"]}
        return {k: _embedded_by_id(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_embedded_by_id(v) for v in value]
    return value


def _has_fields(kind: Kind, response: Mapping[str, Any] | None) -> bool:
    """Whether an answer recorded at apply carries the object (not only its id)."""
    return bool(response) and any(k not in server_set(kind) for k in response or {})


def outside_changes(kind: Kind, spec: Mapping[str, Any], response: Mapping[str, Any] | None,
                    live: Mapping[str, Any]) -> tuple[FieldChange, ...]:
    """The fields of ``live`` that differ from what govsync last applied."""
    now = normal(kind, live)
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    if response is not None and _has_fields(kind, response):
        # The answer of the apply: every field it had is compared exactly.
        applied = normal(kind, response)
        for key, value in applied.items():
            exp, got = _align(value, now.get(key, _ABSENT), exact=True)
            _put(before, after, key, exp, got)
    else:
        # Only the spec sent: the fields the server returns of it (write-only and
        # input-only fields are not returned), and only the keys it set.
        for key, value in spec.items():
            if key in now:
                exp, got = _align(value, now[key], exact=False)
                _put(before, after, key, exp, got)
    if before == after:
        return ()
    return field_diff(kind, before, after)


def _put(before: dict[str, Any], after: dict[str, Any], key: str, exp: Any, got: Any) -> None:
    if exp is not _ABSENT:
        before[key] = exp
    if got is not _ABSENT:
        after[key] = got


def _secret(value: Any) -> bool:
    return value == SENSITIVE or (isinstance(value, str) and value.startswith(FINGERPRINT_PREFIX))


def _align(expected: Any, live: Any, *, exact: bool) -> tuple[Any, Any]:
    """(expected, live) made comparable: a secret on the recorded side is a secret on
    both (never read, never shown); without ``exact``, keys the recorded side does not
    have, or the live side does not return, are left out."""
    if _secret(expected):
        return SENSITIVE, SENSITIVE if live is not _ABSENT else _ABSENT
    if isinstance(expected, dict) and isinstance(live, dict):
        exp_out: dict[str, Any] = {}
        live_out: dict[str, Any] = {}
        keys = list(expected) + ([k for k in live if k not in expected] if exact else [])
        for key in keys:
            e, g = expected.get(key, _ABSENT), live.get(key, _ABSENT)
            if not exact and g is _ABSENT:
                continue
            e, g = _align(e, g, exact=exact)
            _put(exp_out, live_out, key, e, g)
        return exp_out, live_out
    if isinstance(expected, list) and isinstance(live, list) and len(expected) == len(live):
        pairs = [_align(e, g, exact=exact) for e, g in zip(expected, live, strict=True)]
        return [e for e, _ in pairs], [g for _, g in pairs]
    return expected, live


# -- the plan's view ------------------------------------------------------------------


@dataclass
class Observed:
    """A refresh's outcome: what was read, and what differs from what govsync applied."""

    reading: Reading
    drift: list[Drifted]

    @property
    def missing(self) -> frozenset[str]:
        return frozenset(d.address for d in self.drift if d.kind == DriftKind.MISSING)


async def observe(client: AsyncClient, entries: Mapping[str, Entry],
                  ignore: Mapping[str, Sequence[str]] | None = None,
                  *, concurrency: int = CONCURRENCY) -> Observed:
    """Read every recorded object and compare it with what govsync last applied."""
    reading = await read(client, entries, concurrency=concurrency)
    return Observed(reading, compare(entries, reading, ignore))


async def refreshed(client: AsyncClient, entries: Mapping[str, Entry],
                    make: Callable[[frozenset[str]], Plan],
                    ignore: Mapping[str, Sequence[str]] | None = None) -> tuple[Plan, Observed]:
    """Refresh, then the plan ``make`` makes with the missing objects as creates, its
    creates of objects that exist unrecorded blocked, and the refresh's findings on it."""
    observed = await observe(client, entries, ignore)
    plan = make(observed.missing)
    await block_existing(client, plan, entries, observed.reading)
    annotate(plan, observed)
    return plan, observed


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
        identity = _identity(kind, change)
        if identity is not None:
            wanted.setdefault(kind.name, []).append((change, identity))
    if not wanted:
        return reading
    reader = Reader(client, reading)
    found: dict[str, str] = {}
    try:
        async with asyncio.TaskGroup() as group:
            for name, creates in wanted.items():
                group.create_task(_look_up(reader, BY_KIND[name], creates, found))
    except* UnauthorizedError as rejected:
        raise _first(rejected) from None
    recorded_ids = {(e.kind, e.id) for e in entries.values() if e.id}
    for change in plan.changes:
        object_id = found.get(change.address)
        if object_id and (change.kind, object_id) not in recorded_ids:
            change.action = Action.BLOCKED
            change.id = object_id
            change.reason = exists_reason(object_id)
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
                if obj is not None and _id_of(kind, obj):
                    found[change.address] = str(_id_of(kind, obj))
        else:
            reading.unreadable[kind.name] = NO_READ_AT_ENDPOINT
    except NotFoundError:
        reading.unreadable[kind.name] = NO_READ_AT_ENDPOINT
    except UnauthorizedError:
        raise
    except ApiError as exc:
        why = _failure(exc)
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
            if match is not None and _id_of(kind, match):
                found[change.address] = str(_id_of(kind, match))
        return
    if listed is None:
        listed = reader.reading.listed[kind.name] = await reader.all_pages(op, {})
    by_value: dict[tuple[str, Any], dict[str, Any]] = {}
    for obj in listed:
        for field_name in {f for _, (f, _) in creates}:
            by_value.setdefault((field_name, obj.get(field_name)), obj)
    for change, identity in creates:
        match = by_value.get(identity)
        if match is not None and _id_of(kind, match):
            found[change.address] = str(_id_of(kind, match))


class _EntryOf(Entry):
    """A create looked up by its identifying field, as an entry ``Reader.get`` reads."""

    def __init__(self, change: Change, value: str) -> None:
        kind = BY_KIND[change.kind]
        assert kind.get is not None
        super().__init__(change.address, change.kind, None, APPLIED,
                         {kind.get.by: value})


def annotate(plan: Plan, observed: Observed) -> None:
    """Put a refresh's findings on ``plan``: ``outside`` on each change, the drift list
    (of the plan's addresses: ``--target`` leaves the rest out), one check line."""
    addresses = {c.address for c in plan.changes}
    plan.refreshed = True
    plan.drift = [d for d in observed.drift if d.address in addresses]
    changed = {d.address: d.diff for d in plan.drift if d.kind == DriftKind.CHANGED}
    for change in plan.changes:
        if change.address in changed:
            change.outside = changed[change.address]
    reading = observed.reading
    status = (CheckStatus.FAILED if reading.failed
              else CheckStatus.WARNING if reading.unreadable else CheckStatus.PASSED)
    plan.checks.append(Check("refresh", status, reading.summary()))


def skipped(plan: Plan, why: str) -> None:
    """The plan's line for a refresh not made."""
    plan.checks.append(Check("refresh", CheckStatus.SKIPPED, f"the server was not read: {why}"))
