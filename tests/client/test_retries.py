"""Retries happen only where the policy says: count the calls the server saw."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from govsync import errors
from govsync.api.client import AsyncClient, RetryEvent, RetryPolicy

pytestmark = pytest.mark.anyio

SPACE = {"name": "analytics"}


async def _hook(client: AsyncClient) -> dict[str, Any]:
    created = await client.call("CreateHook", {"name": "risk", "code": "return true"})
    return {"hook": {**created["hook"], "description": "changed"}}


async def test_503_then_success_is_two_calls(server: Any, aclient_for: Any) -> None:
    events: list[RetryEvent] = []
    server.script("CreateSpace", 503)
    async with aclient_for(server, on_retry=events.append) as client:
        body = await client.call("CreateSpace", SPACE)
    assert body["space"]["name"] == "analytics"
    assert server.seen["CreateSpace"] == 2
    assert [(e.operation, e.attempt, e.status) for e in events] == [("CreateSpace", 1, 503)]


async def test_429_retry_after_seconds_is_honoured(
    server: Any, aclient_for: Any, sleeps: list[float],
) -> None:
    events: list[RetryEvent] = []
    server.script("ListGroups", (429, {"Retry-After": "3"}), (503, {"Retry-After": "1.5"}))
    async with aclient_for(server, on_retry=events.append) as client:
        await client.call("ListGroups", {})
    assert sleeps == [3.0, 1.5]
    assert [(e.status, e.delay) for e in events] == [(429, 3.0), (503, 1.5)]
    assert server.seen["ListGroups"] == 3


async def test_429_retry_after_http_date_is_honoured_and_capped(
    server: Any, aclient_for: Any, sleeps: list[float],
) -> None:
    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    later = format_datetime(datetime.now(UTC) + timedelta(hours=5), usegmt=True)
    server.script("ListGroups", (429, {"Retry-After": soon}), (429, {"Retry-After": later}))
    async with aclient_for(server) as client:
        await client.call("ListGroups", {})
    assert 25 < sleeps[0] <= 30
    assert sleeps[1] == 60.0  # capped at MAX_RETRY_AFTER


async def test_429_exhausted_raises_rate_limited(
    server: Any, aclient_for: Any, sleeps: list[float],
) -> None:
    server.script("CreateSpace", *[429] * 5)
    async with aclient_for(server, max_retries=2) as client:
        with pytest.raises(errors.RateLimitedError) as caught:
            await client.call("CreateSpace", SPACE)
    assert caught.value.status == 429
    assert server.seen["CreateSpace"] == 3


async def test_backoff_is_full_jitter_and_capped(
    server: Any, aclient_for: Any, sleeps: list[float],
) -> None:
    server.script("ListGroups", *[500] * 4)
    async with aclient_for(server, backoff=1.0, max_backoff=3.0) as client:
        await client.call("ListGroups", {})
    assert len(sleeps) == 4
    for attempt, delay in enumerate(sleeps, start=1):
        assert 0 <= delay <= min(3.0, 2 ** (attempt - 1))


async def test_400_is_one_call(server: Any, aclient_for: Any) -> None:
    async with aclient_for(server) as client:
        with pytest.raises(errors.InvalidRequestError):
            await client.call("UpdateHook", {"hook": {}})
    assert server.seen["UpdateHook"] == 1


async def test_dropped_create_is_ambiguous_and_sent_once(server: Any, aclient_for: Any) -> None:
    server.script("CreateSpace", "drop")
    async with aclient_for(server) as client:
        with pytest.raises(errors.AmbiguousError) as caught:
            await client.call("CreateSpace", SPACE)
        assert server.seen["CreateSpace"] == 1
        assert "outcome is unknown" in str(caught.value)
        assert isinstance(caught.value.__cause__, ConnectionResetError)


async def test_fault_injected_drop_on_create_is_ambiguous(
    make_server: Any, aclient_for: Any, drop_rng: Any,
) -> None:
    app = make_server(fault_rate=1.0, rng=drop_rng)
    async with aclient_for(app) as client:
        with pytest.raises(errors.AmbiguousError):
            await client.call("CreateSpace", SPACE)
    assert app.seen["CreateSpace"] == 1


async def test_dropped_retry_safe_update_is_retried(server: Any, aclient_for: Any) -> None:
    async with aclient_for(server) as client:
        update = await _hook(client)
        server.script("UpdateHook", "drop")
        body = await client.call("UpdateHook", update)
    assert body["hook"]["description"] == "changed"
    assert server.seen["UpdateHook"] == 2


async def test_gateway_answers_retry_updates_but_not_creates(
    server: Any, aclient_for: Any,
) -> None:
    async with aclient_for(server) as client:
        update = await _hook(client)
        server.script("UpdateHook", 502, 504)
        await client.call("UpdateHook", update)
        server.script("CreateSpace", 504)
        with pytest.raises(errors.AmbiguousError, match="504"):
            await client.call("CreateSpace", SPACE)
    assert server.seen["UpdateHook"] == 3
    assert server.seen["CreateSpace"] == 1


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_connection_refused_is_retried_then_transport_error(sleeps: list[float]) -> None:
    events: list[RetryEvent] = []
    url = f"http://127.0.0.1:{_closed_port()}"
    async with AsyncClient(url, "k", retry=RetryPolicy(max_retries=2, sleep=sleeps,
                                                       on_retry=events.append)) as client:
        with pytest.raises(errors.TransportError) as caught:
            await client.call("CreateSpace", SPACE)
    assert [(e.attempt, e.status, e.reason) for e in events] == [
        (1, None, "ConnectError"), (2, None, "ConnectError")]
    assert len(sleeps) == 2
    assert "after 3 attempts" in str(caught.value)
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


async def test_a_retried_create_then_a_dropped_one(
    server: Any, aclient_for: Any, sleeps: list[float],
) -> None:
    async with aclient_for(server) as client:
        server.script("CreateSpace", (503, {"Retry-After": "2"}))
        assert (await client.call("CreateSpace", SPACE))["space"]["name"] == "analytics"
        assert sleeps == [2.0] and server.seen["CreateSpace"] == 2
        server.script("CreateSpace", "drop")
        with pytest.raises(errors.AmbiguousError):
            await client.call("CreateSpace", {"name": "other"})
    assert server.seen["CreateSpace"] == 3


async def test_async_sleep_callable_is_awaited(server: Any, aclient_for: Any) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    server.script("ListGroups", (503, {"Retry-After": "0.5"}))
    async with aclient_for(server, sleep=sleep) as client:
        await client.call("ListGroups", {})
    assert slept == [0.5]
