"""The one engine behind every operation of the catalog.

Nothing here branches on an operation's or a kind's name.  An operation row
(``api/catalog.py``) gives the kind, the verb, the response key, the id
field and the references that must exist; the kind's row (``api/kinds.py``)
says whether its update replaces the whole object; its shape
(``shapes.py``) says how the stored object differs from the request.  The
one read operation, ListGroups, is looked up in ``READS``.

A create stores ``{id, **request fields, createdAt, updatedAt}`` shaped by
its row.  An update either replaces every field (replace-all kinds; fields
the server filled in, such as a hook's status, are kept unless given) or
sets the fields it carries on the stored object (``null`` leaves a field
unchanged).  An object keyed by another field (a connector AI provider by
its connector) is upserted by that key.  Client-sent ``createdAt`` and
``updatedAt`` are validated but ignored: the server owns timestamps.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from govsync import paths
from govsync.api.catalog import Operation, UpdateStyle
from govsync.server.errors import ApiFailure
from govsync.server.groups import list_groups
from govsync.server.shapes import Shape, shape_of
from govsync.server.store import JsonObject, Store, new_id, timestamp

READS: Mapping[str, Callable[[Store, Any], JsonObject]] = {"ListGroups": list_groups}

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SERVER_TIMESTAMPS = ("createdAt", "updatedAt")


def id_prefix(kind: str) -> str:
    """``ConnectorAIProvider`` -> ``connector-ai-provider``."""
    return _CAMEL.sub("-", kind).lower()


def dump(value: Any) -> Any:
    """A validated request as JSON values; fields left out or null are omitted.

    Free-form objects (``dict[str, Any]`` fields) are kept exactly as sent.
    """
    if isinstance(value, BaseModel):
        out = {}
        for name in type(value).model_fields:
            item = getattr(value, name)
            if item is not None:
                out[name] = dump(item)
        return out
    if isinstance(value, list):
        return [dump(v) for v in value]
    return value


def get_path(obj: Mapping[str, Any] | None, path: str) -> Any:
    """The value at a dotted path, or None."""
    return paths.get(obj, paths.split(path))


def _parent(obj: JsonObject, path: str) -> tuple[JsonObject | None, str]:
    """The mapping that holds a dotted path's last key (None: there is none), and that key."""
    keys = paths.split(path)
    node = paths.get(obj, keys[:-1])
    return (node if isinstance(node, dict) else None), str(keys[-1])


