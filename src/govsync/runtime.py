"""The one place that opens what the settings name: the state store, and the API
client for an endpoint (a URL, or ``local``: the embedded reference server, in
process).

Every command that reads or writes the state, or talks to the API, goes
through these functions; nothing below this layer opens either.  The client
(httpx) and the embedded server (Starlette) are imported only by the
functions that make them: offline commands never load them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from govsync import envvars
from govsync.api.kinds import SEEDED_KINDS
from govsync.envvars import API_KEY as API_KEY_ENV
from govsync.errors import ConfigError
from govsync.settings import Settings
from govsync.state import StateStore, open_store

if TYPE_CHECKING:
    from govsync.api.client import AsyncClient, RetryEvent

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, its result kept out of the task asyncio runs.  Python
    3.11's ``asyncio.run`` checks at its end that its SIGINT handler is still set
    with ``signal.getsignal``, which formats ``repr(handler)`` into an error it
    discards: the main task, and with it the whole result (a refresh of 1,000
    objects: 5.6 ms, twice).  The event loop, its handler and errors are as with
    ``asyncio.run``."""
    import asyncio  # where a command sends: offline commands never load it

    kept: list[T] = []

    async def keeping() -> None:
        kept.append(await main)

    asyncio.run(keeping())
    return kept[0]


def open_state(settings: Settings) -> StateStore:
    """The state store the settings name (a SQLite file or a PostgreSQL database)."""
    return open_store(settings.state)


def client(settings: Settings, *, connections: int = 1, reads: bool = False,
           max_retries: int = 4, on_retry: Callable[[RetryEvent], None] | None = None
           ) -> AsyncClient:
    """An API client for the configured endpoint (ConfigError when none), whose
    answers and messages never hold a secret this run knows (``Settings.secrets``).
    ``connections`` and ``reads``: how many calls it sends at once, and whether they
    are many reads (``api.transport.open_transport``); ``max_retries`` and
    ``on_retry``: its retry policy's."""
    return connect(settings.endpoint, settings.api_key, insecure_http=settings.insecure_http,
                   local_db=settings.local_db, local_seed=settings.local_seed,
                   local_operations=settings.environ.get(envvars.LOCAL_OPERATIONS),
                   key_variable=settings.key_variable, environment=settings.selection.name,
                   hidden=settings.secrets(), connections=connections, reads=reads,
                   max_retries=max_retries, on_retry=on_retry)


def report_client(settings: Settings, *, max_retries: int = 4) -> AsyncClient:
    """The API client impact reports are created and read with (``plan --impact``): the
    key in GOVSYNC_REPORT_API_KEY where it is set (one the team scopes to reports), else
    the command's own; errors name the variable it came from."""
    report_key = settings.environ.get(envvars.REPORT_API_KEY) or None
    key, variable = ((report_key, envvars.REPORT_API_KEY) if report_key
                     else (settings.api_key, settings.key_variable))
    return connect(settings.endpoint, key, insecure_http=settings.insecure_http,
                   local_db=settings.local_db, local_seed=settings.local_seed,
                   local_operations=settings.environ.get(envvars.LOCAL_OPERATIONS),
                   key_variable=variable, environment=settings.selection.name,
                   hidden=settings.secrets(), connections=8, max_retries=max_retries)


def connect(endpoint: str | None, api_key: str | None, *, insecure_http: bool = False,
            local_db: str | os.PathLike[str] | None = None, local_seed: str | None = None,
            local_operations: str | None = None, key_variable: str = API_KEY_ENV,
            environment: str | None = None, hidden: Sequence[str] = (),
            connections: int = 1, reads: bool = False, max_retries: int = 4,
            on_retry: Callable[[RetryEvent], None] | None = None) -> AsyncClient:
    """An AsyncClient for ``--endpoint``: a URL, or ``local`` (in-process, no key needed;
    ``local_operations`` ``spec``: the spec's operations only), over the transport
    ``api.transport.open_transport`` chooses for it. ``key_variable`` and
    ``environment``: where the key came from, for the messages."""
    from govsync.api import client, transport

    shown = f"{key_variable} (the key of environment {environment})" if environment else key_variable
    endpoint, api_key = client.check_endpoint(endpoint, api_key, shown)
    if endpoint == "local":  # the server's modules load only for the embedded server
        from govsync.server import Operations, Store, create_app

        try:
            operations = Operations(local_operations or Operations.ALL)
        except ValueError:
            raise ConfigError(f"{envvars.LOCAL_OPERATIONS} must be all or spec") from None
        if local_db is None:
            raise ConfigError("the embedded server needs its database file (local_db)")
        seed_local(local_seed, str(local_db))
        if os.fspath(local_db) != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(local_db)), exist_ok=True)
        store = Store(str(local_db))
        base_url = client.LOCAL_BASE_URL
        way = transport.open_transport(
            base_url, app=create_app(store, api_keys=None, operations=operations),
            on_close=store.close)
    else:
        base_url = endpoint
        way = transport.open_transport(endpoint, connections=connections, reads=reads,
                                       insecure_http=insecure_http)
    retry = client.RetryPolicy(max_retries=max_retries, on_retry=on_retry)
    return client.AsyncClient(base_url, api_key, transport=way, retry=retry,
                              key_variable=key_variable, environment=environment,
                              hidden=hidden)


def seed_local(seed: str | None, local_db: str) -> None:
    """Preload the embedded server's database with a seed file: the objects it does not
    hold yet (idempotent)."""
    from govsync.server import Store

    if local_db == ":memory:":
        return
    os.makedirs(os.path.dirname(local_db) or ".", exist_ok=True)
    if not seed:
        return
    # Read into a scratch store first: only the objects the database does not hold
    # yet are added, so a seed never undoes what an apply (or the service's
    # console) changed since: a link's terminationProtection stays as applied.
    fresh, store = Store(":memory:"), Store(local_db)
    try:
        fresh.load_seed(seed)
        for kind in SEEDED_KINDS:
            store.put_many(kind, [(o["id"], o, None) for o in fresh.list(kind)
                                  if not store.exists(kind, o["id"])])
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load seed {seed}: {exc}") from exc
    finally:
        fresh.close()
        store.close()
