"""The reference implementation of the control API (``govsync serve``).

    store = Store("api.db")                      # or Store() in memory
    store.load_seed("seed.yaml")                 # resources, groups, users, links, logs
    app = create_app(store, api_keys=["k"])      # a Starlette app

Modules: ``app`` (request pipeline and checks), ``operations`` (the one
engine every operation runs through), ``shapes`` (per-kind output table),
``listing`` (every List, paged as ListGroups), ``reports`` (impact reports over the
seeded logs), ``store`` (SQLite storage and seeds), ``errors``
(error bodies), ``serve`` (``govsync serve``: the listening socket, uvicorn,
the request log), ``droppable`` (the uvicorn protocol fault injection drops).
"""

from __future__ import annotations

from govsync.server.app import Operations, create_app
from govsync.server.store import SeedError, Store

__all__ = ["Operations", "SeedError", "Store", "create_app"]
