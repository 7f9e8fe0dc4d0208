"""How requests travel: one factory chooses the one httpx transport a client sends by.

    open_transport(base_url, ...)   the transport for an endpoint (below)
    Lanes                           a pool of one-connection transports
    key_auth(key)                   the X-API-KEY header, its repr hiding the key
    check_base_url(url, insecure)   the plain-http guard; the URL as messages show it

``open_transport`` decides, once, everything about the way to an endpoint:

- **in-process**: an ASGI app (the embedded reference server of ``local``, which
  ``runtime.py`` builds) called through ``httpx.ASGITransport``; else
- **the guard**: a plain ``http://`` URL is refused unless its host is loopback or
  the user passed ``--insecure-http``; certificate verification is never turned off;
- **TLS**: one verifying context (certifi's roots, as httpx's own), built once a
  process; plain http gets a bare context that is never used (httpx would build
  one per transport otherwise: 1-2 ms each);
- **the proxy** the environment names for this URL (HTTPS_PROXY, HTTP_PROXY,
  ALL_PROXY, less NO_PROXY), for every connection alike;
- **connections**: one httpx pool (``connections=1``), or ``Lanes``: that many
  transports of one connection each, for many calls in flight.  A client for many
  reads at once (``reads``: a refresh) has ``lanes.StreamLane`` lanes on asyncio
  streams and h11 (a third of httpcore's CPU a call), except through a proxy, where
  its lanes are httpx's own.

Whatever the choice, the client sends every request the same way
(``handle_async_request``) and reads every answer the same way.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import ssl
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass  # loaded by httpx already

import httpx

from govsync import errors
from govsync.api.lanes import StreamLane

__all__ = ["Lanes", "check_base_url", "environment_proxy", "key_auth", "open_transport",
           "shown_url"]


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


def shown_url(base_url: str) -> tuple[str, str | None]:
    """(the URL as shown in reprs and messages: no user info, query or fragment; its
    host).  ConfigError for a URL that is not http(s) with a host."""
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
    return shown, host


def check_base_url(base_url: str, insecure_http: bool) -> str:
    """The URL as shown (``shown_url``); ConfigError for plain http to a host that is not
    loopback, unless ``insecure_http``."""
    shown, host = shown_url(base_url)
    if base_url.startswith("http:") and not insecure_http and not _is_loopback(host or ""):
        raise errors.ConfigError(
            f"refusing plain http:// to {host}: the API key would cross the network "
            "unencrypted; use https://, or pass --insecure-http if you really mean it")
    return shown


def key_auth(api_key: str | None) -> httpx.Auth | None:
    """The auth that sends ``api_key`` as X-API-KEY (None: no key is sent)."""
    return _ApiKeyAuth(api_key) if api_key else None


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY,
    less what NO_PROXY exempts), as httpx's ``trust_env`` reads it; None: none."""
    found = getproxies()
    split = urlsplit(url)
    proxy = found.get(split.scheme) or found.get("all")
    if not proxy or proxy_bypass(split.hostname or ""):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


