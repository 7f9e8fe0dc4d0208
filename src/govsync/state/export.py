"""The document of ``govsync state export`` (read back by ``state import-all``): one
workspace as JSON, for a backup or a move between SQLite and PostgreSQL.

It carries the fingerprint key, so secrets' fingerprints stay comparable after a
move; never the key that authenticates saved plans (a plan made before a move
is made again after it)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from govsync.errors import StateError
from govsync.formats import FORMAT_VERSION, same_major
from govsync.state.records import Entry, Snapshot


def document(snapshot: Snapshot) -> dict[str, Any]:
    """The export of one workspace."""
    return {
        "formatVersion": FORMAT_VERSION,
        "govsyncState": 1,
        "workspace": snapshot.workspace,
        "lineage": snapshot.lineage,
        "serial": snapshot.serial,
        "fingerprintKey": base64.b64encode(snapshot.key).decode(),
        "entries": [e.as_dict() for e in snapshot.entries.values()],
    }


def read(data: Mapping[str, Any]) -> tuple[list[Entry], str | None, bytes]:
    """(entries, lineage, fingerprint key) of an export; StateError when it is not one,
    or records one id at two addresses."""
    if data.get("govsyncState") != 1:
        raise StateError("not a govsync state export (missing govsyncState: 1)")
    version = data.get("formatVersion", FORMAT_VERSION)  # exports before 1.0 had none
    if not same_major(version):
        raise StateError(f"the export has format {version!r}; this govsync reads "
                         f"{FORMAT_VERSION}")
    try:
        entries = [
            Entry(e["address"], e["kind"], e.get("id"), e["status"], e.get("spec"),
                  e.get("response"), e.get("updatedAt", ""))
            for e in data["entries"]
        ]
        key = base64.b64decode(data["fingerprintKey"], validate=True)
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:
        raise StateError(f"invalid state export: {exc}") from exc
    seen: dict[tuple[str, str], str] = {}
    for e in entries:
        if e.id and (e.kind, e.id) in seen:
            raise StateError(f"invalid state export: id {e.id} is recorded at both "
                             f"{seen[(e.kind, e.id)]} and {e.address} (one object has one "
                             "address); nothing was changed")
        if e.id:
            seen[(e.kind, e.id)] = e.address
    lineage = data.get("lineage")
    return entries, lineage if isinstance(lineage, str) else None, key
