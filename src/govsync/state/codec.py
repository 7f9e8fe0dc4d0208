"""Stored rows to entries: the one reader of what a backend keeps as JSON text,
checking every value (a damaged row is ``Malformed``, turned into a
StateDamagedError by the backend that read it)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from govsync.state.model import Entry, EntryStatus


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