class Engine:
    """Performs operations against a store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        # (kind, field) -> (the kind's store version, {value: first object with it})
        self._indexes: dict[tuple[str, str], tuple[int, dict[Any, JsonObject]]] = {}

    def check_references(self, op: Operation, body: Mapping[str, Any]) -> None:
        """404 when an id the request names does not exist (null ids are skipped)."""
        for path, kind in op.must_exist:
            value = get_path(body, path)
            if value is not None and not self.store.exists(kind, value):
                raise ApiFailure(404, f"{path} names no existing {kind}")

    def perform(self, op: Operation, request: BaseModel) -> JsonObject:
        """Carries out a validated request and returns the response body."""
        if op.verb.reads:
            return READS[op.name](self.store, request)
        assert op.kind is not None
        kind, shape = op.kind, shape_of(op.kind)
        wrap = op.wrap
        given = getattr(request, wrap) if wrap else request
        fields: JsonObject = dump(given)
        for name in shape.keep_null:
            if name in type(given).model_fields:
                fields.setdefault(name, None)
        for name in _SERVER_TIMESTAMPS:
            fields.pop(name, None)

        existing = self._existing(op, shape, fields)
        ns = time.time_ns()
        now = timestamp(ns)
        if existing is not None and op.style == UpdateStyle.SPARSE:
            obj = {**existing, **fields}
            if "updatedAt" in shape.timestamps:
                obj["updatedAt"] = now
        else:
            obj = self._build(op, shape, fields, existing, ns, now)
        appended = self._appended(shape, fields, now)

        id_ = obj[op.id_field]
        self.store.put(kind, id_, obj, key=obj.get(shape.key) if shape.key else None)
        for other_kind, other in appended:
            self.store.put(other_kind, other["id"], other)

        if op.response_key:
            return {op.response_key: obj}
        if shape.response_fields:
            return {name: obj.get(name) for name in shape.response_fields}
        return obj

    # --- steps ----------------------------------------------------------------

    def _existing(self, op: Operation, shape: Shape, fields: JsonObject) -> JsonObject | None:
        assert op.kind is not None
        if shape.key:
            return self.store.get_by_key(op.kind, fields[shape.key])
        if op.id_field in fields:
            return self.store.get(op.kind, fields[op.id_field])
        return None

    def _build(
        self,
        op: Operation,
        shape: Shape,
        fields: JsonObject,
        existing: JsonObject | None,
        ns: int,
        now: str,
    ) -> JsonObject:
        """A new object, or a replacement of ``existing``, from the request fields."""
        assert op.kind is not None
        if existing is not None:
            id_ = existing[op.id_field]
        elif op.id_field in fields and not shape.key:
            id_ = fields[op.id_field]  # the client names it (session, blocked user)
        else:
            id_ = new_id(id_prefix(op.kind))
        obj: JsonObject = {op.id_field: id_}
        obj.update((k, v) for k, v in fields.items() if k != op.id_field)

        for lookup in shape.lookups:
            value = obj.pop(lookup.field, None)
            if value is None:
                continue
            target = self._find(lookup.kind, lookup.match, value)
            if target is None:
                raise ApiFailure(404, f"{lookup.field} names no existing {lookup.kind}")
            obj.setdefault(lookup.into, []).append({lookup.entry: target})
        secrets = () if shape.returns_secrets else op.secret_paths
        for path in (*shape.drop, *secrets):
            parent, last = _parent(obj, path)
            if parent is not None:
                parent.pop(last, None)
        for path, new_name in shape.rename:
            parent, last = _parent(obj, path)
            if parent is not None and last in parent:
                parent[new_name] = parent.pop(last)
        for embed in shape.embeds:
            ref = obj.get(embed.field)
            target = self.store.get(embed.kind, ref) if isinstance(ref, str) else None
            if target is not None:
                obj[embed.into] = target
        for path, default in shape.defaults.items():
            parent, last = _parent(obj, path)
            if parent is None or last in parent:
                continue
            kept = get_path(existing, path)
            parent[last] = copy.deepcopy(default if kept is None else kept)
        for name, derive in shape.derived.items():
            obj[name] = derive(obj, ns)
        if "createdAt" in shape.timestamps:
            obj["createdAt"] = existing.get("createdAt", now) if existing else now
        if "updatedAt" in shape.timestamps:
            obj["updatedAt"] = now
        return obj

    def _appended(self, shape: Shape, fields: JsonObject, now: str) -> list[tuple[str, JsonObject]]:
        """The other objects a create appends to, as they will be stored."""
        changed = []
        for append in shape.appends:
            target = self.store.get(append.kind, fields[append.ref])
            if target is None:
                raise ApiFailure(404, f"{append.ref} names no existing {append.kind}")
            values = list(target.get(append.list_field) or [])
            value = fields[append.value]
            if value not in values:
                values.append(value)
            changed.append((append.kind, {**target, append.list_field: values, "updatedAt": now}))
        return changed

    def _find(self, kind: str, match: str, value: Any) -> JsonObject | None:
        """The first stored object of ``kind`` whose ``match`` is ``value``.

        Through an index by value, made again whenever the kind changes (the
        groups and users looked up are seeded, so it is made once): a scan
        per call cost 67 ms per CreatePolicy with 100,000 groups."""
        if not isinstance(value, str):
            return next((c for c in self.store.list(kind) if get_path(c, match) == value), None)
        version = self.store.version(kind)
        cached = self._indexes.get((kind, match))
        if cached is None or cached[0] != version:
            index: dict[Any, JsonObject] = {}
            for candidate in self.store.list(kind):
                found = get_path(candidate, match)
                if isinstance(found, str):
                    index.setdefault(found, candidate)
            cached = self._indexes[(kind, match)] = (version, index)
        return cached[1].get(value)
