"""The global options of every command, and the one place that wires an
endpoint (a URL, or ``local``: the embedded reference server) to a client."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from govsync.errors import ConfigError

if TYPE_CHECKING:
    from govsync.api.client import AsyncClient
    from govsync.project import Selection
    from govsync.state import StateStore

DEFAULT_STATE = os.path.join(".govsync", "state.db")
# Where ``--endpoint local`` keeps the embedded server's objects.
LOCAL_DB = os.path.join(".govsync", "local-api.db")
# The environment variable that turns logs on (govsync/logs.py).
LOG_ENV = "GOVSYNC_LOG"
# The environment variable the API key is read from (and only from).
API_KEY_ENV = "GOVSYNC_API_KEY"
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
    # Where ``--endpoint local`` keeps the embedded server's objects.
    local_db: str = LOCAL_DB
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ, repr=False)
    # --target patterns: only these addresses and what they depend on.
    targets: tuple[str, ...] = ()
    # The project file's environment and variables (empty without a project).
    selection: Selection = field(default_factory=lambda: _no_selection())

    def __post_init__(self) -> None:
        if not WORKSPACE_NAME.match(self.workspace):
            raise ConfigError(
                f"invalid workspace name {self.workspace!r}: use letters, digits, '.', '_' "
                "and '-' (at most 64 characters)"
            )

    def open_state(self) -> StateStore:
        from govsync.state import open_store

        return open_store(self.state)

    def client(self, **kw: Any) -> AsyncClient:
        """An API client for the configured endpoint (ConfigError when none)."""
        from govsync.api.client import connect

        if self.endpoint == "local":
            seed_local(self.local_seed, self.local_db)
        return connect(self.endpoint, self.api_key, insecure_http=self.insecure_http,
                       local_db=self.local_db, **kw)


def _no_selection() -> Selection:
    from govsync.project import Selection

    return Selection()


def seed_local(seed: str | None, local_db: str = LOCAL_DB) -> None:
    """Preload the embedded server's database with a seed file (idempotent)."""
    os.makedirs(os.path.dirname(local_db) or ".", exist_ok=True)
    if not seed:
        return
    from govsync.server.store import Store

    store = Store(local_db)
    try:
        store.load_seed(seed)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load seed {seed}: {exc}") from exc
    finally:
        store.close()
