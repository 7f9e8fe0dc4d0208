"""Stored rows to entries and back: the one reader of what a backend keeps as JSON
text, checking every value (a damaged row is ``Malformed``, turned into a
StateDamagedError by the store, in the backend's words)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from govsync.state.records import (
    Entry,
    EntryStatus,
    LockHolder,
    Snapshot,
    checked_status,
    dumps,
    now,
)


class Malformed(ValueError):
    """A stored value that is not what govsync writes (turned into StateDamagedError)."""


# What a read for planning selects in place of the last two columns of a
# snapshot's rows (the API's answer and the time of the write).
NO_ANSWER_COLUMNS = "NULL, ''"


def entries_from_json_rows(rows: Iterable[tuple[Any, ...]]) -> dict[str, Entry]:
    """``entry_from_row`` over rows whose spec and response are JSON text, taken as
    a cursor yields them (every row's text at once is 60 MB more at the peak
    of a read of 100,000 entries); each spec is kept as its text once it is
    checked to be one JSON object, and parsed again when a plan compares it."""
    entries: dict[str, Entry] = {}
    for row in rows:
        entry = entry_from_row(row)
        entries[entry.address] = entry
    return entries


_DECODE = json.JSONDecoder().raw_decode


def _json_value(text: str | bytes) -> Any:
    """The one JSON value that ``text`` is; ValueError if it is not exactly one.

    ``raw_decode`` on the text as stored (compact, no surrounding space) skips
    the two whitespace scans of ``json.loads``; anything else is left to
    ``json.loads``, which allows the space and refuses what follows a value."""
    if isinstance(text, str):
        try:
            value, end = _DECODE(text)
        except ValueError:
            pass
        else:
            if end == len(text):
                return value
    return json.loads(text)


def json_object(value: Any, name: str) -> dict[str, Any] | None:
    """A stored JSON object (text, or already parsed by the driver), or None; Malformed
    for anything else."""
    if value is None:
        return None
    if isinstance(value, str | bytes):
        try:
            value = _json_value(value)
        except ValueError:
            raise Malformed(f"its {name} is not JSON") from None
    if not isinstance(value, dict):
        raise Malformed(f"its {name} is a JSON {type(value).__name__}, not an object")
    return value


def entry_from_row(row: tuple[Any, ...]) -> Entry:
    """An Entry from a stored row (address, kind, id, status, spec, response,
    updated_at) whose spec and response are JSON text.  The entry keeps the
    spec's text once it is checked, not the parsed spec.  Raises Malformed
    naming the entry and the problem."""
    address, kind, object_id, status, spec, response, updated_at = row
    if not isinstance(address, str) or not address:
        raise Malformed(f"an entry has the address {address!r}")
    where = f"entry {address!r}"
    if not isinstance(kind, str) or not kind:
        raise Malformed(f"{where} has the kind {kind!r}")
    kind = sys.intern(kind)  # one string per kind, not one per entry
    if object_id is not None and not isinstance(object_id, str):
        raise Malformed(f"{where} has the id {object_id!r}, not a string")
    try:
        status = EntryStatus(status)
    except ValueError:
        raise Malformed(f"{where} has the unknown status {status!r} "
                        f"(known: {', '.join(EntryStatus)})") from None
    values: list[dict[str, Any] | None] = []
    for name, value in (("spec", spec), ("response", response)):
        if value is not None:
            if not isinstance(value, str | bytes):
                raise Malformed(f"{where}: its {name} is not JSON text")
            try:
                value = _json_value(value)
            except ValueError:
                raise Malformed(f"{where}: its {name} is not JSON") from None
        if value is not None and not isinstance(value, dict):
            raise Malformed(f"{where}: its {name} is a JSON {type(value).__name__}, "
                            "not an object")
        values.append(value)
    if not isinstance(updated_at, str):
        raise Malformed(f"{where} has the time {updated_at!r}, not a string")
    if isinstance(spec, str) and values[0] is not None:
        return Entry(address, kind, object_id, status, None, values[1], updated_at,
                     spec_json=spec)
    return Entry(address, kind, object_id, status, values[0], values[1], updated_at)


def snapshot_from_rows(workspace: str, head: Any, rows: Iterable[tuple[Any, ...]],
                       objects_table: str) -> Snapshot | None:
    """A workspace's row (lineage, serial, fingerprint key, entry count, endpoint,
    governance) and its entries' rows, every value checked (None: no row)."""
    if head is None:
        return None
    lineage, serial, key, count, endpoint, governance = head
    if not isinstance(lineage, str) or not lineage:
        raise Malformed(f"its lineage is {lineage!r}")
    if not isinstance(serial, int):
        raise Malformed(f"its serial is {serial!r}, not a number")
    if not isinstance(key, bytes | memoryview) or not key:
        raise Malformed("its fingerprint key is not bytes")
    if endpoint is not None and not isinstance(endpoint, str):
        raise Malformed(f"its endpoint is {endpoint!r}")
    recorded = json_object(governance, "governance")
    # Parsed row by row as the cursor yields them: never every row's text at once.
    entries = entries_from_json_rows(rows)
    if count != len(entries):
        raise Malformed(f"it records {count} entries but {objects_table} holds {len(entries)}")
    return Snapshot(workspace, lineage, serial, entries, bytes(key), endpoint, recorded)


def entry_row(workspace: str, e: Entry) -> tuple[Any, ...]:
    """An entry as a row of the objects table (JSON as text: PostgreSQL casts it)."""
    status = checked_status(e)
    return (workspace, e.address, e.kind, e.id, status.value, e.spec_text(),
            dumps(e.response) if e.response is not None else None, e.updated_at or now())


def loads(text: Any) -> Any:
    """A stored JSON text, or None when it is not JSON (a damaged record names nobody)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def holder_from_json(data: Any) -> LockHolder | None:
    """A lock's recorded holder (None: unreadable; it names nobody, the lock still holds)."""
    try:
        return LockHolder.from_dict(loads(data))
    except (TypeError, ValueError, AttributeError):
        return None
