"""Comparing a live object with what govsync last applied: what the server sets,
embedded objects and secrets never count."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from govsync import paths
from govsync.api.kinds import BY_KIND
from govsync.plan import Drifted, DriftKind
from govsync.planning.compare import SERVER_FIELDS, normal, outside_changes, pairs, server_set
from govsync.refresh.reader import Reading
from govsync.state import Entry

__all__ = ["SERVER_FIELDS", "by_address", "compare", "compare_read", "normal",
           "outside_changes", "pairs", "server_set"]

# -- comparing -----------------------------------------------------------------------


def compare(entries: Mapping[str, Entry], reading: Reading,
            ignore: Mapping[str, Sequence[str]] | None = None) -> list[Drifted]:
    """What changed outside govsync, and what is missing, by address (sorted)."""
    return sorted(compare_read(entries.values(), reading, ignore), key=by_address)


def by_address(drifted: Drifted) -> str:
    return drifted.address


def compare_read(entries: Iterable[Entry], reading: Reading,
                 ignore: Mapping[str, Sequence[str]] | None = None) -> list[Drifted]:
    """``compare`` for those of ``entries`` that ``reading`` has read, unsorted (a
    refresh compares each kind as soon as it is read, while the others are read)."""
    out: list[Drifted] = []
    for entry in entries:
        address = entry.address
        if address not in reading.live:
            continue
        live = reading.live[address]
        if live is None:
            out.append(Drifted(address, DriftKind.MISSING, id=entry.id))
            continue
        kind = BY_KIND[entry.kind]
        diff = outside_changes(kind, entry.read_spec() or {}, entry.response, live)
        ignored = [paths.split(p) for p in (ignore or {}).get(kind.name, ())]
        if ignored:
            diff = tuple(d for d in diff
                         if not any(paths.under(paths.split(d.path), p) for p in ignored))
        if diff:
            out.append(Drifted(address, DriftKind.CHANGED, diff, id=entry.id))
    return out


