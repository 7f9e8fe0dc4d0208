"""The library behind the commands: each command calls one function here.

Everything the CLI does is reachable without click: ``Settings`` carries the
global options (endpoint, API key, state URL, workspace), and ``validate``,
``plan``, ``apply``... take it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from govsync.errors import ApiError, ConfigError, TransportError, UnauthorizedError

if TYPE_CHECKING:
    from govsync.api.client import AsyncClient
    from govsync.manifests.loader import ManifestSet
    from govsync.plan import Plan
    from govsync.state.base import StateStore

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


def plan(paths: Sequence[str], settings: Settings) -> Plan:
    """Diff the manifests against the workspace's state (no lock taken)."""
    from govsync.plan import make_plan

    manifests = validate(paths)
    groups, skipped = live_groups(manifests, settings)
    with settings.open_state() as store:
        snapshot = store.snapshot(settings.workspace)
    return make_plan(manifests, snapshot, environ=settings.environ, groups=groups,
                     groups_skipped=skipped)


def live_groups(manifests: ManifestSet, settings: Settings) -> tuple[set[str] | None, str]:
    """Names of every group on the server, or None and why the check is skipped."""
    if not any(m.kind.live_refs for m in manifests.objects.values()):
        return None, "no policy names a group"
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
    data = json.dumps(plan.to_dict(), indent=1, sort_keys=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
