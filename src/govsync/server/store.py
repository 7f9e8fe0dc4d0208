"""Storage of the reference server: one SQLite table, mirrored in memory.

Every object of every kind is one row ``(kind, id, key, seq, body)``:
``body`` is the object exactly as the API returns it (JSON), ``key`` a second
lookup key for objects addressed by something other than their id (a
connector AI provider by its ``connectorId``), ``seq`` the order of first
insertion.  The table is the source of truth on disk (``--db FILE`` keeps
every object across restarts); a dictionary per kind mirrors it so that
reads never touch SQLite.  Each write commits on its own (WAL,
``synchronous=NORMAL``: a crash of the process loses nothing that was
answered, a power cut at most the last transactions).
"""

from __future__ import annotations

import calendar
import contextlib
import copy
import datetime
import json
import os
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from govsync.api.kinds import SEEDED_KINDS
from govsync.files import PRIVATE_MODE, nesting_refused, yaml_loader
from govsync.policycode.stages import STAGES

JsonObject = dict[str, Any]
# Nesting levels a seed may have (its objects have a handful).
MAX_SEED_DEPTH = 100


def _read_seed(raw: bytes) -> Any:
    """A seed file's data.  A file of JSON (no deeper than MAX_SEED_DEPTH) is read as
    JSON; any other, bytes go to the loader, so text that is not UTF-8 is a
    YAMLError like any other.  libyaml composes recursively in C, and a few
    tens of thousands of levels overflow the stack (a crash): the nesting is
    measured on the parser's events first, which it keeps on the heap."""
    if raw.lstrip()[:1] == b"{":  # JSON, a subset of YAML, read as JSON (ten times faster)
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            data = None  # read as YAML, which says where it is wrong
        if data is not None and _depth(data) <= MAX_SEED_DEPTH:
            return data
    loader = yaml_loader()
    depth = 0
    try:
        for event in yaml.parse(raw, Loader=loader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_SEED_DEPTH:
                    raise _too_deep(event.start_mark)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.MarkedYAMLError as exc:
        if nesting_refused(exc):  # libyaml's own limit, met scanning ahead
            raise _too_deep(exc.problem_mark) from None
        raise
    return yaml.load(raw, Loader=loader)


def _depth(data: Any) -> int:
    """How deep JSON data nests (a scalar: 0)."""
    deepest, level = 0, [(data, 1)]
    while level:
        value, depth = level.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, depth)
            level.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict)
                                                   else value))
    return deepest


def _too_deep(mark: Any) -> yaml.YAMLError:
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    return yaml.YAMLError(f"{where}nested deeper than {MAX_SEED_DEPTH} levels")


def seed_key(kind: str) -> str:
    """The top-level key of a seed file that lists a kind: ``ConnectorListenerLink``
    -> ``connectorListenerLinks`` (contract section 4)."""
    return kind[:1].lower() + kind[1:] + "s"


# Top-level keys of a seed file and the kind each holds.
SEED_KEYS: dict[str, str] = {seed_key(kind): kind for kind in SEEDED_KINDS}

# Fields a seeded object gets when the seed leaves them out.
SEED_DEFAULTS: dict[str, JsonObject] = {
    "Resource": {"aliases": [], "tags": [], "terminationProtection": False},
    "Group": {"description": "", "dsyncGroupId": "", "terminationProtection": False},
    "User": {"groupIds": [], "terminationProtection": False},
    "ConnectorListenerLink": {"terminationProtection": False},
    "SidecarResourceLink": {"terminationProtection": False},
}
assert set(SEED_DEFAULTS) <= set(SEEDED_KINDS)

# A logged request (``logs:``): when, at which stage, and the input the service decided on.
LOG_KIND = "Log"
_STAGE_NAMES = tuple(row.stage.value for row in STAGES)

# RFC 3339: a date, a time, an optional fraction, Z or an offset.
_INSTANT = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
                      r"(?:[Zz]|([+-])(\d{2}):(\d{2}))")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    kind TEXT NOT NULL,
    id   TEXT NOT NULL,
    key  TEXT,
    seq  INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX IF NOT EXISTS objects_key ON objects (kind, key);
