"""How requests travel: the API key, the plain-http guard, in-process transports.

The key is added to each request by an ``httpx.Auth`` whose repr hides it.
A plain ``http://`` URL is refused unless its host is loopback or the user
passed ``--insecure-http``; certificate verification is never turned off.

``httpx.ASGITransport`` serves ``AsyncClient``; ``SyncASGITransport`` gives the
synchronous ``Client`` the same thing by running the app on a private event
loop in a helper thread.  ``local_transport`` and ``local_sync_transport``
build the embedded reference server (the ``local`` endpoint) over a SQLite
file; the server package is imported only when they are called.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from govsync import errors

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from anyio.from_thread import BlockingPortal

__all__ = [
    "DEFAULT_LOCAL_DB", "SyncASGITransport", "check_base_url", "key_auth",
    "local_sync_transport", "local_transport",
]

DEFAULT_LOCAL_DB = ".govsync/local-api.db"


class _ApiKeyAuth(httpx.Auth):
    """Adds X-API-KEY to each request; its repr never shows the key."""

    def __init__(self, key: str) -> None:
        self._key = key

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["X-API-KEY"] = self._key
        yield request

    def __repr__(self) -> str:
        return "<X-API-KEY (hidden)>"


def _is_loopback(host: str) -> bool:
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_base_url(base_url: str, insecure_http: bool) -> str:
    """The URL as shown in reprs and messages (no user info, query or fragment)."""
    parts = urlsplit(base_url)
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    netloc = f"[{host}]" if host and ":" in host else host or ""
    shown = f"{parts.scheme}://{netloc}{f':{port}' if port else ''}{parts.path}"
    if parts.scheme not in ("http", "https") or not host:
        raise errors.ConfigError(
            f"invalid endpoint URL {shown!r}: expected https://host[:port][/prefix] or `local`")
    if parts.scheme == "http" and not insecure_http and not _is_loopback(host):
        raise errors.ConfigError(
            f"refusing plain http:// to {host}: the API key would cross the network "
            "unencrypted; use https://, or pass --insecure-http if you really mean it")
    return shown


def key_auth(api_key: str | None) -> httpx.Auth | None:
    """The auth that sends ``api_key`` as X-API-KEY (None: no key is sent)."""
    return _ApiKeyAuth(api_key) if api_key else None


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
    return create_app(store, api_keys=None), getattr(store, "close", None)


def local_transport(db_path: str | Path = DEFAULT_LOCAL_DB) -> httpx.AsyncBaseTransport:
    """The embedded reference server over ``db_path``, called in-process (async)."""
    app, on_close = _local_app(db_path)
    return _LocalTransport(app, on_close)


def local_sync_transport(db_path: str | Path = DEFAULT_LOCAL_DB) -> SyncASGITransport:
    """The embedded reference server over ``db_path``, called in-process (sync)."""
    app, on_close = _local_app(db_path)
    return SyncASGITransport(app, on_close=on_close)
