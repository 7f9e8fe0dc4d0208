"""A file of recorded inputs (``plan --impact-from FILE``, ``impact: {from}``): JSON lines
``{"time", "stage", "input"}``, one logged request a line, read distrustfully.

A line that is not such an object (not JSON, not UTF-8, an unknown stage, a time that is
not one, deeper or longer than govsync reads) is skipped and its number kept; the rest
are read all the same.  The file is read within bounds (its size, its lines, a line's
length): a huge or binary file ends the reading with a sentence saying so, never a
traceback or all of the memory.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any, NamedTuple

from govsync.files import Unreadable, display_path, open_regular
from govsync.paths import MAX_DEPTH, nested_over
from govsync.planning.impact import Window
from govsync.policycode import ACTIONS

# What is read of a file, at most: its bytes, its lines, one line's bytes (a million
# records are about 2 GB once parsed: what a plan may hold, and ten times the scale
# measured in BENCHMARKS.md).
MAX_BYTES = 256 * 1024 * 1024
MAX_LINES = 1_000_000
MAX_LINE = 1024 * 1024
# The skipped lines kept (their numbers) and described, at most.
KEPT_SKIPPED = 100
DESCRIBED = 3
_PROBE = 8192


class Record(NamedTuple):
    """One recorded request: its line, its time as written and in ns, stage, input."""

    line: int
    time: str
    now_ns: int
    stage: str
    input: dict[str, Any]


class Recorded(NamedTuple):
    """What a file gave: its records (in the window), how many lines were skipped and the
    first of their numbers, a few of them described; ``error``: why nothing could be read
    (missing, binary); ``cut``: why the reading stopped before the end."""

    path: str
    records: list[Record]
    skipped: int = 0
    skipped_lines: tuple[int, ...] = ()
    described: tuple[str, ...] = ()
    error: str = ""
    cut: str = ""
    outside: int = 0  # records older than the window


def read(path: str, window: Window | None = None, now: datetime | None = None) -> Recorded:
    """The records of ``path`` (those in ``window`` ending ``now``, where given)."""
    shown = display_path(path)
    if not os.path.lexists(path):
        return Recorded(shown, [], error=f"{shown} does not exist")
    try:  # a FIFO, a socket or a device in its place is refused, never waited on
        handle = open_regular(path)
    except Unreadable as exc:
        return Recorded(shown, [], error=f"{shown} cannot be used: {exc}")
    with handle:
        try:
            head = handle.read(_PROBE)
        except OSError as exc:
            return Recorded(shown, [], error=f"{shown} cannot be read ({exc.strerror})")
        if b"\0" in head:
            return Recorded(shown, [], error=f"{shown} is binary, not JSON lines "
                                             "{time, stage, input}")
        handle.seek(0)
        since = None
        if window is not None:
            since = (now or datetime.now(UTC)).timestamp() - window.seconds
        return _lines(handle, shown, since)


def _lines(handle: Any, shown: str, since: float | None) -> Recorded:
    records: list[Record] = []
    skipped: list[int] = []
    count = 0
    described: list[str] = []
    total, number, outside, cut = 0, 0, 0, ""
    while True:
        if number >= MAX_LINES:
            cut = f"only its first {MAX_LINES:,} lines were read"
            break
        if total >= MAX_BYTES:
            cut = f"only its first {MAX_BYTES // (1024 * 1024)} MiB were read"
            break
        raw = handle.readline(MAX_LINE + 1)
        if not raw:
            break
        number += 1
        total += len(raw)
        if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # the rest of the long line, unread
                raw = handle.readline(MAX_LINE + 1)
                total += len(raw)
            why = f"longer than {MAX_LINE // 1024} KiB"
        else:
            if not raw.strip():
                continue
            found = _record(number, raw)
            if isinstance(found, Record):
                if since is not None and found.now_ns / 1e9 < since:
                    outside += 1
                else:
                    records.append(found)
                continue
            why = found
        count += 1
        if len(skipped) < KEPT_SKIPPED:
            skipped.append(number)
        if len(described) < DESCRIBED:
            described.append(f"line {number}: {why}")
    return Recorded(shown, records, count, tuple(skipped), tuple(described), cut=cut,
                    outside=outside)


def _record(number: int, raw: bytes) -> Record | str:
    """The record of one line, or why it is not one (the first may open with the byte
    order mark Windows tools write, as a manifest may)."""
    try:
        text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text"
    try:
        value = json.loads(text)
    except RecursionError:
        return "nested too deeply"
    except ValueError as exc:
        return f"not JSON ({str(exc).split(':')[0]})"
    if not isinstance(value, dict):
        return "not an object {time, stage, input}"
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and nested_over(value.get("input")):
        return f"input nested more than {MAX_DEPTH} levels deep"
    stage, item, when = value.get("stage"), value.get("input"), value.get("time")
    if not isinstance(stage, str) or stage not in ACTIONS:
        return f"stage must be one of {', '.join(ACTIONS)}"
    if not isinstance(item, dict):
        return "input must be an object"
    if not isinstance(when, str):
        return "time must be a time such as 2026-11-21T09:30:00Z"
    try:
        moment = datetime.fromisoformat(when)
    except ValueError:
        return f"time {when[:40]!r} is not a time such as 2026-11-21T09:30:00Z"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        now_ns = int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000
    except (OverflowError, ValueError, OSError):
        return f"time {when[:40]!r} is out of range"
    return Record(number, when, now_ns, str(stage), item)
