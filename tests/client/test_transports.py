"""One client, every transport: each request shape the client sends, run over each
transport ``api.transport.open_transport`` chooses, against the real reference server
(in-process for ``local``, else ``testkit.Served`` on loopback), has the same outcome.

The shapes: a create, a replace-all update, a Get, List pages, a delete, 4xx error
bodies (a rejected field, an unknown id, a refused key), a 500 retried, a dropped
connection (ambiguous: never sent twice), an answer over the size cap; and each
through the proxy HTTP_PROXY names (every request reaches it), which NO_PROXY
exempts (none does), and HTTPS_PROXY's tunnel for an https endpoint.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

import testkit
from govsync import errors
from govsync.api import client as client_module
from govsync.api.client import LOCAL_BASE_URL, AsyncClient, RetryEvent, RetryPolicy
from govsync.api.transport import Lanes, open_transport
from govsync.server import Store, create_app

pytestmark = pytest.mark.anyio

KEY = "equivalence-key-0123"
PROXIES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Draws:
    """The reference server's fault draws, scripted: each ``random()`` the next value,
    then 0.99 (no fault).  At fault_rate 0.5, (0.0, 0.0) is a 500 (nothing stored) and
    (0.0, 0.9) a drop after the object is stored."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def random(self) -> float:
        return self.values.pop(0) if self.values else 0.99


class ForwardProxy:
    """The proxy HTTP_PROXY names: each request (absolute-form) forwarded to its origin
    on a connection of its own per client connection, counted; a CONNECT (HTTPS_PROXY)
    is counted and refused.  Where the origin drops a connection, so does the proxy."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="proxy")
        self._thread.start()
        self._ready.wait(10)
        self.url = f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self._server = self.loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self.loop.run_forever()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self._server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                line, _, rest = head.partition(b"\r\n")
                method, target, version = line.split(b" ")
                self.seen.append(f"{method.decode()} {target.decode()}")
                if method == b"CONNECT":
                    writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                    await writer.drain()
                    return
                body = await reader.readexactly(_length(rest))
                url = urlsplit(target.decode())
                if upstream is None:
                    upstream = await asyncio.open_connection(url.hostname, url.port)
                up_reader, up_writer = upstream
                path = url.path + (f"?{url.query}" if url.query else "")
                up_writer.write(b" ".join((method, path.encode(), version)) + b"\r\n"
                                + rest + body)
                try:
                    answer = await up_reader.readuntil(b"\r\n\r\n")
                    answer += await up_reader.readexactly(_length(answer.partition(b"\r\n")[2]))
                except (asyncio.IncompleteReadError, ConnectionError):
                    writer.transport.abort()  # the origin dropped it: so does the proxy
                    return
                writer.write(answer)
                await writer.drain()
        finally:
            if upstream is not None:
                upstream[1].close()
            writer.close()


def _length(headers: bytes) -> int:
    for line in headers.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


@pytest.fixture
def proxy() -> Iterator[ForwardProxy]:
    found = ForwardProxy()
    yield found
    found.close()


@pytest.fixture
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


def _serve() -> testkit.Served:
    return testkit.Served(["--api-key", KEY, "--db", ":memory:", "--seed",
                           str(testkit.EXAMPLE_SEED)])


@pytest.fixture
def served() -> Iterator[testkit.Served]:
    server = _serve()
    yield server
    server.stop()


class Counted:
    """An ASGI app, its requests counted."""

    def __init__(self, app: Any) -> None:
        self.app, self.requests = app, 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.requests += scope["type"] == "http"
        await self.app(scope, receive, send)


def _faults(server: testkit.Served) -> Draws:
    """The served reference server's fault injection, scripted (fault rate 0.5)."""
    reference = server._server.config.app.state.server
    draws = Draws()
    reference.fault_rate, reference.rng = 0.5, draws
    return draws


# Each kind of transport the factory makes for a URL: (connections, reads).
NETWORK = {"httpx pool": (1, False), "httpx lanes": (4, False), "stream lanes": (4, True),
           "one stream lane": (1, True)}


