"""The reference implementation of the control API (``govsync serve``).

    store = Store("api.db")                      # or Store() in memory
    store.load_seed("seed.yaml")                 # resources, groups, users, links
    app = create_app(store, api_keys=["k"])      # a Starlette app
    run(host="127.0.0.1", port=8080, db="api.db", api_keys=["k"], viewer_keys=[],
        seed=None, latency_ms=0, fault_rate=0.0) # serve it with uvicorn

Modules: ``app`` (request pipeline and checks), ``operations`` (the one
engine every operation runs through), ``shapes`` (per-kind output table),
``groups`` (ListGroups), ``store`` (SQLite storage and seeds), ``errors``
(error bodies), ``droppable`` (the uvicorn protocol fault injection drops).
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Sequence

from govsync.errors import ConfigError
from govsync.server.app import create_app
from govsync.server.store import SeedError, Store

__all__ = ["SeedError", "Store", "create_app", "run"]


def run(
    host: str,
    port: int,
    db: str,
    api_keys: Sequence[str],
    viewer_keys: Sequence[str],
    seed: str | None,
    latency_ms: int,
    fault_rate: float,
) -> None:
    """Serve the API on ``host:port`` until interrupted (one uvicorn worker)."""
    import uvicorn

    from govsync.server.droppable import DroppableH11Protocol

    try:
        store = Store(db)
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot open the server database {db}: {exc}") from exc
    if seed:
        try:
            store.load_seed(seed)
        except SeedError as exc:
            raise ConfigError(str(exc)) from exc
    if not api_keys:
        print(
            "govsync serve: warning: no --api-key given, any non-empty X-API-KEY is accepted",
            file=sys.stderr,
        )
    app = create_app(
        store,
        api_keys=list(api_keys),
        viewer_keys=list(viewer_keys),
        latency_ms=latency_ms,
        fault_rate=fault_rate,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        workers=1,
        log_level="warning",
        access_log=False,
        proxy_headers=False,
        server_header=False,
        http=DroppableH11Protocol,
        lifespan="off",
    )
    try:
        uvicorn.Server(config).run()
    finally:
        store.close()
