"""The one engine behind every operation of the catalog.

Nothing here branches on an operation's or a kind's name.  An operation row
(``api/catalog.py``) gives the kind, the verb, the response key, the id
field, the references that must exist, an update's style and read-only
fields, a List's scope; its shape (``shapes.py``) says how the stored object
differs from the request.

A create stores ``{id, **request fields, createdAt, updatedAt}`` shaped by
its row.  An update either replaces every field (replace-all: fields the
server filled in, such as a hook's status, are kept unless given; read-only
fields and those only the server sets are ignored; a counter such as a
policy's ``version`` goes up by one) or sets the fields it carries on the
stored object (sparse: an absent or ``null`` field is left unchanged).  An
object keyed by another field (a connector AI provider by its connector) is
upserted by that key.  Client-sent ``createdAt`` and ``updatedAt`` are
validated but ignored: the server owns timestamps.

A Get answers the object named by the request's ``by`` field, a List a page
(``listing.py``); neither ever returns a secret (write-only fields are
absent).  A Delete refuses an object whose ``terminationProtection`` is
true, or one another stored object refers to (``REFERRERS``: the fields the
creates' ``must_exist`` rows point at it, of kinds that can be deleted), with
a 400 naming why.  An unknown id is 404.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from govsync import paths
from govsync.api.catalog import OPERATIONS, Operation, UpdateStyle, Verb, of_kind
from govsync.api.kinds import BY_KIND
from govsync.policycode.sandbox import validity
from govsync.server.errors import ApiFailure, invalid
from govsync.server.listing import list_page
from govsync.server.reports import MOMENT_SECONDS, Reports
from govsync.server.shapes import WRITE_ONLY_KEY, ById, Shape, shape_of
from govsync.server.store import JsonObject, Store, new_id, timestamp

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SERVER_TIMESTAMPS = ("createdAt", "updatedAt")


def _referrers() -> dict[str, tuple[tuple[str, str], ...]]:
    """Target kind -> (kind, stored field) of the objects that refer to one by id."""
    found: dict[str, dict[tuple[str, str], None]] = {}
    for op in OPERATIONS:
        if op.kind is None or op.verb not in (Verb.CREATE, Verb.UPDATE) \
                or of_kind(op.kind, Verb.DELETE) is None:
            continue  # an object that can never go would pin its target for ever
        for path, target in op.must_exist:
            prefix = f"{op.wrap}." if op.wrap else ""
            stored = path.removeprefix(prefix)
            if stored != op.id_field:  # the object itself (a blocked user's user)
                found.setdefault(target, {})[op.kind, stored] = None
    return {target: tuple(refs) for target, refs in found.items()}


REFERRERS: Mapping[str, tuple[tuple[str, str], ...]] = _referrers()


def _stored_secrets(kind: str) -> tuple[str, ...]:
    """Dotted paths of the secrets a kind's stored object keeps (returned on create only)."""
    shape = shape_of(kind)
    if not shape.returns_secrets:
        return ()
    renamed = dict(shape.rename)
    out = []
    for path in BY_KIND[kind].create.secret_paths:
        parent, _, last = path.rpartition(".")
        new = renamed.get(path, last)
        out.append(f"{parent}.{new}" if parent else new)
    return tuple(out)


def _without_open_secrets(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_open_secrets(v) for k, v in value.items()
                if not WRITE_ONLY_KEY.search(k)}
    if isinstance(value, list):
        return [_without_open_secrets(v) for v in value]
    return value