def _outcome(result: Any) -> Any:
    """What a call came to, without what differs from one server to the next (ids,
    times, cursors) or one connection to the next (the words of the exception that
    ended one, and sizes: an error's message up to its parenthesis, numbers out)."""
    if isinstance(result, errors.ApiError):
        words = re.sub(r"\d[\d,]*", "N", result.message.split(" (")[0])
        return (type(result).__name__, getattr(result, "status", None),
                getattr(result, "code", None), getattr(result, "details", None), words)
    if isinstance(result, dict):
        return {k: _outcome(v) for k, v in result.items()
                if k not in ("id", "createdAt", "updatedAt", "nextCursor", "after", "before")}
    if isinstance(result, list):
        return [_outcome(v) for v in result]
    return result


async def _shapes(client: AsyncClient, draws: Draws, events: list[RetryEvent]
                  ) -> dict[str, Any]:
    """Every request shape the client sends, and what each came to."""
    found: dict[str, Any] = {}

    async def shape(name: str, operation: str, body: dict[str, Any]) -> Any:
        try:
            found[name] = answer = await client.call(operation, body)
        except errors.ApiError as exc:
            found[name] = exc
            return None
        return answer

    hook = await shape("create", "CreateHook", {"name": "h1", "code": "a", "description": "d"})
    hook_id = hook["hook"]["id"]
    await shape("replace-all update", "UpdateHook", {"hook": {
        "id": hook_id, "name": "h1", "code": "b", "description": "changed"}})
    await shape("get", "GetHook", {"id": hook_id})
    for name in ("s1", "s2", "s3"):
        await shape(f"create {name}", "CreateSpace", {"name": name})
    first = await shape("list page", "ListSpaces", {"limit": 2})
    await shape("next page", "ListSpaces", {
        "limit": 2, "cursor": first["listMetadata"]["nextCursor"]})
    found["every group"] = await client.list_all_groups(page_size=1)
    await shape("delete", "DeleteHook", {"id": hook_id})
    await shape("4xx: unknown id", "GetHook", {"id": hook_id})
    await shape("4xx: a field rejected", "CreateSpace", {})
    draws.values[:] = [0.0, 0.0]
    await shape("500 retried", "CreateSpace", {"name": "retried"})
    found["retries"] = [(e.operation, e.attempt, e.status, e.reason) for e in events]
    draws.values[:] = [0.0, 0.9]
    await shape("dropped: ambiguous", "CreateSpace", {"name": "dropped"})
    listed = await client.call("ListSpaces", {"limit": 100})
    found["stored once"] = sorted(s["name"] for s in listed["spaces"])
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(client_module, "MAX_ANSWER_BYTES", 64)
        await shape("over the size cap", "ListSpaces", {"limit": 100})
    return found


def _client(url: str, transport: httpx.AsyncBaseTransport, events: list[RetryEvent],
            key: str = KEY) -> AsyncClient:
    return AsyncClient(url, key, transport=transport, retry=RetryPolicy(
        max_retries=2, sleep=lambda s: None, on_retry=events.append))


async def _in_process() -> tuple[dict[str, Any], int]:
    """What the shapes come to in-process, and how many requests they are."""
    draws, events = Draws(), []
    store = Store(":memory:")
    store.load_seed(testkit.EXAMPLE_SEED)
    app = Counted(create_app(store, api_keys=[KEY], fault_rate=0.5,
                             rng=draws))  # type: ignore[arg-type]
    transport = open_transport(LOCAL_BASE_URL, app=app, on_close=store.close)
    async with _client(LOCAL_BASE_URL, transport, events) as client:
        return await _shapes(client, draws, events), app.requests


