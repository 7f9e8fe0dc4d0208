"""The client against ``govsync serve`` over real loopback TCP (uvicorn subprocess)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import testkit
from govsync import errors
from govsync.api.client import AsyncClient, RetryPolicy
from govsync.api.transport import open_transport

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

KEY = "tcp-test-key"


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """``serve(*flags)`` starts ``govsync serve`` on a free port; the base URL."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(*flags: str) -> str:
        proc, url = testkit.serve(["--api-key", KEY, *flags], key=KEY,
                                  output=tmp_path / f"serve-{len(procs)}.log")
        procs.append(proc)
        return url

    yield start
    for proc in procs:
        testkit.stop(proc)


def _spaces(url: str) -> list[dict[str, Any]]:
    objects = httpx.get(f"{url}/_govsync/objects", headers={"X-API-KEY": KEY}).json()
    return list(objects.get("Space", []))


# lanes > 1 is how apply sends (a bare transport per connection), reads how a refresh
# reads (lanes.StreamLane, on asyncio streams): the same answers, the same errors.
LANES = pytest.mark.parametrize(("lanes", "reads"), [(1, False), (4, False), (1, True),
                                                     (4, True)])


def client(url: str, key: str | None, lanes: int = 1, reads: bool = False,
           **retry: Any) -> AsyncClient:
    """A client over the transport ``open_transport`` makes for ``lanes`` and ``reads``."""
    return AsyncClient(url, key, transport=open_transport(url, connections=lanes, reads=reads),
                       retry=RetryPolicy(**retry))


@LANES
async def test_client_over_tcp(serve: Callable[..., str], lanes: int, reads: bool) -> None:
    url = serve()
    async with client(url, KEY, lanes=lanes, reads=reads) as api:
        created = await api.call("CreateSpace", {"name": "over-tcp"})
        assert created["space"]["name"] == "over-tcp"
        assert "groups" in await api.call("ListGroups", {})
        with pytest.raises(errors.InvalidRequestError):
            await api.call("CreateSpace", {})
        groups = await api.list_all_groups(page_size=2)
    assert groups == []
    assert [s["name"] for s in _spaces(url)] == ["over-tcp"]
    async with client(url, "not-the-key", lanes=lanes, reads=reads) as api:
        with pytest.raises(errors.UnauthorizedError):
            await api.call("ListGroups", {})
    async with client(url, None, lanes=lanes, reads=reads) as api:
        with pytest.raises(errors.UnauthorizedError):
            await api.call("ListGroups", {})


@LANES
async def test_many_calls_in_flight_over_tcp(serve: Callable[..., str], lanes: int,
                                            reads: bool) -> None:
    """More calls than lanes at once: each is sent once and answered."""
    import asyncio

    url = serve("--latency-ms", "20")
    async with client(url, KEY, lanes=lanes, reads=reads) as api:
        made = await asyncio.gather(*(api.call("CreateSpace", {"name": f"s{i}"}) for i in range(12)))
    assert sorted(m["space"]["name"] for m in made) == sorted(f"s{i}" for i in range(12))
    assert sorted(s["name"] for s in _spaces(url)) == sorted(f"s{i}" for i in range(12))


@LANES
async def test_faults_over_tcp_never_repeat_a_create_after_a_drop(
    serve: Callable[..., str], lanes: int, reads: bool,
) -> None:
    """With --fault-rate 1.0 every write fails: 500 (retried) or a dropped connection."""
    url = serve("--fault-rate", "1.0")
    outcomes: dict[str, type[Exception]] = {}
    async with client(url, KEY, lanes=lanes, reads=reads, max_retries=4,
                      sleep=lambda s: None) as api:
        for i in range(8):
            name = f"faulty-{i}"
            with pytest.raises((errors.ServerError, errors.AmbiguousError)) as caught:
                await api.call("CreateSpace", {"name": name})
            outcomes[name] = type(caught.value)
    stored = [s["name"] for s in _spaces(url)]
    for name, outcome in outcomes.items():
        # A drop stores the object once and is never retried; 500s store nothing.
        assert stored.count(name) == (1 if outcome is errors.AmbiguousError else 0), name
    # Each create is ambiguous unless all 5 attempts drew a 500 (1/32 each).
    assert errors.AmbiguousError in outcomes.values()


async def test_a_read_lane_that_cannot_connect_says_nothing_was_sent() -> None:
    """Nothing listens: the read lanes' failure is the client's "could not reach" (a
    connection never made), retried, as httpx's own transport says it."""
    url = f"http://127.0.0.1:{testkit.free_port()}"
    async with client(url, KEY, lanes=4, reads=True, max_retries=1,
                      sleep=lambda s: None) as api:
        with pytest.raises(errors.TransportError, match="could not reach .* after 2 attempts"):
            await api.call("ListGroups", {})


@LANES
async def test_every_transport_honours_the_environments_proxy(
        serve: Callable[..., str], lanes: int, reads: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP_PROXY names a proxy that is down: every call goes to it, so none reaches
    the server (a lane that went straight there would bypass a corporate proxy);
    NO_PROXY exempts the server's host."""
    url = serve()
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{testkit.free_port()}")
    async with client(url, KEY, lanes=lanes, reads=reads, max_retries=0) as api:
        with pytest.raises(errors.TransportError, match="could not reach"):
            await api.call("ListGroups", {})
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    async with client(url, KEY, lanes=lanes, reads=reads, max_retries=0) as api:
        assert "groups" in await api.call("ListGroups", {})


def _connections_to(port: int) -> int:
    """This process's TCP connections to ``port`` (Linux's /proc)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/self/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[len("socket:["):-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                if fields[9] in inodes and int(fields[2].rsplit(":", 1)[1], 16) == port:
                    count += 1
    return count


async def test_warm_opens_the_read_lanes_sends_nothing_and_never_more_than_lanes(
        serve: Callable[..., str]) -> None:
    """A refresh opens the connections its Gets will take while its Lists are answered:
    at most the client's lanes, nothing sent on them; where nothing listens, the calls
    that follow say so, as without it."""
    url = serve()
    port = int(url.rsplit(":", 1)[1])
    async with client(url, KEY, lanes=4, reads=True) as api:
        await api.warm(10)
        assert _connections_to(port) == 4
        health = httpx.get(f"{url}/_govsync/health", headers={"X-API-KEY": KEY}).json()
        assert health["inFlight"] == 0 and _spaces(url) == []
        await api.warm(10)  # the lanes are made: nothing more
        assert _connections_to(port) == 4
        made = await asyncio.gather(*(api.call("CreateSpace", {"name": f"w{i}"})
                                      for i in range(6)))
        assert len(made) == 6 and _connections_to(port) == 4
    down = f"http://127.0.0.1:{testkit.free_port()}"
    async with client(down, KEY, lanes=4, reads=True, max_retries=0) as api:
        await api.warm(4)
        with pytest.raises(errors.TransportError, match="could not reach"):
            await api.call("ListGroups", {})