def stored_id_field(kind: str) -> str:
    """The field of a stored object that holds its id: its create answer's, unless its shape
    says otherwise (a report is answered {reportId} and read {id, ...})."""
    return shape_of(kind).id_field or BY_KIND[kind].create.id_field


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

    def __init__(self, store: Store, *, report_seconds: float = MOMENT_SECONDS) -> None:
        self.store = store
        # Impact reports: evaluated in the background once created (reports.py).
        self.reports = Reports(store, seconds=report_seconds)
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
        assert op.kind is not None
        if op.verb == Verb.CHECK:  # GetPolicyCodeValidity: the engine validate uses
            return validity(request.code).public()  # type: ignore[attr-defined]
        if op.verb == Verb.RESULTS:  # what an impact report found
            return self.reports.results(op, request)
        if op.verb == Verb.GET:
            return self._get(op, request)
        if op.verb == Verb.LIST:
            page, metadata = list_page(self.store, op, request)
            assert op.response_key is not None
            return {op.response_key: [self.readable(op.kind, o) for o in page],
                    "listMetadata": metadata}
        if op.verb == Verb.DELETE:
            return self._delete(op, request)
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
        updating = op.verb == Verb.UPDATE and existing is not None
        if updating:
            assert existing is not None
            self._keep_read_only(op, shape, type(given), fields, existing)
        ns = time.time_ns()
        now = timestamp(ns)
        if updating and op.style == UpdateStyle.SPARSE:
            assert existing is not None
            obj = {**existing, **fields}
            if "updatedAt" in shape.timestamps:
                obj["updatedAt"] = now
        else:
            obj = self._build(op, shape, fields, existing, ns, now)
        if updating and shape.counter:
            assert existing is not None
            obj[shape.counter] = int(existing.get(shape.counter) or 0) + 1
        appended = self._appended(shape, existing if updating else None, obj, now)

        id_ = obj[shape.id_field or op.id_field]
        self.store.put(kind, id_, obj, key=obj.get(shape.key) if shape.key else None)
        for other_kind, other in appended:
            self.store.put(other_kind, other["id"], other)
        if shape.evaluated and not updating:
            self.reports.start(obj)

        if op.response_key:
            return {op.response_key: obj}
        if shape.response_fields:
            return {shape.answer_names.get(name, name): obj.get(name)
                    for name in shape.response_fields}
        return obj

    def readable(self, kind: str, obj: JsonObject) -> JsonObject:
        """``obj`` as a read returns it: without a secret (write-only fields absent)."""
        hidden, shape = _stored_secrets(kind), shape_of(kind)
        if not hidden and not shape.open_secrets:
            return obj
        out = copy.deepcopy(obj)
        for path in hidden:
            parent, last = _parent(out, path)
            if parent is not None:
                parent.pop(last, None)
        for path in shape.open_secrets:
            parent, last = _parent(out, path)
            if parent is not None and last in parent:
                parent[last] = _without_open_secrets(parent[last])
        return out

    def _named(self, op: Operation, request: BaseModel) -> JsonObject:
        """The object a Get or a Delete names (``op.by``, else the one of ``op.also_by`` the
        request gives); 404 when there is none."""
        assert op.kind is not None
        field, stored = op.by, op.by
        for other, matched in op.also_by:
            if getattr(request, field, None) is None:
                field, stored = other, matched
        value = getattr(request, field)
        shape = shape_of(op.kind)
        if stored == shape.key:
            found = self.store.get_by_key(op.kind, value)
        elif stored == stored_id_field(op.kind):
            found = self.store.get(op.kind, value)
        else:
            found = self._find(op.kind, stored, value)
        if found is None:
            raise ApiFailure(404, f"{field} names no existing {op.kind}")
        return found

    def _get(self, op: Operation, request: BaseModel) -> JsonObject:
        assert op.kind is not None
        found = self._named(op, request)
        if shape_of(op.kind).evaluated:  # one that nothing evaluates (a restart) starts again
            self.reports.resume(found)
        obj = self.readable(op.kind, found)
        if op.response_key:
            return {op.response_key: obj}
        return {name: obj.get(name) for name in op.response.model_fields}

    def _delete(self, op: Operation, request: BaseModel) -> JsonObject:
        assert op.kind is not None
        kind, shape = op.kind, shape_of(op.kind)
        obj = self._named(op, request)
        id_ = obj[stored_id_field(kind)]
        if obj.get("terminationProtection") is True:
            raise invalid(f"the {kind} has terminationProtection true: update it to false "
                          "before deleting it", op.by)
        for other_kind, field in REFERRERS.get(kind, ()):
            referrer = next((o for o in self.store.list(other_kind)
                             if get_path(o, field) == id_), None)
            if referrer is not None:
                raise invalid(f"the {kind} is still referred to by {other_kind} "
                              f"{referrer.get('id')} ({field}): delete or change that first",
                              op.by)
        for other_kind, other in self._appended(shape, obj, None, timestamp()):
            self.store.put(other_kind, other["id"], other)
        self.store.delete(kind, id_)
        return {"id": id_} if "id" in op.response.model_fields else {}

    def _keep_read_only(self, op: Operation, shape: Shape, given: type[BaseModel],
                        fields: JsonObject, existing: JsonObject) -> None:
        """An update ignores the fields only the server sets and those it cannot change."""
        assert op.kind is not None
        creatable = BY_KIND[op.kind].request_model.model_fields
        sent_back = {entries.field for entries in shape.by_id}
        for name in set(given.model_fields) - set(creatable) - {op.id_field} - sent_back:
            fields.pop(name, None)
        for name in op.read_only:
            if name in existing:
                fields[name] = existing[name]
            else:
                fields.pop(name, None)
        for name in shape.fixed_variant:
            old, new = existing.get(name), fields.get(name)
            if isinstance(old, dict) and isinstance(new, dict) and set(old) != set(new):
                raise invalid(f"{name}: the variant cannot change ({', '.join(sorted(old))})",
                              name)

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
        id_field = shape.id_field or op.id_field
        if existing is not None:
            id_ = existing[id_field]
        elif op.id_field in fields and not shape.key:
            id_ = fields[op.id_field]  # the client names it (session, blocked user)
        else:
            id_ = new_id(id_prefix(op.kind))
        obj: JsonObject = {id_field: id_}
        obj.update((k, v) for k, v in fields.items() if k != op.id_field)

        sent = {entries.field: obj.pop(entries.field, None) for entries in shape.by_id}
        for lookup in shape.lookups:
            value = obj.pop(lookup.field, None)
            if value is None:
                continue
            target = self._find(lookup.kind, lookup.match, value)
            if target is None:
                raise ApiFailure(404, f"{lookup.field} names no existing {lookup.kind}")
            obj.setdefault(lookup.into, []).append({lookup.entry: target})
        for entries in shape.by_id:
            if entries.field not in obj and sent[entries.field]:
                obj[entries.field] = [self._by_id(entries, i, entry)
                                      for i, entry in enumerate(sent[entries.field])]
        secrets = () if shape.returns_secrets else op.secret_paths
        self._drop(obj, secrets)
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
        if shape.compiled is not None:  # a policy's ast: its code compiled, or ""
            field, into = shape.compiled
            text = obj.get(field)
            obj[into] = validity(text).ast if isinstance(text, str) and text else ""
        self._drop(obj, shape.drop)  # inputs only, once what derives from them is made
        if "createdAt" in shape.timestamps:
            obj["createdAt"] = existing.get("createdAt", now) if existing else now
        if "updatedAt" in shape.timestamps:
            obj["updatedAt"] = now
        return obj

    @staticmethod
    def _drop(obj: JsonObject, dotted: tuple[str, ...]) -> None:
        for path in dotted:
            parent, last = _parent(obj, path)
            if parent is not None:
                parent.pop(last, None)

    def _by_id(self, entries: ById, index: int, entry: JsonObject) -> JsonObject:
        """One entry of a list sent back as read, with the object it names as stored now."""
        ((key, named),) = entry.items()
        kind = entries.kinds[key]
        target = self.store.get(kind, named["id"])
        if target is None:
            raise ApiFailure(404, f"{entries.field}.{index}.{key}.id names no existing {kind}")
        return {key: target}

    def _appended(self, shape: Shape, old: JsonObject | None, new: JsonObject | None,
                  now: str) -> list[tuple[str, JsonObject]]:
        """The other objects whose list holds a field of this one, as they will be stored
        once ``old`` (an object updated or deleted) is replaced by ``new`` (None: deleted)."""
        changed = []
        for append in shape.appends:
            ref = (new or old or {}).get(append.ref)
            target = self.store.get(append.kind, ref) if isinstance(ref, str) else None
            if target is None:
                if new is None:
                    continue  # deleting: nothing left to update
                raise ApiFailure(404, f"{append.ref} names no existing {append.kind}")
            values = list(target.get(append.list_field) or [])
            if old is not None and old.get(append.value) in values:
                values.remove(old[append.value])
            if new is not None and new[append.value] not in values:
                values.append(new[append.value])
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
