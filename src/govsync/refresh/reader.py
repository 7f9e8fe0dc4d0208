"""Reading what state records from the server: pages of Lists, Gets, and what an
endpoint offers (learned once per run and per kind, without side effects)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from govsync import paths
from govsync.api.catalog import Operation
from govsync.api.kinds import BY_KIND, KINDS, Kind
from govsync.api.resource import PAGE, Objects, Offers, key_of, listed, object_id, readable
from govsync.errors import ApiError, ApiStatusError, NotFoundError, UnauthorizedError
from govsync.state import APPLIED, Entry

if TYPE_CHECKING:
    from govsync.api.client import AsyncClient

# Connections a refresh's client keeps (AsyncClient lanes: one pool shared by many
# callers costs more CPU than the calls).  A lane carries one call at a time, so
# this is also how many reads are in flight: the kinds without a List (a policy
# report, a connector's AI provider) are read one Get an object, and at 50 ms a
# call 2,000 Gets take 2,000 / LANES round trips.  The refresh's lanes are
# api.lanes.StreamLane (0.5-0.7 ms of CPU a call against httpcore's 1.6), so
# more of them cost little: at 1,000 objects 128 lanes leave the reference
# server's own time (about 0.6 ms a call) as the bound.
LANES = 128
# Reads in flight at once, over every kind (more than LANES would only queue).
CONCURRENCY = LANES


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
    # Creates looked up on the server before they are sent (no duplicate).
    looked_up: int = 0
    # Creates not looked up, by kind: nothing finds an object of theirs on the server
    # before govsync records it (no read, or only a Get by its id).
    unchecked: dict[str, int] = field(default_factory=dict)
    # Kinds of which at least one object was read.
    kinds_read: set[str] = field(default_factory=set)

    @property
    def complete(self) -> bool:
        return not self.failed

    @property
    def endpoint_lacks_reads(self) -> bool:
        """Whether some kinds could not be read because the endpoint lacks their reads."""
        return NO_READ_AT_ENDPOINT in self.unreadable.values()

    def read_kinds(self) -> list[str]:
        """The kinds this refresh could read (every kind with a read, where the endpoint
        showed it has them; else those it read)."""
        if self.offers_reads:
            return sorted(k.name for k in KINDS if readable(k) and k.name not in self.unreadable)
        return sorted(self.kinds_read)

    def summary(self) -> str:
        """One line for the plan: what was read live, and what could not be."""
        line = f"{len(self.live)} recorded object(s) read from the server"
        if self.looked_up:
            line += f"; {self.looked_up} create(s) looked up on the server"
        if self.unchecked:
            line += (f"; {sum(self.unchecked.values())} create(s) not checked for a "
                     "duplicate (nothing finds them on the server before they are "
                     "recorded): " + ", ".join(sorted(self.unchecked)))
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


class Reader(Objects):
    """The refresh's object layer (``api.resource.Objects``): its calls counted, and what
    the endpoint offers kept, in ``reading``; what it learns of the endpoint recorded in
    ``offers`` (``Offers``: the caller's, kept across its runs, else this run's)."""

    def __init__(self, client: AsyncClient, reading: Reading,
                 concurrency: int = CONCURRENCY, offers: Offers | None = None) -> None:
        self.reading = reading
        super().__init__(client, concurrency=concurrency, offers_reads=reading.offers_reads,
                         offers=offers)

    @property
    def offers_reads(self) -> bool | None:
        return self.reading.offers_reads

    @offers_reads.setter
    def offers_reads(self, value: bool | None) -> None:
        self.reading.offers_reads = value

    async def call(self, op: Operation, body: Mapping[str, Any]) -> dict[str, Any]:
        self.reading.calls += 1
        return await super().call(op, body)

    def may_read_ahead(self) -> bool:
        """Whether Gets may go out before the probe has answered: not where the endpoint
        was found without the reads before (``offers``: an agent refreshes every cycle,
        and each of those Gets would be answered 404 every time)."""
        return self.offers.reads is not False

    async def read(self, kind: Kind, entry: Entry) -> dict[str, Any] | None:
        """The live object of a recorded ``entry`` by the kind's Get (None: it answers 404)."""
        op = kind.get
        assert op is not None
        key = key_of(kind, entry.id, entry.read_spec() or {})
        if not isinstance(key, str) or not key:
            raise ApiError(f"{entry.address}: no {op.by} recorded to read it with",
                           operation=op.name)
        return await self.get(kind, key)


async def read(client: AsyncClient, entries: Mapping[str, Entry],
               addresses: Iterable[str] | None = None, *,
               concurrency: int = CONCURRENCY,
               done: Callable[[list[Entry], Reading], None] | None = None,
               offers: Offers | None = None) -> Reading:
    """Read every applied entry of ``addresses`` (None: all) from the server;
    ``done(entries, reading)`` as soon as each kind's are read (the other kinds'
    reads go on meanwhile); ``offers``: what the endpoint was found to offer before."""
    reading = Reading()
    reader = Reader(client, reading, concurrency, offers)
    by_kind = recorded(entries, addresses)

    async def one(kind: Kind, kind_entries: list[Entry]) -> None:
        await _read_kind(reader, kind, kind_entries)
        if done is not None:
            done(kind_entries, reading)

    # The connections the Gets will take, opened while the Lists are answered.
    gets = sum(len(e) for name, e in by_kind.items()
               if readable(BY_KIND[name]) and not listed(BY_KIND[name]))
    try:
        async with asyncio.TaskGroup() as group:
            for name, kind_entries in sorted(by_kind.items()):
                group.create_task(one(BY_KIND[name], kind_entries))
            if gets:
                group.create_task(client.warm(min(gets, concurrency)))
    except* UnauthorizedError as rejected:
        # The key, not the objects, is what to fix: said once, as the first call said it.
        raise first_rejection(rejected) from None
    reading.kinds_read = {entries[a].kind for a in reading.live}
    return reading


