"""Both clients against ``govsync serve`` over real loopback TCP (uvicorn subprocess)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from govsync import errors
from govsync.api.client import AsyncClient, Client

pytestmark = pytest.mark.slow

KEY = "tcp-test-key"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def serve() -> Iterator[Callable[..., str]]:
    """``serve(*flags)`` starts ``govsync serve`` on a free port; the base URL."""
    pytest.importorskip("govsync.server")
    procs: list[subprocess.Popen[bytes]] = []

    def start(*flags: str) -> str:
        port = _free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "govsync", "serve", "--port", str(port), "--api-key", KEY,
             *flags], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"govsync serve exited: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            try:
                if httpx.get(f"{url}/_govsync/health", headers={"X-API-KEY": KEY}).is_success:
                    return url
            except httpx.TransportError:
                time.sleep(0.05)
        pytest.fail("govsync serve did not become healthy in 20s")

    yield start
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _spaces(url: str) -> list[dict[str, Any]]:
    objects = httpx.get(f"{url}/_govsync/objects", headers={"X-API-KEY": KEY}).json()
    return list(objects.get("Space", []))


def test_sync_client_over_tcp(serve: Callable[..., str]) -> None:
    url = serve()
    with Client(url, KEY) as client:
        created = client.create_space({"name": "over-tcp"})
        assert created["space"]["name"] == "over-tcp"
        assert "groups" in client.list_groups({})
        with pytest.raises(errors.InvalidRequestError):
            client.create_space({})
    with Client(url, "not-the-key") as client, pytest.raises(errors.UnauthorizedError):
        client.list_groups({})


@pytest.mark.anyio
async def test_async_client_over_tcp(serve: Callable[..., str]) -> None:
    url = serve()
    async with AsyncClient(url, KEY) as client:
        await client.create_space({"name": "over-tcp-async"})
        groups = await client.list_all_groups(page_size=2)
    assert groups == []
    assert [s["name"] for s in _spaces(url)] == ["over-tcp-async"]


def test_faults_over_tcp_never_repeat_a_create_after_a_drop(serve: Callable[..., str]) -> None:
    """With --fault-rate 1.0 every write fails: 500 (retried) or a dropped connection."""
    url = serve("--fault-rate", "1.0")
    outcomes: dict[str, type[Exception]] = {}
    with Client(url, KEY, max_retries=4, sleep=lambda s: None) as client:
        for i in range(8):
            name = f"faulty-{i}"
            with pytest.raises((errors.ServerError, errors.AmbiguousError)) as caught:
                client.create_space({"name": name})
            outcomes[name] = type(caught.value)
    stored = [s["name"] for s in _spaces(url)]
    for name, outcome in outcomes.items():
        # A drop stores the object once and is never retried; 500s store nothing.
        assert stored.count(name) == (1 if outcome is errors.AmbiguousError else 0), name
    # Each create is ambiguous unless all 5 attempts drew a 500 (1/32 each).
    assert errors.AmbiguousError in outcomes.values()
