"""Every List of the catalog, as ListGroups: order, scope, search, filter and keyset
pagination over the objects of one kind.

A List's catalog row gives its kind, its plural key, its scoping ids (a
request field and the dotted path of the object it must equal: ListConnectors'
``spaceId``, ListConnectorListenerLinks' ``connectorId`` -> ``connector.id``)
and whether it takes search and filter.  What ListGroups does (below, with
"groups" for the objects) every List does.

Request (``ListGroupsRequest``, ``ListRequest``, ``SearchListRequest``...):

- ``order``: ``name`` (default), ``createdAt``, ``updatedAt`` or ``id``;
  ``-field`` or ``field desc`` sorts descending, ``field asc`` ascending.
  Ties are broken by id, in the same direction, so the order is total.
- ``search``: case-insensitive substring looked for in any of
  ``searchFields`` (default ``name`` and ``description``).
- ``filter``: ``{field: {key, value: {type, value}}}`` keeps the groups
  whose field equals the value (``type`` string compares text, bool takes
  ``true``/``false``, number compares numerically);
  ``{group: {filters: [...]}}`` keeps the groups every sub-filter keeps
  (AND, nested to any depth); a filter with both parts needs both.
- ``limit``: 1..500, default 50.
- ``cursor``: opaque; ``""`` starts at the beginning.

Response ``{groups, listMetadata: {after, before, count, nextCursor}}``:
``count`` is the number of groups matching search and filter (over all
pages); ``nextCursor`` the cursor of the page's last group, ``""`` on the
last page; ``after`` equals ``nextCursor``; ``before`` is the cursor the
request carried (``""`` on the first page).

A cursor is base64url (no padding) of ``{"k": [sort value, id], "q": …}``
where ``q`` fingerprints order, search and filter: paging resumes strictly
after that key (keyset pagination), so every group is returned exactly once
whatever the limit of each page, and a cursor made for another query, or one
that does not decode, is a 400 on field ``cursor``.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import hashlib
import json
import weakref
from collections.abc import Callable
from typing import Any

from govsync import paths
from govsync.api.catalog import Operation
from govsync.server.errors import invalid
from govsync.server.store import JsonObject, Store

DEFAULT_SEARCH_FIELDS = ("name", "description")

Predicate = Callable[[JsonObject], bool]
SortKey = tuple[str, str]

# Per store: (kind, its version, query fingerprint) -> objects sorted ascending
# with their keys.  Paging through a long list sorts it once.
_CACHE: weakref.WeakKeyDictionary[Store, dict[tuple[str, int, str], tuple[list[JsonObject], list[SortKey]]]]
_CACHE = weakref.WeakKeyDictionary()
_CACHE_SIZE = 32


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _parse_order(order: str) -> tuple[str, bool]:
    """``-name`` / ``name desc`` -> ("name", True); "" -> ("name", False)."""
    if not order:
        return "name", False
    if order.startswith("-"):
        return order[1:], True
    field, _, direction = order.partition(" ")
    return field, direction == "desc"


def _equals(key: str, convert: Callable[[Any], Any], target: Any) -> Predicate:
    def check(group: JsonObject) -> bool:
        return bool(convert(group.get(key)) == target)

    return check


def _compile(spec: Any) -> Predicate:
    """A filter (``GroupFilter``, ``ObjectFilter``: the same shape) as a predicate."""
    checks: list[Predicate] = []
    if spec.field is not None:
        key, kind, wanted = spec.field.key, spec.field.value.type, spec.field.value.value
        # The request model checked the value against its type.
        if kind == "number":
            checks.append(_equals(key, _number, float(wanted)))
        else:
            checks.append(_equals(key, _text, wanted))
    if spec.group is not None:
        checks.extend(
            _compile(sub) for sub in spec.group.filters)

    def all_of(group: JsonObject) -> bool:
        return all(check(group) for check in checks)

    return all_of


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _query(op: Operation, request: Any) -> tuple[str, list[str], Any, dict[str, str]]:
    """The request's search, search fields, filter and scope (empty where the List has none)."""
    scope = {s.path: value for s in op.scope
             if (value := getattr(request, s.field, None)) is not None}
    if not op.search:
        return "", [], None, scope
    return request.search, list(request.searchFields), request.filter, scope


def _fingerprint(op: Operation, request: Any, field: str, descending: bool) -> str:
    search, fields, filter_, scope = _query(op, request)
    query = {
        "order": [field, descending],
        "search": search.casefold(),
        "searchFields": sorted(fields) if search else [],
        "filter": filter_.model_dump() if filter_ else None,
        "scope": scope,
    }
    canonical = json.dumps(query, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def encode_cursor(key: SortKey, fingerprint: str) -> str:
    raw = json.dumps({"k": list(key), "q": fingerprint}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, fingerprint: str) -> SortKey:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
    except (binascii.Error, ValueError):
        raise invalid("the cursor is not one this server issued", "cursor") from None
    key = data.get("k") if isinstance(data, dict) else None
    if not (isinstance(key, list) and len(key) == 2 and all(isinstance(p, str) for p in key)):
        raise invalid("the cursor is not one this server issued", "cursor")
    if data.get("q") != fingerprint:
        raise invalid("the cursor belongs to another query (order, search or filter)", "cursor")
    return key[0], key[1]


def _matching(
    store: Store, op: Operation, request: Any, field: str, fingerprint: str
) -> tuple[list[JsonObject], list[SortKey]]:
    assert op.kind is not None
    cache = _CACHE.setdefault(store, {})
    cache_key = (op.kind, store.version(op.kind), fingerprint)
    hit = cache.get(cache_key)
    if hit is not None:
        return hit
    groups = store.list(op.kind)
    search, search_fields, filter_, scope = _query(op, request)
    for path, value in scope.items():
        keys = paths.split(path)
        groups = [g for g in groups if paths.get(g, keys) == value]
    if filter_ is not None:
        keep = _compile(filter_)
        groups = [g for g in groups if keep(g)]
    if search:
        needle = search.casefold()
        fields = search_fields or DEFAULT_SEARCH_FIELDS
        groups = [g for g in groups if any(needle in _text(g.get(f)).casefold() for f in fields)]
    keyed = sorted(
        (((_text(g.get(field)), _text(g.get("id"))), g) for g in groups), key=lambda pair: pair[0]
    )
    result = ([g for _, g in keyed], [k for k, _ in keyed])
    if len(cache) >= _CACHE_SIZE:
        cache.clear()
    cache[cache_key] = result
    return result


def list_page(store: Store, op: Operation, request: Any) -> tuple[list[JsonObject], JsonObject]:
    """One page of the objects a List request asks for, and its ``listMetadata``."""
    field, descending = _parse_order(request.order)
    fingerprint = _fingerprint(op, request, field, descending)
    after = decode_cursor(request.cursor, fingerprint) if request.cursor else None
    groups, keys = _matching(store, op, request, field, fingerprint)
    limit, total = request.limit, len(groups)
    if not descending:
        start = bisect.bisect_right(keys, after) if after else 0
        end = min(start + limit, total)
        page, page_keys, more = groups[start:end], keys[start:end], end < total
    else:
        end = bisect.bisect_left(keys, after) if after else total
        start = max(end - limit, 0)
        page, page_keys, more = groups[start:end][::-1], keys[start:end][::-1], start > 0
    next_cursor = encode_cursor(page_keys[-1], fingerprint) if more and page_keys else ""
    return page, {
        "after": next_cursor,
        "before": request.cursor,
        "count": total,
        "nextCursor": next_cursor,
    }
