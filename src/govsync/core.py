"""The library behind the commands: each command calls one function here.

Everything the CLI does is reachable without click: ``Settings`` carries the
global options (endpoint, API key, state URL, workspace), and ``validate``,
``plan``, ``apply``... take it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from govsync.errors import ApiError, ConfigError, TransportError, UnauthorizedError

if TYPE_CHECKING:
    from govsync.api.client import AsyncClient
    from govsync.apply import ApplyResult
    from govsync.drift import DriftReport
    from govsync.manifests.loader import ManifestSet
    from govsync.plan import Plan
    from govsync.state.base import Entry, Snapshot, StateStore

DEFAULT_STATE = os.path.join(".govsync", "state.db")
LOCAL_DB = os.path.join(".govsync", "local-api.db")
WORKSPACE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")


@dataclass
class Settings:
    """The global options of every command."""

    endpoint: str | None = None
    api_key: str | None = field(default=None, repr=False)
    state: str = DEFAULT_STATE
    workspace: str = "default"
    insecure_http: bool = False
    local_seed: str | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ, repr=False)

    def __post_init__(self) -> None:
        if not WORKSPACE_NAME.match(self.workspace):
            raise ConfigError(
                f"invalid workspace name {self.workspace!r}: use letters, digits, '.', '_' "
                "and '-' (at most 64 characters)"
            )

    def open_state(self) -> StateStore:
        from govsync.state.base import open_store

        return open_store(self.state)

    def client(self, **kw: Any) -> AsyncClient:
        """An API client for the configured endpoint (ConfigError when none)."""
        from govsync.api.client import connect

        if self.endpoint == "local":
            seed_local(self.local_seed)
        return connect(self.endpoint, self.api_key, insecure_http=self.insecure_http,
                       local_db=LOCAL_DB, **kw)


def seed_local(seed: str | None) -> None:
    """Preload the embedded server's database with a seed file (idempotent)."""
    os.makedirs(os.path.dirname(LOCAL_DB), exist_ok=True)
    if not seed:
        return
    from govsync.server.store import Store

    store = Store(LOCAL_DB)
    try:
        store.load_seed(seed)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load seed {seed}: {exc}") from exc
    finally:
        store.close()


def validate(paths: Sequence[str]) -> ManifestSet:
    """Load and check manifests offline; raises ManifestError with every problem."""
    from govsync.manifests.loader import load

    return load(paths)


def load_for_plan(paths: Sequence[str], settings: Settings) -> ManifestSet:
    """Validate, and check that every secret's variable is set, before any state is touched."""
    from govsync.errors import ManifestError
    from govsync.plan import missing_secrets

    manifests = validate(paths)
    problems = missing_secrets(manifests, settings.environ)
    if problems:
        raise ManifestError(problems)
    return manifests


def plan(paths: Sequence[str], settings: Settings) -> Plan:
    """Diff the manifests against the workspace's state (no lock taken)."""
    manifests = load_for_plan(paths, settings)
    with settings.open_state() as store:
        snapshot = store.snapshot(settings.workspace, responses=False)
    return plan_with(manifests, snapshot, settings)


def plan_with(manifests: ManifestSet, snapshot: Snapshot, settings: Settings, *,
              only_creates: bool = False) -> Plan:
    """Plan against a snapshot, checking policy owner groups live (ListGroups)."""
    from govsync.plan import check_live_refs, live_refs_to_check, make_plan

    result = make_plan(manifests, snapshot, environ=settings.environ)
    wanted = live_refs_to_check(result, manifests, only_creates=only_creates)
    if wanted:
        groups, skipped = live_groups(settings)
        check_live_refs(result, wanted, groups, skipped)
    return result


def live_groups(settings: Settings) -> tuple[set[str] | None, str]:
    """Names of every group on the server, or None and why the check is skipped."""
    if not settings.endpoint:
        return None, "no endpoint configured (offline plan)"

    async def fetch() -> set[str]:
        async with settings.client(max_retries=1) as client:
            return {g["name"] for g in await client.list_all_groups()}

    try:
        return asyncio.run(fetch()), ""
    except UnauthorizedError as exc:
        raise ConfigError(
            "the API rejected the key (401): check GOVSYNC_API_KEY for this endpoint"
        ) from exc
    except TransportError as exc:
        return None, f"endpoint unreachable ({exc.message})"
    except ApiError as exc:
        return None, f"ListGroups failed ({exc})"


def write_plan_file(plan: Plan, path: str) -> None:
    """Save a plan for ``govsync apply FILE`` (atomic: never a half-written file)."""
    from govsync.errors import PlanError

    data = json.dumps(plan.to_dict(), sort_keys=True, separators=(",", ":"))
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise PlanError(f"cannot write the plan to {path}: {exc.strerror}") from exc


