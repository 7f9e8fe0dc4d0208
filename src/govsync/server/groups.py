"""ListGroups: order, search, filter and keyset pagination over the groups.

Request (``ListGroupsRequest``):

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

from govsync.api.models import GroupFilter, ListGroupsRequest
from govsync.server.errors import invalid
from govsync.server.store import JsonObject, Store

GROUP = "Group"
DEFAULT_SEARCH_FIELDS = ("name", "description")

Predicate = Callable[[JsonObject], bool]
SortKey = tuple[str, str]

# Per store: (groups version, query fingerprint) -> groups sorted ascending
# with their keys.  Paging through a long list sorts it once.
_CACHE: weakref.WeakKeyDictionary[Store, dict[tuple[int, str], tuple[list[JsonObject], list[SortKey]]]]
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


def _compile(spec: GroupFilter) -> Predicate:
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


def _fingerprint(request: ListGroupsRequest, field: str, descending: bool) -> str:
    query = {
        "order": [field, descending],
        "search": request.search.casefold(),
        "searchFields": sorted(request.searchFields) if request.search else [],
        "filter": request.filter.model_dump() if request.filter else None,
    }
    canonical = json.dumps(query, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _encode_cursor(key: SortKey, fingerprint: str) -> str:
    raw = json.dumps({"k": list(key), "q": fingerprint}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str, fingerprint: str) -> SortKey:
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
    store: Store, request: ListGroupsRequest, field: str, fingerprint: str
) -> tuple[list[JsonObject], list[SortKey]]:
    cache = _CACHE.setdefault(store, {})
    cache_key = (store.version(GROUP), fingerprint)
    hit = cache.get(cache_key)
    if hit is not None:
        return hit
    groups = store.list(GROUP)
    if request.filter is not None:
        keep = _compile(request.filter)
        groups = [g for g in groups if keep(g)]
    if request.search:
        needle = request.search.casefold()
        fields = request.searchFields or DEFAULT_SEARCH_FIELDS
        groups = [g for g in groups if any(needle in _text(g.get(f)).casefold() for f in fields)]
    keyed = sorted(
        (((_text(g.get(field)), _text(g.get("id"))), g) for g in groups), key=lambda pair: pair[0]
    )
    result = ([g for _, g in keyed], [k for k, _ in keyed])
    if len(cache) >= _CACHE_SIZE:
        cache.clear()
    cache[cache_key] = result
    return result


def list_groups(store: Store, request: ListGroupsRequest) -> JsonObject:
    field, descending = _parse_order(request.order)
    fingerprint = _fingerprint(request, field, descending)
    after = _decode_cursor(request.cursor, fingerprint) if request.cursor else None
    groups, keys = _matching(store, request, field, fingerprint)
    limit, total = request.limit, len(groups)
    if not descending:
        start = bisect.bisect_right(keys, after) if after else 0
        end = min(start + limit, total)
        page, page_keys, more = groups[start:end], keys[start:end], end < total
    else:
        end = bisect.bisect_left(keys, after) if after else total
        start = max(end - limit, 0)
        page, page_keys, more = groups[start:end][::-1], keys[start:end][::-1], start > 0
    next_cursor = _encode_cursor(page_keys[-1], fingerprint) if more and page_keys else ""
    return {
        "groups": page,
        "listMetadata": {
            "after": next_cursor,
            "before": request.cursor,
            "count": total,
            "nextCursor": next_cursor,
        },
    }
