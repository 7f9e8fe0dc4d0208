"""Fixtures: the real reference server in-process, and a middleware that scripts it.

``Scripted`` wraps the real app: it counts every call the server saw (by
operation), and for the first calls of an operation it can answer a status
the server never produces itself (429, 502, 503) or drop the connection
after the server did its work.  Everything else is the server's own answer.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from govsync.api.client import AsyncClient, RetryPolicy

KEY = "test-key-0123"
VIEWER = "viewer-key-4567"
BASE = "http://127.0.0.1"


def group(i: int) -> dict[str, Any]:
    return {"id": f"grp-{i:04d}", "name": f"group-{i:04d}", "description": "",
            "dsyncGroupId": "", "terminationProtection": False,
            "createdAt": "2024-01-01T00:00:00.000000000Z",
            "updatedAt": "2024-01-01T00:00:00.000000000Z"}


# One step of a script: an int answers that status; a (status, headers) pair
# too; "drop" lets the server act, then raises ConnectionResetError.
Step = int | tuple[int, dict[str, str]] | str


class Scripted:
    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: Counter[str] = Counter()
        self.scripts: dict[str, list[Step]] = {}

    def script(self, operation: str, *steps: Step) -> None:
        self.scripts[operation] = list(steps)

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any],
                       send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        operation = scope["path"].rsplit("/", 1)[-1]
        self.seen[operation] += 1
        steps = self.scripts.get(operation)
        step = steps.pop(0) if steps else None
        if step == "drop":
            await self.app(scope, receive, _discard)
            raise ConnectionResetError("connection dropped by the test")
        if step is None:
            await self.app(scope, receive, send)
            return
        status, headers = step if isinstance(step, tuple) else (step, {})
        body = json.dumps({"code": "scripted", "message": f"scripted {status}"}).encode()
        raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), *raw]})
        await send({"type": "http.response.body", "body": body})


async def _discard(message: dict[str, Any]) -> None:
    pass


def make_app(groups: int = 0, **kw: Any) -> Any:
    from govsync.server import Store, create_app

    store = Store(":memory:")
    if groups:
        store.load_seed({"groups": [group(i) for i in range(groups)]})
    kw.setdefault("api_keys", [KEY])
    kw.setdefault("viewer_keys", [VIEWER])
    return create_app(store, **kw)


class Sleeps(list[float]):
    """A fake sleep that records its delays."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def make_server() -> Callable[..., Scripted]:
    """``make_server(groups=N, **create_app_kw)``: the real app, wrapped in Scripted."""
    pytest.importorskip("govsync.server")

    def build(groups: int = 0, **kw: Any) -> Scripted:
        return Scripted(make_app(groups, **kw))

    return build


@pytest.fixture
def server(make_server: Callable[..., Scripted]) -> Scripted:
    return make_server(groups=3)


@pytest.fixture
def viewer_key() -> str:
    return VIEWER


def _seeded(fits: Callable[[random.Random], bool]) -> random.Random:
    """The first seeded rng whose draws ``fits`` accepts, fresh from its seed."""
    seed = next(s for s in range(10_000) if fits(random.Random(s)))
    return random.Random(seed)


def _branches(rng: random.Random, writes: int) -> list[str]:
    # The server's fault injection draws twice per write call: whether to
    # fail (always, at fault_rate 1.0), then 500 (< 0.5) or drop.
    return ["error" if (rng.random(), rng.random())[1] < 0.5 else "drop" for _ in range(writes)]


@pytest.fixture
def drop_rng() -> random.Random:
    """With fault_rate=1.0, the first write call is dropped after storing."""
    return _seeded(lambda rng: _branches(rng, 1) == ["drop"])


@pytest.fixture
def error_rng() -> random.Random:
    """With fault_rate=1.0, the first three write calls answer 500."""
    return _seeded(lambda rng: _branches(rng, 3) == ["error"] * 3)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def aclient_for(sleeps: Sleeps) -> Any:
    """Build an AsyncClient over an ASGI app; retries sleep in ``sleeps``."""

    def build(app: Any, key: str | None = KEY, **retry: Any) -> AsyncClient:
        """``retry``: the fields of the client's RetryPolicy (sleep: ``sleeps``)."""
        retry.setdefault("sleep", sleeps)
        return AsyncClient(BASE, key, transport=httpx.ASGITransport(app),
                           retry=RetryPolicy(**retry))

    return build

