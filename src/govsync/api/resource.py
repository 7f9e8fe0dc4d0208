"""The object layer: every read of an object of a kind, over one client (style lesson 20).

A flow (the refresh, the duplicate lookup, apply's settling reads, ``govsync import``)
never asks itself "can this kind be listed?": it asks this layer to

* ``all``      read a List whole: the one paginator, bounded in pages and time (a
               repeated cursor, more pages than the List's own count allows, or a
               List still paging after ``LIST_SECONDS`` is one line of error);
* ``get``      read one object by the value its Get takes (its id, or a field: a
               connector's AI provider by its connector);
* ``find``     every live object whose identifying fields (``Kind.identity``) are
               these: a List filtered on the name, a List scoped by one of them, a Get
               by one, or the whole List;
* ``present``  read one recorded object again, independently of any read before: its
               Get, else a fresh List read whole.

What the kind table and the endpoint offer are properties here (``readable``,
``listed``, ``findable``, ``by_id``): the flows read them, they do not branch on the
catalog's flags themselves.  Whether an endpoint has the reads of api-lifecycle.md
at all is learned once (``reads_offered``): a List of one object; an unknown
operation is 404 ``not_found``, and so is a Get of an unknown id, so a Get's 404
says "no such object" only once a List has shown the reads exist.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from govsync.api.catalog import Operation
from govsync.api.kinds import BY_KIND, KINDS, REFERENCES, Kind, Reference
from govsync.errors import ApiError, NotFoundError

if TYPE_CHECKING:
    from govsync.api.client import AsyncClient

# The largest page a List gives (api-lifecycle.md: limit 1-500).
PAGE = 500
# A List read whole is bounded (contract 7: whatever a server answers, a one-line error,
# never a hang): at most MAX_PAGES pages (a million objects), at most the pages its
# own count announces and COUNT_SLACK more (objects made while it is paged), and at
# most LIST_SECONDS in all.  (Each answer is bounded in bytes by the client.)
MAX_PAGES = 2_000
COUNT_SLACK = 2
LIST_SECONDS = 120.0
# Reads in flight at once through one layer.
CONCURRENCY = 128


class Page(NamedTuple):
    """One page of a List: its objects, the next cursor ('' at the end), the count of
    objects it announces (None: none)."""

    items: list[dict[str, Any]]
    cursor: str
    total: int | None


class Unfindable(Exception):
    """No read of the API (or of this endpoint) can find or read such an object."""


def readable(kind: Kind) -> bool:
    """Whether the API (api-lifecycle.md) has a read for ``kind``: a Get or a List."""
    return kind.get is not None or kind.list is not None


def listed(kind: Kind) -> bool:
    """Whether the kind's objects are read in pages of a List that needs no scope."""
    return kind.list is not None and not kind.list.scope_required


def by_id(kind: Kind) -> bool:
    """Whether one object is read by its id alone: a Get by id, or a List needing no
    scope (its pages hold it)."""
    return (kind.get is not None and kind.get.by == "id") or listed(kind)


def findable(kind: Kind) -> bool:
    """Whether an object of ``kind`` can be found on the server before it is recorded:
    the kinds table names the fields that identify it (``Kind.identity``) and the API
    has a read that finds them (its List, a List scoped by one of them, or a Get by
    one)."""
    fields = kind.identity
    if not fields:
        return False
    if kind.list is not None and (not kind.list.scope_required
                                  or any(s.path in fields for s in kind.list.scope)):
        return True
    return kind.get is not None and kind.get.by in fields


def through(kind: Kind) -> Reference | None:
    """For a kind without a List whose Get reads it by a reference to a kind whose List
    needs no scope (a connector's AI provider, by its connector): that reference.  Its
    objects are found by one Get for each object of the kind referenced."""
    if kind.list is not None or kind.get is None or kind.get.by == "id":
        return None
    return next((r for r in REFERENCES if r.id_field == kind.get.by
                 and listed(BY_KIND[r.target])), None)


def found_with(kind: Kind) -> str:
    """The read that finds an object of ``kind`` by its identifying fields (for words):
    its List, else the Get by one of them."""
    return kind.list_op or kind.get_op or "a read"


