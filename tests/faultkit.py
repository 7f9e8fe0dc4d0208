"""A fault proxy in front of the reference server: the embedded server's storage (a
``refreshkit.Gov``'s) behind a real HTTP server, in a thread, whose answers to chosen
operations a test rewrites: a connection dropped before the request reaches the server,
a List page that leaves an object out once, a cursor that never ends, an answer of
hundreds of megabytes, a value echoed into a read.

    with FaultServer(gov) as server:
        server.rules["DeleteSigningKey"] = drop_before()
        gov.run("apply", ..., env=server.env)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn

from govsync.server import Store, create_app
from govsync.server.droppable import DroppableH11Protocol, connection_of
from testkit import free_port

KEY = "fault-proxy-key"

# What the app would have answered: (status, JSON body).
Answer = tuple[int, dict[str, Any]]
# A rule: (request body, a call of the real app with a body) -> the answer to send,
# or None: the connection is dropped without one.
Rule = Callable[[dict[str, Any], Callable[[dict[str, Any]], Awaitable[Answer]]],
                Awaitable[Answer | None]]


class FaultServer:
    """The reference server over ``gov``'s embedded storage, with ``rules`` by operation."""

    def __init__(self, gov: Any) -> None:
        from refreshkit import LOCAL_DB

        self.store = Store(str(gov.folder / LOCAL_DB))
        self.app = create_app(self.store, api_keys=[KEY])
        self.rules: dict[str, Rule] = {}
        self.calls: dict[str, int] = {}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {"GOVSYNC_ENDPOINT": self.url, "GOVSYNC_API_KEY": KEY}
        self._server = uvicorn.Server(uvicorn.Config(
            self._asgi, host="127.0.0.1", port=self.port, log_level="error", lifespan="off",
            http=DroppableH11Protocol, interface="asgi3"))  # type: ignore[arg-type]
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self) -> FaultServer:
        self._thread.start()
        started = threading.Event()

        def wait() -> None:
            while not self._server.started and self._thread.is_alive():
                started.wait(0.01)
        wait()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self.store.close()

    async def _asgi(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        operation = scope["path"].rsplit("/", 1)[-1]
        self.calls[operation] = self.calls.get(operation, 0) + 1
        rule = self.rules.get(operation)
        if rule is None:
            await self.app(scope, receive, send)
            return
        body = json.loads(await read_body(receive) or b"{}")

        async def real(request: dict[str, Any]) -> Answer:
            return await _call(self.app, scope, request)

        answer = await rule(body, real)
        if answer is None:
            connection = connection_of(scope)
            assert connection is not None
            connection.drop()
            return
        status, data = answer
        payload = json.dumps(data).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})


async def read_body(receive: Any) -> bytes:
    """An ASGI request's whole body."""
    raw = b""
    while True:
        message = await receive()
        raw += message.get("body", b"")
        if not message.get("more_body"):
            return raw


async def _call(app: Any, scope: Any, request: dict[str, Any]) -> Answer:
    """The real app's answer to ``request`` (its status and JSON)."""
    payload = json.dumps(request).encode()
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if delivered:
            await asyncio.Event().wait()
        delivered = True
        return {"type": "http.request", "body": payload, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
    inner = {**scope, "headers": [*headers, (b"content-length", str(len(payload)).encode())]}
    await app(inner, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(body or b"{}")


# -- rules --------------------------------------------------------------------------------


def drop_before(times: int = 1) -> Rule:
    """The first ``times`` calls: the connection dropped before the request reaches the
    server (nothing done, no answer); then passed through."""
    left = [times]

    async def rule(body: dict[str, Any], real: Callable[..., Awaitable[Answer]]
                   ) -> Answer | None:
        if left[0] > 0:
            left[0] -= 1
            return None
        return await real(body)
    return rule


def omit_once(key: str, object_id: str) -> Rule:
    """A List whose next page that holds ``object_id`` leaves it out, once (its count
    still counts it)."""
    left = [1]

    async def rule(body: dict[str, Any], real: Callable[..., Awaitable[Answer]]
                   ) -> Answer | None:
        status, data = await real(body)
        items = data.get(key) or []
        if left[0] and any(i.get("id") == object_id for i in items):
            left[0] -= 1
            data[key] = [i for i in items if i.get("id") != object_id]
        return status, data
    return rule


def endless(key: str, count: int | None = 1) -> Rule:
    """A List that hands a new cursor on every page, forever (``count``: what its
    metadata says there are; None: no count)."""
    pages = [0]

    async def rule(body: dict[str, Any], real: Callable[..., Awaitable[Answer]]
                   ) -> Answer | None:
        pages[0] += 1
        meta: dict[str, Any] = {"nextCursor": f"page-{pages[0]}"}
        if count is not None:
            meta["count"] = count
        return 200, {key: [], "listMetadata": meta}
    return rule


def huge(key: str, megabytes: int) -> Rule:
    """A List whose answer is ``megabytes`` MB of objects."""
    async def rule(body: dict[str, Any], real: Callable[..., Awaitable[Answer]]
                   ) -> Answer | None:
        filler = "x" * (1024 * 1024)
        return 200, {key: [{"id": f"big-{i}", "name": f"big-{i}", "description": filler}
                           for i in range(megabytes)],
                     "listMetadata": {"count": megabytes}}
    return rule


@contextlib.contextmanager
def serving(gov: Any) -> Any:
    with FaultServer(gov) as server:
        yield server