@functools.cache
def _verifying() -> ssl.SSLContext:
    """The default verifying TLS context (certifi's roots, as httpx uses), built once
    (building one costs ~20 ms)."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def _tls(base_url: str) -> ssl.SSLContext:
    """The context for ``base_url``'s connections: the verifying one for https; for
    plain http (never negotiated: redirects are not followed) a bare one, unused."""
    if base_url.startswith("https:"):
        return _verifying()
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def open_transport(base_url: str, *, app: Callable[..., Any] | None = None,
                   on_close: Callable[[], object] | None = None, connections: int = 1,
                   reads: bool = False, insecure_http: bool = False
                   ) -> httpx.AsyncBaseTransport:
    """The one transport for ``base_url`` (the module's docstring says how it is
    chosen).  ``app``: an ASGI app called in-process instead (``on_close`` runs when
    the client closes); ``connections``: calls in flight at once over lanes of one
    connection each (1: httpx's own pool); ``reads``: a client for many reads at once
    (a refresh), whose lanes are stream lanes where no proxy stands between.
    ConfigError for a URL the guard refuses."""
    if app is not None:
        return _LocalTransport(app, on_close)
    check_base_url(base_url, insecure_http)
    tls = _tls(base_url)
    proxy = environment_proxy(base_url)
    if reads and proxy is None:
        return Lanes(lambda: StreamLane(tls), connections, opens_ahead=True)
    if connections > 1 or reads:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        return Lanes(lambda: httpx.AsyncHTTPTransport(verify=tls, proxy=proxy, limits=limits),
                     connections)
    return httpx.AsyncHTTPTransport(verify=tls, proxy=proxy)


class Lanes(httpx.AsyncBaseTransport):
    """Up to ``count`` transports of one connection each (lanes), made as calls need
    them; each request takes a free lane and holds it until its answer is read.

    httpcore's pool walks every pooled connection (and polls each idle socket) for
    every request it assigns, so one pool shared by many concurrent callers costs
    more CPU than the calls; a lane is a bare transport of one connection.  Lanes
    are made as calls need them (64 made at once cost 35 ms of a plan whose refresh
    reads a few kinds in pages), or ahead of the calls by ``warm``."""

    def __init__(self, make: Callable[[], httpx.AsyncBaseTransport], count: int, *,
                 opens_ahead: bool = False) -> None:
        self._make = make
        self._count = max(1, count)
        self._made = 0
        self._idle: asyncio.Queue[httpx.AsyncBaseTransport] = asyncio.Queue()
        self._opens_ahead = opens_ahead

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._idle.empty() and self._made < self._count:
            lane = self._make()
            self._made += 1
        else:
            lane = await self._idle.get()
        try:
            response = await lane.handle_async_request(request)
        except BaseException:
            self._idle.put_nowait(lane)
            raise
        if isinstance(response.stream, httpx.ByteStream):  # read whole already
            self._idle.put_nowait(lane)
            return response
        # The lane is free again once its answer has been read (or given up).
        response.stream = _Releasing(response.stream, lambda: self._idle.put_nowait(lane))
        return response

    async def warm(self, url: httpx.URL, count: int, timeout: float | None) -> None:
        """Open up to ``count`` more lanes' connections to ``url`` now, for the calls
        that will follow (a refresh opens them while its first reads are answered:
        its Gets then find them open).  Never beyond the pool's lanes, and only where
        a lane can open its connection before a request (stream lanes).  Nothing is
        sent on them; a connection that cannot be made is left to the call that
        needs it, which says why."""
        if not self._opens_ahead:
            return
        made: list[StreamLane] = []
        while self._made < self._count and len(made) < count:
            lane = self._make()
            assert isinstance(lane, StreamLane)
            made.append(lane)
            self._made += 1

        async def opened(lane: StreamLane) -> None:
            try:
                await lane.warm(url, timeout)
            finally:
                self._idle.put_nowait(lane)

        await asyncio.gather(*(opened(lane) for lane in made))

    async def aclose(self) -> None:
        # The idle lanes only: closing one that carries a call would wait for its
        # answer (httpcore's connection holds its lock meanwhile), and an aborted
        # apply (a second Ctrl-C) leaves its calls in flight without waiting.
        while not self._idle.empty():
            await self._idle.get_nowait().aclose()


class _Releasing(httpx.AsyncByteStream):
    """An answer's body that gives its lane back when it is closed."""

    def __init__(self, stream: Any, release: Callable[[], None]) -> None:
        self._stream = stream
        self._release: Callable[[], None] | None = release

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._stream.__aiter__()  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


class _LocalTransport(httpx.ASGITransport):
    """An ASGI app in-process, and what to do when the client closes (the embedded
    server's store is closed)."""

    def __init__(self, app: Callable[..., Any], on_close: Callable[[], object] | None) -> None:
        super().__init__(app)
        self._on_close = on_close

    async def aclose(self) -> None:
        if self._on_close is not None:
            self._on_close()