def read_with(kind: Kind) -> str:
    """The read that verifies an object of ``kind`` by its id (for words)."""
    if kind.get is not None and kind.get.by == "id":
        return kind.get.name
    return kind.list_op or kind.get_op or "a read"


def object_id(kind: Kind, obj: Mapping[str, Any]) -> Any:
    """The id of a live object (the field its create answers it under)."""
    return obj.get(kind.create.id_field, obj.get("id"))


def key_of(kind: Kind, object_id_: str | None, spec: Mapping[str, Any]) -> Any:
    """What the kind's Get (and Delete) names an object by: its id, or a spec field."""
    op = kind.get or kind.delete
    if op is None or op.by == "id":
        return object_id_
    return spec.get(op.by)


def name_filter(name: str) -> dict[str, Any]:
    """The List filter that keeps the objects named ``name`` (as ListGroups takes it)."""
    return {"filter": {"field": {"key": "name", "value": {"type": "string", "value": name}}}}


# The probe's List: one that needs no scope.
_PROBE = next(k.list for k in KINDS if k.list is not None and not k.list.scope_required)


@dataclass
class Offers:
    """What one endpoint was last found to offer: whether it has the reads of
    api-lifecycle.md (None: never learned).  Kept by whoever reads the endpoint again:
    an agent keeps one per environment across its cycles, a command one for its run.
    Each object layer learns afresh (an endpoint may gain its reads) and records here
    what it learned; what was found before only says whether a refresh may send its
    Gets before its probe has answered (``refresh.reading.Reader.may_read_ahead``)."""

    reads: bool | None = None
    # Whether it has impact reports (GetPolicyReport and what a report found); None:
    # never learned (refresh/impact.py learns it from the first 404).
    reports: bool | None = None