def read_plan_file(path: str) -> Plan:
    """A plan saved by ``govsync plan --out``."""
    from govsync.errors import PlanError
    from govsync.plan import PLAN_FORMAT, Plan

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise PlanError(f"cannot read saved plan {path}: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != PLAN_FORMAT:
        raise PlanError(f"{path} is not a govsync plan file (format {PLAN_FORMAT})")
    try:
        return Plan.from_dict(data)
    except (KeyError, TypeError) as exc:
        raise PlanError(f"{path} is not a valid govsync plan file: missing {exc}") from exc


def is_plan_file(paths: Sequence[str]) -> bool:
    """``govsync apply FILE``: one file that is not a YAML manifest."""
    return (len(paths) == 1 and os.path.isfile(paths[0])
            and not paths[0].endswith((".yaml", ".yml")))


def apply(
    paths: Sequence[str],
    settings: Settings,
    *,
    confirm: Callable[[Plan], bool] | None = None,
    parallelism: int = 32,
    forget_orphans: bool = False,
    lock_timeout: float = 0.0,
    reporter: Any = None,
) -> tuple[Plan, ApplyResult]:
    """Plan (or read a saved plan) and apply it under the workspace lock.

    ``confirm`` is shown the plan and returns whether to go on (None: go on).
    """
    import asyncio as aio

    from govsync import apply as applier
    from govsync.errors import PlanError
    from govsync.state.base import LockHolder

    saved = read_plan_file(paths[0]) if is_plan_file(paths) else None
    manifests = None if saved else load_for_plan(paths, settings)
    with settings.open_state() as store:
        store.acquire(settings.workspace, LockHolder.me(), timeout=lock_timeout)
        try:
            snapshot = store.snapshot(settings.workspace)
            if saved is not None:
                if saved.workspace != settings.workspace:
                    raise PlanError(
                        f"the plan is for workspace {saved.workspace!r}, not "
                        f"{settings.workspace!r}: pass --workspace {saved.workspace}")
                applier.check_saved_plan(saved, snapshot)
                the_plan = saved
            else:
                assert manifests is not None
                the_plan = plan_with(manifests, snapshot, settings, only_creates=True)
            if the_plan.blocked():
                from govsync.errors import BlockedPlanError

                raise BlockedPlanError(
                    f"the plan has {len(the_plan.blocked())} blocked change(s) the API cannot "
                    "make: revert them in the manifests; nothing was applied")
            applier.check_secrets(the_plan, snapshot, settings.environ)
            work = [c for c in the_plan.changes if c.action in ("create", "update")
                    or (forget_orphans and c.action == "orphan")]
            if not work:
                return the_plan, applier.ApplyResult()
            if confirm is not None and not confirm(the_plan):
                raise PlanError("apply cancelled; nothing was changed")
            result = aio.run(applier.run(
                the_plan, store, snapshot,
                lambda on_retry: settings.client(on_retry=on_retry, lanes=parallelism),
                environ=settings.environ, parallelism=parallelism,
                forget_orphans=forget_orphans, reporter=reporter,
            ))
            store.add_history(settings.workspace, history_record(the_plan, result, saved is not None))
            return the_plan, result
        finally:
            store.release(settings.workspace)


def history_record(plan: Plan, result: ApplyResult, saved: bool) -> dict[str, Any]:
    """Who applied what, when, with which outcome (no secret: addresses and codes)."""
    from govsync.state.base import LockHolder, now

    me = LockHolder.me()
    return {
        "at": now(),
        "user": me.user,
        "host": me.host,
        "command": me.command,
        "savedPlan": saved,
        "serialBefore": plan.serial,
        "summary": result.summary(),
        "ok": result.ok,
        "changes": [
            {"address": o.address, "action": o.action, "status": o.status, "id": o.id,
             "code": o.code, "error": o.error}
            for o in result.outcomes
        ],
    }


def drift(paths: Sequence[str], settings: Settings) -> DriftReport:
    """The scheduled check: manifests against state, and live checks where a read exists.

    With an endpoint configured, an unreachable API is an error (exit 1): a
    drift job must not report "in sync" when it could not look.
    """
    from govsync import drift as d
    from govsync.plan import make_plan

    manifests = load_for_plan(paths, settings)
    with settings.open_state() as store:
        snapshot = store.snapshot(settings.workspace, responses=False)
    the_plan = make_plan(manifests, snapshot, environ=settings.environ)
    if settings.endpoint:
        groups, skipped = live_groups(settings)
        if groups is None:
            raise ApiError(f"cannot run the live checks: {skipped}")
    else:
        groups, skipped = None, "no endpoint configured (GOVSYNC_ENDPOINT / --endpoint)"
    live = [d.group_check(manifests, groups, skipped)]
    return d.DriftReport(the_plan, live, d.unobservable(manifests))


# -- state commands -------------------------------------------------------------


@contextlib.contextmanager
def _locked(settings: Settings) -> Iterator[StateStore]:
    """The state store with the workspace lock held."""
    from govsync.state.base import LockHolder

    with settings.open_state() as store:
        store.acquire(settings.workspace, LockHolder.me())
        try:
            yield store
        finally:
            store.release(settings.workspace)


def state_entry(settings: Settings, address: str) -> Entry:
    from govsync.errors import StateError

    with settings.open_state() as store:
        entry = store.snapshot(settings.workspace).entries.get(address)
    if entry is None:
        raise StateError(f"{address} is not in the state of workspace {settings.workspace!r} "
                         "(`govsync state list` shows what is)")
    return entry


def state_forget(settings: Settings, address: str) -> Entry:
    """Drop one entry; the object stays on the server."""
    entry = state_entry(settings, address)
    with _locked(settings) as store:
        store.remove(settings.workspace, address)
    return entry


def state_resolve(settings: Settings, address: str, object_id: str | None) -> Entry:
    """Settle an uncertain create: it exists with ``object_id``, or (None) it does not."""
    from govsync.errors import StateError
    from govsync.state.base import APPLIED, PENDING, UNCERTAIN, now

    with _locked(settings) as store:
        entry = store.snapshot(settings.workspace).entries.get(address)
        if entry is None or entry.status not in (PENDING, UNCERTAIN):
            raise StateError(f"{address} is not uncertain in workspace {settings.workspace!r}; "
                             "nothing to resolve")
        if object_id is None:
            store.remove(settings.workspace, address)
            return entry
        entry.id, entry.status, entry.updated_at = object_id, APPLIED, now()
        store.put(settings.workspace, entry)
        return entry


def state_import(settings: Settings, address: str, object_id: str, paths: Sequence[str]) -> Entry:
    """Adopt an object that exists on the server: the manifest's spec becomes its baseline."""
    from govsync.errors import StateError
    from govsync.plan import KNOWN_AFTER_APPLY, resolve
    from govsync.state.base import APPLIED, Entry, now

    manifests = validate(paths)
    manifest = manifests.objects.get(address)
    if manifest is None:
        raise StateError(f"no manifest under {', '.join(paths)} defines {address}")
    with _locked(settings) as store:
        snapshot = store.snapshot(settings.workspace)
        if address in snapshot.entries:
            raise StateError(f"{address} is already in state (id {snapshot.entries[address].id}); "
                             "`govsync state forget` it first to import another id")
        problems: list[Any] = []
        _request, spec = resolve(manifest, snapshot, {}, settings.environ, problems)
        if problems:
            from govsync.errors import ManifestError

            raise ManifestError(problems)
        unknown = [k for k, v in spec.items() if v == KNOWN_AFTER_APPLY]
        if unknown:
            raise StateError(f"{address} references objects not in state ({', '.join(unknown)}): "
                             "import or apply them first")
        entry = Entry(address, manifest.kind.name, object_id, APPLIED, spec, None, now())
        store.put(settings.workspace, entry)
        return entry


def state_export(settings: Settings) -> dict[str, Any]:
    """The workspace as JSON (backup, or moving between SQLite and PostgreSQL)."""
    import base64

    with settings.open_state() as store:
        snap = store.snapshot(settings.workspace)
    return {
        "govsyncState": 1,
        "workspace": snap.workspace,
        "lineage": snap.lineage,
        "serial": snap.serial,
        # The fingerprint key keeps secrets' fingerprints comparable after a move.
        "fingerprintKey": base64.b64encode(snap.key).decode(),
        "entries": [e.as_dict() for e in snap.entries.values()],
    }


def state_import_all(settings: Settings, data: Mapping[str, Any]) -> int:
    """Load an export into the workspace, replacing its entries; returns the new serial."""
    import base64

    from govsync.errors import StateError
    from govsync.state.base import Entry

    if data.get("govsyncState") != 1:
        raise StateError("not a govsync state export (missing govsyncState: 1)")
    try:
        entries = [
            Entry(e["address"], e["kind"], e.get("id"), e["status"], e.get("spec"),
                  e.get("response"), e.get("updatedAt", ""))
            for e in data["entries"]
        ]
        key = base64.b64decode(data["fingerprintKey"])
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"invalid state export: {exc}") from exc
    with _locked(settings) as store:
        return store.replace_all(settings.workspace, entries, data.get("lineage"), key)


def state_unlock(settings: Settings) -> tuple[Any, bool]:
    """Clear the recorded lock holder; (who held it, whether the lock is now free).

    The lock itself (flock, or PostgreSQL's session advisory lock) belongs to
    the holding process and ends with it; if that process still runs, the
    workspace stays locked until it exits."""
    from govsync.errors import StateLockedError
    from govsync.state.base import LockHolder

    with settings.open_state() as store:
        holder = store.holder(settings.workspace)
        try:  # taking the lock replaces a leftover record; releasing it clears ours
            store.acquire(settings.workspace, LockHolder.me(), timeout=0)
        except StateLockedError:
            return holder, False  # alive: its record stays, so others still see who
        store.release(settings.workspace)
        return holder, True


def state_history(settings: Settings, limit: int = 20) -> list[dict[str, Any]]:
    with settings.open_state() as store:
        return store.history(settings.workspace, limit)
