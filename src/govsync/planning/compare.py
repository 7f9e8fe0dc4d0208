"""A live object against what govsync last applied, made comparable: what the server sets,
embedded objects and secrets never count (the refresh's drift and the plan's decisions
read it)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from govsync.api.kinds import Kind
from govsync.planning.changes import FieldChange
from govsync.planning.diff import field_diff
from govsync.state.records import FINGERPRINT_PREFIX
from govsync.values import KNOWN_AFTER_APPLY_TEXT, SENSITIVE

# Fields every object carries that only the server sets.
SERVER_FIELDS = ("id", "createdAt", "updatedAt")


class _Absent:
    """A field one side does not have."""

    def __repr__(self) -> str:
        return "(absent)"


_ABSENT = _Absent()


@functools.cache
def server_set(kind: Kind) -> frozenset[str]:
    """Top-level fields the server sets: never drift (``id``, timestamps, and the fields
    the kind's update cannot change that no manifest sets: a policy's ``ast``, ``version``)."""
    update = kind.update
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
    before, after = pairs(kind, spec, response, live)
    if before == after:
        return ()
    return field_diff(kind, before, after)


def pairs(kind: Kind, spec: Mapping[str, Any], response: Mapping[str, Any] | None,
           live: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what govsync applied, what the server holds), made comparable."""
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
    return before, after


def _put(before: dict[str, Any], after: dict[str, Any], key: str, exp: Any, got: Any) -> None:
    if exp is not _ABSENT:
        before[key] = exp
    if got is not _ABSENT:
        after[key] = got


def _secret(value: Any) -> bool:
    """A value that is not compared: a secret (shown, recorded as a fingerprint), or an
    id not known yet."""
    return value in (SENSITIVE, KNOWN_AFTER_APPLY_TEXT) or (
        isinstance(value, str) and value.startswith(FINGERPRINT_PREFIX))


def _align(expected: Any, live: Any, *, exact: bool) -> tuple[Any, Any]:
    """(expected, live) made comparable: a secret on the recorded side is a secret on
    both (never read, never shown); keys the live side does not return are left out,
    and without ``exact`` those the recorded side does not have too."""
    if _secret(expected):
        return SENSITIVE, SENSITIVE if live is not _ABSENT else _ABSENT
    if isinstance(expected, dict) and isinstance(live, dict):
        exp_out: dict[str, Any] = {}
        live_out: dict[str, Any] = {}
        keys = list(expected) + ([k for k in live if k not in expected] if exact else [])
        for key in keys:
            e, g = expected.get(key, _ABSENT), live.get(key, _ABSENT)
            if g is _ABSENT:
                # Inside an object, a field the read does not return is write-only
                # (an API key inside a free-form variant), not removed.
                continue
            e, g = _align(e, g, exact=exact)
            _put(exp_out, live_out, key, e, g)
        return exp_out, live_out
    if isinstance(expected, list) and isinstance(live, list) and len(expected) == len(live):
        pairs = [_align(e, g, exact=exact) for e, g in zip(expected, live, strict=True)]
        return [e for e, _ in pairs], [g for _, g in pairs]
    return expected, live