class Objects:
    """The objects of the API's kinds, read through one client, at most ``concurrency``
    reads in flight; what the endpoint offers, once learned, recorded in ``offers``."""

    def __init__(self, client: AsyncClient, *, concurrency: int = CONCURRENCY,
                 offers_reads: bool | None = None, offers: Offers | None = None) -> None:
        self.client = client
        self.calls = 0
        self.offers = offers if offers is not None else Offers()
        # Whether the endpoint has the reads of api-lifecycle.md (None: not learned).
        self.offers_reads = offers_reads
        self._slots = asyncio.Semaphore(concurrency)
        self._probe: asyncio.Future[bool] | None = None

    async def call(self, op: Operation, body: Mapping[str, Any]) -> dict[str, Any]:
        async with self._slots:
            self.calls += 1
            return await self.client.call(op, body)

    # -- what the endpoint offers ---------------------------------------------------------

    async def reads_offered(self) -> bool:
        """Whether the endpoint has the reads of api-lifecycle.md, learned once."""
        if self.offers_reads is not None:
            return self.offers_reads
        return await self.probe()

    def probe(self) -> asyncio.Future[bool]:
        """The one List that says whether the endpoint has the reads, sent now if it has
        not been."""
        if self._probe is None:
            self._probe = asyncio.ensure_future(self._learn())
        return self._probe

    async def _learn(self) -> bool:
        try:
            await self.call(_PROBE, {"limit": 1})
        except NotFoundError:
            self.offers_reads = self.offers.reads = False
        else:
            self.offers_reads = self.offers.reads = True
        return self.offers_reads

    def learned(self, offered: bool) -> None:
        """A List answered (or answered 404 not_found): what the endpoint offers is known."""
        if self.offers_reads is None:
            self.offers_reads = self.offers.reads = offered

    # -- reading --------------------------------------------------------------------------

    async def page(self, op: Operation, body: Mapping[str, Any]) -> Page:
        """One page of a List."""
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
        return Page(items, cursor if isinstance(cursor, str) else "",
                    count if isinstance(count, int) and not isinstance(count, bool) else None)

    async def all(self, op: Operation, body: Mapping[str, Any] | None = None,
                  first: Page | None = None) -> list[dict[str, Any]]:
        """Every object of a List (``body``: its scope or filter), page by page: the one
        paginator.  ``first``: its first page, read already."""
        body = dict(body or {})
        began = time.monotonic()
        page = first or await self.page(op, {**body, "limit": PAGE})
        out = list(page.items)
        most = MAX_PAGES
        if page.total is not None:
            most = min(most, math.ceil(max(page.total, 0) / PAGE) + COUNT_SLACK)
        pages, seen = 1, set()
        while page.cursor:
            if page.cursor in seen:
                raise ApiError(f"{op.name} repeated a page cursor; paging stopped",
                               operation=op.name)
            if pages >= most:
                raise ApiError(f"{op.name} gave more pages than "
                               + (f"its count ({page.total}) allows" if page.total is not None
                                  else f"the {MAX_PAGES} read at most")
                               + f" ({pages} of {PAGE}, and it still gives a next cursor); "
                               "paging stopped", operation=op.name)
            if time.monotonic() - began > LIST_SECONDS:
                raise ApiError(f"{op.name} was still paging after {LIST_SECONDS:.0f} s "
                               f"({pages} pages); paging stopped", operation=op.name)
            seen.add(page.cursor)
            page = await self.page(op, {**body, "limit": PAGE, "cursor": page.cursor})
            pages += 1
            out.extend(page.items)
        return out

    async def get(self, kind: Kind, key: Any) -> dict[str, Any] | None:
        """The live object the kind's Get finds by ``key`` (None: it answers 404).  Only
        where the endpoint is known to offer the reads does a 404 mean "no such object"."""
        op = kind.get
        if op is None:
            raise Unfindable(f"the API has no Get for a {kind.name}")
        if not isinstance(key, str) or not key:
            raise ApiError(f"no {op.by} to read the {kind.name} with", operation=op.name)
        try:
            answer = await self.call(op, {op.sends: key})
        except NotFoundError:
            return None
        obj = answer.get(op.response_key) if op.response_key else answer
        if not isinstance(obj, dict):
            raise ApiError(f"{op.name} answered without an object under {op.response_key!r}",
                           operation=op.name)
        return obj

    # -- finding ---------------------------------------------------------------------------

    async def find(self, kind: Kind, identity: Mapping[str, str]) -> list[dict[str, Any]]:
        """Every live object of ``kind`` whose identifying fields hold ``identity``.
        Unfindable where no read of this endpoint can find one; NotFoundError where the
        endpoint does not offer the List it tried."""
        op = kind.list
        if op is not None and not op.scope_required:
            body = (name_filter(identity["name"]) if op.search and set(identity) == {"name"}
                    else {})
            found = await self.all(op, body)
            self.learned(True)
        elif not await self.reads_offered():
            raise Unfindable(f"the endpoint does not offer the reads of a {kind.name}")
        elif op is not None and any(s.path in identity for s in op.scope):
            scope = next(s for s in op.scope if s.path in identity)
            found = await self.all(op, {scope.field: identity[scope.path]})
        elif kind.get is not None and kind.get.by in identity:
            one = await self.get(kind, identity[kind.get.by])
            found = [one] if one is not None else []
        else:
            raise Unfindable(f"no read finds a {kind.name} by "
                             f"{', '.join(identity) or 'its fields'}")
        return [o for o in found if all(o.get(f) == v for f, v in identity.items())]

    async def present(self, kind: Kind, object_id_: str,
                      spec: Mapping[str, Any]) -> dict[str, Any] | None:
        """One recorded object read again, independently of any read before (a second
        opinion before govsync creates it again or drops it: contract 12): its Get, else
        a fresh List, whole (scoped where it must be; never filtered on a name the
        console may have changed).  None: the server does not have it.  Unfindable: no read can tell."""
        if not await self.reads_offered():
            raise Unfindable(f"the endpoint does not offer the reads of a {kind.name}")
        if kind.get is not None:
            key = key_of(kind, object_id_, spec)
            if isinstance(key, str) and key:
                obj = await self.get(kind, key)
                if obj is None or kind.get.by == "id" or object_id(kind, obj) == object_id_:
                    return obj
                return None  # that key names another object now
        op = kind.list
        if op is None:
            raise Unfindable(f"no read finds a {kind.name} by its id")
        body: dict[str, Any] = {}
        if op.scope_required:
            scope = next((s for s in op.scope if isinstance(spec.get(s.path), str)), None)
            if scope is None:
                raise Unfindable(f"no {' or '.join(s.field for s in op.scope)} recorded to "
                                 f"list the {kind.name} with")
            body = {scope.field: spec[scope.path]}
        return next((o for o in await self.all(op, body) if object_id(kind, o) == object_id_),
                    None)
