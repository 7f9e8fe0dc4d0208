"""How requests travel: the API key, the plain-http guard, in-process transports.

The key is added to each request by an ``httpx.Auth`` whose repr hides it.
A plain ``http://`` URL is refused unless its host is loopback or the user
passed ``--insecure-http``; certificate verification is never turned off.

``asgi_transport`` calls an ASGI app in-process (the embedded reference
server of the ``local`` endpoint, which ``runtime.py`` builds) through
``httpx.ASGITransport``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Generator
from typing import Any
from urllib.parse import urlsplit

import httpx

from govsync import errors

__all__ = ["asgi_transport", "check_base_url", "key_auth"]



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


class _LocalTransport(httpx.ASGITransport):
    def __init__(self, app: Callable[..., Any], on_close: Callable[[], object] | None) -> None:
        super().__init__(app)
        self._on_close = on_close

    async def aclose(self) -> None:
        if self._on_close is not None:
            self._on_close()


def asgi_transport(app: Callable[..., Any],
                   on_close: Callable[[], object] | None = None) -> httpx.AsyncBaseTransport:
    """``app`` called in-process; ``on_close`` runs when the client closes."""
    return _LocalTransport(app, on_close)
