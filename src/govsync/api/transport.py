"""In-process transports: the reference server called without a network.

``httpx.ASGITransport`` serves ``AsyncClient``; ``SyncASGITransport`` gives the
synchronous ``Client`` the same thing by running the app on a private event
loop in a helper thread.  ``local_transport`` and ``local_sync_transport``
build the embedded reference server (the ``local`` endpoint) over a SQLite
file; the server package is imported only when they are called.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from anyio.from_thread import BlockingPortal

__all__ = ["DEFAULT_LOCAL_DB", "SyncASGITransport", "local_sync_transport", "local_transport"]

DEFAULT_LOCAL_DB = ".govsync/local-api.db"


class SyncASGITransport(httpx.BaseTransport):
    """Calls an ASGI app in-process from sync code (httpx.ASGITransport is async-only).

    The app runs on a private event loop in a helper thread (an anyio blocking
    portal started on first use and stopped by ``close``).
    """

    def __init__(self, app: Callable[..., Any], *, raise_app_exceptions: bool = True,
                 on_close: Callable[[], object] | None = None) -> None:
        self._inner = httpx.ASGITransport(app, raise_app_exceptions=raise_app_exceptions)
        self._on_close = on_close
        self._lock = threading.Lock()
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._closed = False

    def _get_portal(self) -> BlockingPortal:
        with self._lock:
            if self._closed:
                raise RuntimeError("the transport is closed")
            if self._portal is None:
                from anyio.from_thread import start_blocking_portal
                self._portal_cm = start_blocking_portal()
                self._portal = self._portal_cm.__enter__()
            return self._portal

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        inner = httpx.Request(request.method, request.url, headers=request.headers,
                              content=request.read(), extensions=request.extensions)
        status, headers, content = self._get_portal().call(self._send, inner)
        return httpx.Response(status, headers=headers, content=content)

    async def _send(self, request: httpx.Request) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        content = b"".join([chunk async for chunk in response.stream])
        await response.aclose()
        return response.status_code, response.headers.raw, content

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            cm, self._portal_cm, self._portal = self._portal_cm, None, None
        if cm is not None:
            cm.__exit__(None, None, None)
        if self._on_close is not None:
            self._on_close()


class _LocalTransport(httpx.ASGITransport):
    def __init__(self, app: Callable[..., Any], on_close: Callable[[], object] | None) -> None:
        super().__init__(app)
        self._on_close = on_close

    async def aclose(self) -> None:
        if self._on_close is not None:
            self._on_close()


def _local_app(db_path: str | Path) -> tuple[Callable[..., Any], Callable[[], object] | None]:
    from govsync.server import Store, create_app

    if str(db_path) != ":memory:":
        Path(db_path).parent.mkdir(parents=True, exist_ok=True)
    store = Store(str(db_path))
    return create_app(store), getattr(store, "close", None)


def local_transport(db_path: str | Path = DEFAULT_LOCAL_DB) -> httpx.AsyncBaseTransport:
    """The embedded reference server over ``db_path``, called in-process (async)."""
    app, on_close = _local_app(db_path)
    return _LocalTransport(app, on_close)


def local_sync_transport(db_path: str | Path = DEFAULT_LOCAL_DB) -> SyncASGITransport:
    """The embedded reference server over ``db_path``, called in-process (sync)."""
    app, on_close = _local_app(db_path)
    return SyncASGITransport(app, on_close=on_close)
