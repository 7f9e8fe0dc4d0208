"""The state commands (``govsync state ...``) and ``govsync audit export``: each
opens the store once, and those that change the state hold the workspace lock."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from govsync import audit, runtime
from govsync.api.kinds import BY_KIND
from govsync.api.resource import readable
from govsync.commands.endpoint import key_rejected
from govsync.errors import ConfigError, StateError, StateLockedError, UnauthorizedError
from govsync.manifests.manifest import ManifestSet
from govsync.plan import make_plan, recorded_at
from govsync.redact import url as safe_url
from govsync.settings import Settings
from govsync.state import (
    APPLIED,
    PENDING,
    UNCERTAIN,
    Entry,
    LockHolder,
    StateStore,
    exists,
    export,
    now,
)
from govsync.values import KNOWN_AFTER_APPLY, MissingSecret, Resolver


@contextlib.contextmanager
def _locked(settings: Settings) -> Iterator[StateStore]:
    """The state store with the workspace lock held."""

    with runtime.open_state(settings) as store:
        store.acquire(settings.workspace, LockHolder.me())
        try:
            yield store
        finally:
            store.release(settings.workspace)


def state_entry(settings: Settings, address: str) -> Entry:

    with runtime.open_state(settings) as store:
        entry = store.snapshot(settings.workspace).entries.get(address)
    if entry is None:
        raise StateError(f"{address} is not in the state of workspace {settings.workspace!r} "
                         "(`govsync state list` shows what is)")
    return entry


def state_forget(settings: Settings, addresses: list[str]) -> list[Entry]:
    """Drop entries (all of them, or none when one is not in state); the objects stay on
    the server."""
    with _locked(settings) as store:
        entries = store.snapshot(settings.workspace, responses=False).entries
        missing = [a for a in addresses if a not in entries]
        if missing:
            raise StateError(f"{missing[0]} is not in the state of workspace "
                             f"{settings.workspace!r} (`govsync state list` shows what is); "
                             "nothing was forgotten")
        found = [entries[a] for a in dict.fromkeys(addresses)]
        for entry in found:
            store.remove(settings.workspace, entry.address)
    return found


def state_resolve(settings: Settings, addresses: list[str], object_id: str | None
                  ) -> list[Entry]:
    """Settle uncertain creates: one exists with ``object_id``, or (None) none of them does.

    Refused while an apply holds the workspace (its creates in flight look
    uncertain until they are answered)."""

    if object_id is not None and len(addresses) != 1:
        raise ConfigError("--id settles one address at a time: give one address with --id ID")
    with _locked(settings) as store:
        entries = store.snapshot(settings.workspace).entries
        settled = []
        for address in addresses:
            entry = entries.get(address)
            if entry is None or entry.status not in (PENDING, UNCERTAIN):
                raise StateError(f"{address} is not uncertain in workspace "
                                 f"{settings.workspace!r}; nothing to resolve (nothing was changed)")
            settled.append(entry)
        if object_id is not None:
            _one_address(entries, settled[0].kind, object_id, settled[0].address)
        for entry in settled:
            if object_id is None:
                store.remove(settings.workspace, entry.address)
            else:
                entry.id, entry.status, entry.updated_at = object_id, APPLIED, now()
                store.put(settings.workspace, entry)
        return settled


def _one_address(entries: Mapping[str, Entry], kind: str, object_id: str,
                 address: str) -> None:
    """StateError when ``object_id`` is recorded at another address: one object, one
    address (an update sent to one would change the other's object too)."""

    holder = recorded_at(entries, kind, object_id)
    if holder is not None and holder != address:
        raise StateError(
            f"id {object_id} is already recorded at {holder}: one object has one address; "
            f"to re-address it run `govsync state mv {holder} {address}`; nothing was changed")


def state_move(settings: Settings, old: str, new: str) -> Entry:
    """Re-address an entry at once, without calling the API (as a Moved document does)."""

    kinds = {a.split("/", 1)[0] for a in (old, new) if "/" in a}
    if any(a.count("/") != 1 or not a.split("/")[1] for a in (old, new)) or not kinds <= set(
            BY_KIND):
        raise ConfigError(f"state mv {old} {new}: give two addresses Kind/name of known kinds")
    if len(kinds) != 1:
        raise ConfigError(f"cannot move {old} to {new}: a move keeps the kind")
    kind = BY_KIND[kinds.pop()]
    if kind.named and old.split("/", 1)[1] != new.split("/", 1)[1]:
        raise ConfigError(
            f"cannot move {old} to {new}: the name of a {kind.name} is its API name, and the API "
            "cannot rename; keep the old address, or create a new object under the new name")
    with _locked(settings) as store:
        entry = store.snapshot(settings.workspace, responses=False).entries.get(old)
        if entry is None:
            raise StateError(f"{old} is not in the state of workspace {settings.workspace!r}")
        store.rename(settings.workspace, old, new)
        entry.address = new
        return entry


def state_import(settings: Settings, address: str, object_id: str,
                 manifests: ManifestSet) -> tuple[Entry, str]:
    """Adopt an object that exists on the server: the manifest's spec becomes its baseline.
    Returns the entry and how its id was checked ("verified by GetHook", or why it could
    not be read); StateError where the server has no such object."""

    manifest = manifests.objects.get(address)
    if manifest is None:
        raise StateError(f"no manifest under {', '.join(manifests.files) or 'the paths given'} "
                         f"defines {address}")
    with _locked(settings) as store:
        snapshot = store.snapshot(settings.workspace)
        if address in snapshot.entries:
            raise StateError(f"{address} is already in state (id {snapshot.entries[address].id}); "
                             "`govsync state forget` it first to import another id")
        _one_address(snapshot.entries, manifest.kind.name, object_id, address)
        owner = store.recorded_elsewhere(settings.workspace, [object_id]).get(object_id)
        if owner is not None:
            raise StateError(f"{object_id} is recorded by workspace {owner[0]!r} as {owner[1]}: "
                             "an object belongs to one workspace of a state; nothing was "
                             "recorded")
        ids = {a: e.id for a, e in snapshot.entries.items() if e.status == APPLIED and e.id}
        try:
            _request, spec = Resolver(ids, snapshot.fingerprint, settings.environ).plan(
                manifest.template, manifest.holes)
        except MissingSecret:
            make_plan(manifests, snapshot, environ=settings.environ)  # raises with its place
            raise
        unknown = [k for k, v in spec.items() if v is KNOWN_AFTER_APPLY]
        if unknown:
            raise StateError(f"{address} references objects not in state ({', '.join(unknown)}): "
                             "import or apply them first")
        verified = _verify_id(settings, address, object_id, spec)
        entry = Entry(address, manifest.kind.name, object_id, APPLIED, spec, None, now())
        store.put(settings.workspace, entry)
        return entry, verified


def _verify_id(settings: Settings, address: str, object_id: str,
               spec: Mapping[str, Any]) -> str:
    """How ``object_id`` was checked: "verified by <the read that found it>", or why it
    was not read."""
    from govsync import refresh

    kind = BY_KIND[address.split("/", 1)[0]]
    if not readable(kind):
        return refresh.unread_reason(kind)
    if not settings.endpoint:
        return "no endpoint is configured to read it from"

    async def verify() -> str | None:
        async with runtime.client(settings) as client:
            return await refresh.verify_id(client, kind, address, object_id, spec)

    try:
        read = runtime.run(verify())
    except UnauthorizedError as exc:
        raise key_rejected(exc) from exc
    return f"verified by {read}" if read else refresh.unread_reason(kind)


def state_export(settings: Settings) -> dict[str, Any]:
    """The workspace as JSON (backup, or moving between SQLite and PostgreSQL)."""

    if not exists(settings.state):
        raise StateError(f"there is no state at {safe_url(settings.state)} to export")
    with runtime.open_state(settings) as store:
        return export.document(store.snapshot(settings.workspace))


def state_import_all(settings: Settings, data: Mapping[str, Any]) -> int:
    """Load an export into the workspace, replacing its entries; returns the new serial."""

    entries, lineage, key = export.read(data)
    with _locked(settings) as store:
        return store.replace_all(settings.workspace, entries, lineage, key)


def state_readonly_role(settings: Settings, role: str) -> list[str]:
    """The SQL that makes ``role`` the state's read-only role (PostgreSQL only)."""
    with runtime.open_state(settings) as store:
        grants = store.readonly_grants(role)
    if grants is None:
        raise ConfigError(
            f"{safe_url(settings.state)} is a SQLite file: it has no roles. Readers of "
            "a file may read all of it, so give them a copy of the state (its plan key, "
            "<file>.plan-key, is a file of its own that only its owner may read); for a "
            "shared state with a read-only role use postgresql://")
    return [_role_exists(role), *grants]


def _role_exists(role: str) -> str:
    """A first statement that stops the script (``psql -v ON_ERROR_STOP=1``, or any
    client that stops at an error) when ``role`` does not exist yet: one line, so the
    script runs statement by statement."""
    name = "'" + role.replace("'", "''") + "'"
    create = '"' + role.replace('"', '""') + '"'
    message = (f"role {role} does not exist: CREATE ROLE {create} LOGIN PASSWORD '...' "
               "first, then run these statements again").replace("'", "''").replace("%", "%%")
    tag = "$govsync_role_check$"
    if tag in role:
        raise ConfigError(f"role name {role!r}: it may not contain {tag}")
    return (f"DO {tag} BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {name}) THEN "
            f"RAISE EXCEPTION '{message}'; END IF; END {tag};")


def state_unlock(settings: Settings) -> tuple[Any, bool]:
    """Clear the recorded lock holder; (who held it, whether the lock is now free).

    The lock itself (flock, or PostgreSQL's session advisory lock) belongs to
    the holding process and ends with it; if that process still runs, the
    workspace stays locked until it exits."""

    with runtime.open_state(settings) as store:
        holder = store.holder(settings.workspace)
        try:  # taking the lock replaces a leftover record; releasing it clears ours
            store.acquire(settings.workspace, LockHolder.me(), timeout=0)
        except StateLockedError:
            return holder, False  # alive: its record stays, so others still see who
        store.release(settings.workspace)
        return holder, True


def state_history(settings: Settings, limit: int = 20) -> list[dict[str, Any]]:

    if not exists(settings.state):
        return []
    with runtime.open_state(settings) as store:
        return store.history(settings.workspace, limit)


def audit_export(settings: Settings, *, since: str | None, fmt: str) -> str:
    """``govsync audit export``: the workspace's apply records."""

    if not exists(settings.state):
        return audit.export([], settings.workspace, since=since, fmt=fmt)
    with runtime.open_state(settings) as store:
        history = store.history(settings.workspace, 1_000_000_000)
    return audit.export(history, settings.workspace, since=since, fmt=fmt)