async def test_every_request_shape_has_one_outcome_over_every_transport(
        no_proxies: pytest.MonkeyPatch, proxy: ForwardProxy) -> None:
    """The in-process transport is the reference; httpx's pool, its lanes, the stream
    lanes and each of them through HTTP_PROXY say the same, call for call."""
    expected, requests = await _in_process()
    # The shapes are what they claim to be (and the same everywhere, below).
    assert expected["retries"] == [("CreateSpace", 1, 500, "500")]
    assert isinstance(expected["dropped: ambiguous"], errors.AmbiguousError)
    assert expected["stored once"] == ["dropped", "retried", "s1", "s2", "s3"]
    assert isinstance(expected["4xx: unknown id"], errors.NotFoundError)
    assert isinstance(expected["4xx: a field rejected"], errors.InvalidRequestError)
    assert "at most" in expected["over the size cap"].message
    assert expected["replace-all update"]["hook"]["description"] == "changed"
    for via_proxy in (False, True):
        if via_proxy:
            no_proxies.setenv("HTTP_PROXY", proxy.url)
        for name, (connections, reads) in NETWORK.items():
            server = _serve()
            try:
                draws, events = _faults(server), []
                transport = open_transport(server.url, connections=connections, reads=reads)
                assert isinstance(transport, Lanes) == (connections > 1 or reads)
                before = len(proxy.seen)
                async with _client(server.url, transport, events) as client:
                    found = await _shapes(client, draws, events)
            finally:
                server.stop()
            label = f"{name}{' via HTTP_PROXY' if via_proxy else ''}"
            assert {k: _outcome(v) for k, v in found.items()} == {
                k: _outcome(v) for k, v in expected.items()}, label
            # Every request went through the proxy where one is named, none elsewhere.
            sent = len(proxy.seen) - before
            assert sent == (requests if via_proxy else 0), (label, proxy.seen[before:])


async def test_a_refused_key_is_one_error_over_every_transport(
        served: testkit.Served, no_proxies: pytest.MonkeyPatch) -> None:
    outcomes = []
    store = Store(":memory:")
    app = create_app(store, api_keys=[KEY])
    transports: dict[str, Callable[[], httpx.AsyncBaseTransport]] = {
        "in-process": lambda: open_transport(LOCAL_BASE_URL, app=app, on_close=store.close)}
    for name, (connections, reads) in NETWORK.items():
        transports[name] = lambda c=connections, r=reads: open_transport(
            served.url, connections=c, reads=r)
    for name, make in transports.items():
        url = LOCAL_BASE_URL if name == "in-process" else served.url
        for key in ("not-the-key-at-all", None):
            async with _client(url, make(), [], key=key) as client:
                with pytest.raises(errors.UnauthorizedError) as caught:
                    await client.call("ListGroups", {})
            outcomes.append((name, key, _outcome(caught.value)[:4]))
    assert len({outcome for _, _, outcome in outcomes}) == 1, outcomes


async def test_no_proxy_exempts_the_endpoint_on_every_transport(
        served: testkit.Served, no_proxies: pytest.MonkeyPatch, proxy: ForwardProxy) -> None:
    no_proxies.setenv("HTTP_PROXY", proxy.url)
    no_proxies.setenv("NO_PROXY", "127.0.0.1")
    for name, (connections, reads) in NETWORK.items():
        async with _client(served.url, open_transport(
                served.url, connections=connections, reads=reads), []) as client:
            assert "groups" in await client.call("ListGroups", {}), name
    assert proxy.seen == []


async def test_https_proxy_tunnels_an_https_endpoint_on_every_transport(
        no_proxies: pytest.MonkeyPatch, proxy: ForwardProxy) -> None:
    """HTTPS_PROXY: every transport asks the proxy for a tunnel to the endpoint (this
    one refuses it: nothing was sent, not retried); NO_PROXY: none asks, each connects
    itself (nothing listens there: not reached)."""
    port = testkit.free_port()
    url = f"https://127.0.0.1:{port}"
    no_proxies.setenv("HTTPS_PROXY", proxy.url)
    said = set()
    for name, (connections, reads) in NETWORK.items():
        before = len(proxy.seen)
        async with _client(url, open_transport(url, connections=connections, reads=reads),
                           []) as client:
            with pytest.raises(errors.TransportError, match="could not reach") as caught:
                await client.call("ListGroups", {})
        assert proxy.seen[before:] == [f"CONNECT 127.0.0.1:{port}"], name
        said.add(type(caught.value.__cause__).__name__)
    assert said == {"ProxyError"}
    no_proxies.setenv("NO_PROXY", "127.0.0.1")
    before = len(proxy.seen)
    for connections, reads in NETWORK.values():
        async with _client(url, open_transport(url, connections=connections, reads=reads),
                           []) as client:
            with pytest.raises(errors.TransportError, match="could not reach"):
                await client.call("ListGroups", {})
    assert proxy.seen[before:] == []