"""

_UPSERT = (
    "INSERT INTO objects (kind, id, key, seq, body) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (kind, id) DO UPDATE SET key = excluded.key, body = excluded.body"
)


class SeedError(ValueError):
    """A seed file is not of the documented shape."""


def timestamp(ns: int | None = None) -> str:
    """RFC 3339, UTC, nanosecond resolution: ``2026-11-21T19:34:10.123456789Z``."""
    if ns is None:
        ns = time.time_ns()
    seconds, fraction = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{fraction:09d}Z"


def instant(text: Any) -> int | None:
    """An RFC 3339 time as nanoseconds since 1970 (None: not one)."""
    found = _INSTANT.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        return None
    year, month, day, hour, minute, second, fraction, sign, oh, om = found.groups()
    try:
        seconds = calendar.timegm((int(year), int(month), int(day), int(hour), int(minute),
                                   int(second), 0, 0, 0))
        datetime.date(int(year), int(month), int(day))
    except ValueError:
        return None
    if int(hour) > 23 or int(minute) > 59 or int(second) > 60:
        return None
    if sign:
        seconds -= (1 if sign == "+" else -1) * (int(oh) * 3600 + int(om) * 60)
    return seconds * 1_000_000_000 + int((fraction or "").ljust(9, "0"))


def _log_problem(entry: Mapping[str, Any]) -> str:
    """What is wrong with a seeded log entry ('' for nothing)."""
    if instant(entry.get("time")) is None:
        return "time must be an RFC 3339 time (2026-11-21T09:30:00Z)"
    if entry.get("stage") not in _STAGE_NAMES:
        return f"stage must be one of {', '.join(_STAGE_NAMES)}"
    if not isinstance(entry.get("input"), Mapping):
        return "input must be a mapping (the input the service decided on)"
    return ""


def new_id(prefix: str) -> str:
    """A fresh, unique, well-formed id: ``<prefix>-<32 hex digits>``."""
    return f"{prefix}-{uuid.uuid4().hex}"


def _dumps(body: Mapping[str, Any]) -> str:
    # ASCII: lone surrogates inside free-form objects survive as \u escapes.
    return json.dumps(body, separators=(",", ":"))


class Store:
    """Every object of the reference server, by kind and id.

    Bodies handed in belong to the store afterwards and bodies handed out must
    not be mutated: build a new dictionary to change an object.
    """

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        # The lock makes the store safe for the test client, which runs the app in a
        # thread of its own.
        self._lock = threading.RLock()
        # Every read is served from memory; a database file (``--db``) is where the
        # objects are kept across restarts, written through.  In memory, nothing is.
        self._db: sqlite3.Connection | None = None
        if self.path != ":memory:":
            # A new file is the owner's alone (what the API keeps includes secrets); one
            # that cannot be made is for SQLite to refuse, in its words.
            with contextlib.suppress(OSError):
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE))
            self._db = sqlite3.connect(self.path, check_same_thread=False,
                                       isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        self._objects: dict[str, dict[str, JsonObject]] = {}
        self._keys: dict[str, dict[str, str]] = {}
        # Bumped on every write of a kind: list caches compare it.
        self._versions: dict[str, int] = {}
        self._seq = 0
        # Closed (``close``): what still runs beside the requests (a report) stores nothing.
        self.closed = False
        stored = () if self._db is None else self._db.execute(
            "SELECT kind, id, key, seq, body FROM objects ORDER BY seq")
        for kind, id_, key, seq, body in stored:
            self._remember(kind, id_, key, json.loads(body))
            self._seq = max(self._seq, seq)

    # --- reads --------------------------------------------------------------

    def get(self, kind: str, id_: str) -> JsonObject | None:
        return self._objects.get(kind, {}).get(id_)

    def get_by_key(self, kind: str, key: str) -> JsonObject | None:
        id_ = self._keys.get(kind, {}).get(key)
        return None if id_ is None else self.get(kind, id_)

    def exists(self, kind: str, id_: str) -> bool:
        return id_ in self._objects.get(kind, {})

    def list(self, kind: str) -> list[JsonObject]:
        """Every object of a kind, in the order they were first stored."""
        return list(self._objects.get(kind, {}).values())

    def count(self, kind: str) -> int:
        return len(self._objects.get(kind, {}))

    def version(self, kind: str) -> int:
        return self._versions.get(kind, 0)

    # --- writes -------------------------------------------------------------

    def put(self, kind: str, id_: str, body: JsonObject, *, key: str | None = None) -> None:
        """Insert or replace one object and commit."""
        self.put_many(kind, [(id_, body, key)])

    def put_many(self, kind: str, items: Iterable[tuple[str, JsonObject, str | None]]) -> None:
        """Insert or replace several objects of a kind in one transaction."""
        with self._lock:
            items = list(items)
            rows = []
            for id_, body, key in items:
                self._seq += 1
                rows.append((kind, id_, key, self._seq, body))
            if self._db is not None:
                self._write(rows)
            for id_, body, key in items:
                self._remember(kind, id_, key, body)

    def _write(self, rows: Sequence[tuple[str, str, str | None, int, JsonObject]]) -> None:
        """Rows written to the database file, in one transaction."""
        assert self._db is not None
        dumped = [(*row[:4], _dumps(row[4])) for row in rows]
        if len(dumped) == 1:
            self._db.execute(_UPSERT, dumped[0])  # autocommit: its own transaction
            return
        self._db.execute("BEGIN")
        try:
            self._db.executemany(_UPSERT, dumped)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def delete(self, kind: str, id_: str) -> None:
        """Remove one object and commit (nothing when there is none)."""
        with self._lock:
            if self._db is not None:
                self._db.execute("DELETE FROM objects WHERE kind = ? AND id = ?", (kind, id_))
            self._objects.get(kind, {}).pop(id_, None)
            keys = self._keys.get(kind, {})
            for key in [k for k, v in keys.items() if v == id_]:
                del keys[key]
            self._versions[kind] = self._versions.get(kind, 0) + 1

    def _remember(self, kind: str, id_: str, key: str | None, body: JsonObject) -> None:
        self._objects.setdefault(kind, {})[id_] = body
        if key is not None:
            self._keys.setdefault(kind, {})[key] = id_
        self._versions[kind] = self._versions.get(kind, 0) + 1

    # --- seed -----------------------------------------------------------------

    def load_seed(self, source: str | Path | Mapping[str, Any]) -> int:
        """Preload resources, groups, users, links and logged requests; returns how many
        objects.

        ``source`` is a YAML file or the mapping it holds.  Re-seeding the
        same ids replaces those objects (seeding is idempotent).
        """
        if isinstance(source, Mapping):
            data: Any = source
        else:
            try:
                data = _read_seed(Path(source).read_bytes())
            except (OSError, yaml.YAMLError, RecursionError) as exc:
                raise SeedError(f"cannot read seed {source}: {exc}") from exc
        if data is None:
            return 0
        if not isinstance(data, Mapping):
            raise SeedError("a seed is a mapping of resources, groups, users, links and logs")
        unknown = sorted(set(data) - set(SEED_KEYS))
        if unknown:
            raise SeedError(f"unknown seed key(s) {', '.join(map(str, unknown))}; "
                            f"expected {', '.join(SEED_KEYS)}")
        now = timestamp()
        total = 0
        for seed_key, kind in SEED_KEYS.items():
            entries = data.get(seed_key) or []
            if not isinstance(entries, list):
                raise SeedError(f"{seed_key}: expected a list")
            items: list[tuple[str, JsonObject, str | None]] = []
            for index, entry in enumerate(entries):
                if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str) \
                        or not entry["id"]:
                    raise SeedError(f"{seed_key}[{index}]: expected a mapping with a string id")
                body = _jsonable(entry)
                problem = _log_problem(body) if kind == LOG_KIND else ""
                if problem:
                    raise SeedError(f"{seed_key}[{index}]: {problem}")
                for name, default in SEED_DEFAULTS.get(kind, {}).items():
                    body.setdefault(name, copy.deepcopy(default))
                body.setdefault("createdAt", now)
                body.setdefault("updatedAt", body["createdAt"])
                items.append((body["id"], body, None))
            self.put_many(kind, items)
            total += len(items)
        return total

    def close(self) -> None:
        with self._lock:
            self.closed = True
            if self._db is not None:
                self._db.close()


def _jsonable(value: Any) -> Any:
    """YAML may hold dates and other non-JSON scalars: make them JSON values."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)