def first_rejection(group: BaseExceptionGroup[UnauthorizedError]) -> UnauthorizedError:
    first = group.exceptions[0]
    return first_rejection(first) if isinstance(first, BaseExceptionGroup) else first


async def _read_kind(reader: Reader, kind: Kind, entries: list[Entry]) -> None:
    reading = reader.reading
    if not readable(kind):
        reading.unreadable[kind.name] = NO_READ_IN_API
        return
    try:
        if listed(kind):
            await _by_list(reader, kind, entries)
        elif kind.list is None:
            await _by_gets_probed(reader, kind, entries)
        elif await reader.reads_offered():
            await _by_scoped_list(reader, kind, entries)
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
    why = failure(exc)
    for entry in entries:
        if entry.address not in reading.live:
            reading.failed[entry.address] = why


def failure(exc: ApiError) -> str:
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
    reader.learned(True)
    found = {object_id(kind, o): o for o in first.items}
    unfound = [e for e in entries if e.id not in found]
    pages_left = (math.ceil(max((first.total or 0) - len(first.items), 0) / PAGE)
                  if first.cursor else 0)
    gets = math.ceil(len(unfound) / CONCURRENCY)
    if first.cursor and kind.get is not None and first.total is not None and gets < pages_left:
        # Fewer round trips to read the rest one by one than page by page.
        for entry in entries:
            if entry.id in found:
                reading.live[entry.address] = found[entry.id]
        await _by_gets(reader, kind, unfound)
        return
    every = await reader.all(op, {}, first) if first.cursor else first.items
    reading.listed[kind.name] = every
    await _seen(reader, kind, entries, every, {})


async def _seen(reader: Reader, kind: Kind, entries: list[Entry],
                every: list[dict[str, Any]], body: Mapping[str, Any]) -> None:
    """The entries found among ``every`` (a List read whole, with ``body``) are live; those
    it left out are read again, independently, before they are called missing (a List
    may lag, or leave one out once: contract 12 trusts no single answer before a
    create): by their Get, else by a fresh List whole."""
    reading = reader.reading
    found = {object_id(kind, o): o for o in every}
    gone = []
    for entry in entries:
        if entry.id in found:
            reading.live[entry.address] = found[entry.id]
        else:
            gone.append(entry)
    if not gone:
        return
    if kind.get is not None:
        await _by_gets(reader, kind, gone, second=True)
        return
    assert kind.list is not None
    try:
        again = await reader.all(kind.list, body)
    except ApiError as exc:
        _failed(reading, gone, exc)
        return
    if not body:
        reading.listed[kind.name] = again  # the later read: what a lookup then uses
    found = {object_id(kind, o): o for o in again}
    for entry in gone:
        reading.live[entry.address] = found.get(entry.id)


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
        body = {scope[0]: scope[1]}
        try:
            every = await reader.all(op, body)
        except ApiError as exc:
            _failed(reader.reading, members, exc)
            return
        await _seen(reader, kind, members, every, body)

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


async def _by_gets_probed(reader: Reader, kind: Kind, entries: Sequence[Entry]) -> None:
    """Gets sent beside the probe rather than after it (a round trip less), their
    answers taken once the probe says the endpoint has the reads: until then a 404
    cannot say "no such object" (an endpoint without the operation answers 404 too).
    Where it has not, what they read is dropped and the kind is not read; they have no
    side effects (api-lifecycle.md), so all they cost such an endpoint is the calls."""
    reading = reader.reading
    if reading.offers_reads is None and reader.may_read_ahead():
        probe = reader.probe()
        await _by_gets(reader, kind, entries, second=True)
        try:
            offered = await probe
        except BaseException:
            _forget(reading, entries)  # the probe's failure is each object's
            raise
        if offered:
            # A Get that found nothing is read once more (trust no single answer).
            await _by_gets(reader, kind, [e for e in entries if e.address in reading.live
                                          and reading.live[e.address] is None], second=True)
            return
        _forget(reading, entries)
    elif await reader.reads_offered():
        await _by_gets(reader, kind, entries)
        return
    reading.unreadable[kind.name] = NO_READ_AT_ENDPOINT


def _forget(reading: Reading, entries: Iterable[Entry]) -> None:
    for entry in entries:
        reading.live.pop(entry.address, None)
        reading.failed.pop(entry.address, None)


async def _by_gets(reader: Reader, kind: Kind, entries: Sequence[Entry], *,
                   second: bool = False) -> None:
    """One Get each.  A Get that finds nothing is sent once more before the object is
    called missing (trust no single answer before a create), unless this read is
    itself the second (``second``: a List left the object out)."""
    reading = reader.reading

    async def one(entry: Entry) -> None:
        try:
            reading.live[entry.address] = await reader.read(kind, entry)
            if reading.live[entry.address] is None and not second:
                reading.live[entry.address] = await reader.read(kind, entry)
        except ApiError as exc:
            _failed(reading, [entry], exc)

    async with asyncio.TaskGroup() as group:
        for entry in entries:
            group.create_task(one(entry))


